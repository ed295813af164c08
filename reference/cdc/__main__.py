"""``python -m reference.cdc``: stream a Postgres publication through a slot into a sync server.

    python -m reference.cdc --source postgresql://USER@HOST:PORT/DB --publication P --slot S \\
        --sync grpc://HOST:PORT [--create-slot [--snapshot initial|never] [--state-dir DIR]] \\
        [--until-lsn current|LSN] [--max-retained-wal SIZE] [--spill SIZE] [--verify --store DIR]

One process, one sync origin (the slot's name). The pipeline on PySpark, with the streaming
shuffle routing by key to several sinks, is ``python -m reference.pipeline --source ...``.
Errors are one line on stderr: exit 2 for the set-up (connection, password, publication, slot,
wal_level), 1 for anything that stopped the stream or a failed verification. Once streaming, an
outage of the sync server or of Postgres is waited out, with a warning line every 30 s
(``--max-retained-wal`` stops it before the slot's WAL fills the database's disk).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streamwire.extras import exit_without

if __name__ == "__main__":
    exit_without("cdc", "python -m reference.cdc")

from reference.cdc.pgwire import PgAddress, PgConnectionError, PgServerError  # noqa: E402
from reference.cdc.replicate import TransactionRefused, WalRetentionExceeded, replicate, settled_durable
from reference.cdc.source import SlotSource, SlotSpec, SourceSetupError
from reference.cdc.verify import verify
from reference.sync.client import SyncClient, SyncUnavailable
from streamwire.cli import one_line
from spec.pgoutput.errors import PgOutputError
from spec.pgoutput.messages import format_lsn
from spec.pgoutput.outage import OutagePolicy, parse_bytes
from spec.pgoutput.snapshot import SnapshotRefused
from spec.pgoutput.spill import SPILL_BYTES


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m reference.cdc", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", required=True, help="a libpq connection string: postgresql://USER@HOST:PORT/DB"
                                             "[?sslmode=verify-full&sslrootcert=CA.pem], 'service=NAME' or "
                                             "key=value pairs; libpq's password file and PG* variables apply")
    p.add_argument("--publication", required=True)
    p.add_argument("--slot", required=True, help="logical replication slot (pgoutput); also the sync origin")
    p.add_argument("--create-slot", action="store_true", help="create the slot if it does not exist")
    p.add_argument("--snapshot", choices=("initial", "never"), default="initial",
                   help="when --create-slot creates the slot: first copy the rows the tables hold, in the slot's "
                        "snapshot (initial, the default), or stream only what commits after it (never)")
    p.add_argument("--state-dir", default="", metavar="DIR",
                   help="where the snapshot's progress record is kept, to resume it after a crash "
                        "(default: the working directory)")
    p.add_argument("--until-lsn", help="stop once every change committed before this LSN is durable "
                                       "('current': the WAL position at start); default: run until stopped")
    p.add_argument("--max-retained-wal", type=_size, metavar="SIZE",
                   help="while waiting for the sync server, stop once the slot retains more WAL than this "
                        "(e.g. 20GB); default: wait for as long as it takes")
    p.add_argument("--spill", type=_size, default=SPILL_BYTES, metavar="SIZE",
                   help="hold at most about this much of an open transaction's changes in memory (as pgoutput "
                        "bytes), the rest in a temporary file until its commit (default: 8MB)")
    p.add_argument("--sync", required=True, help="sync server location, grpc://HOST:PORT")
    p.add_argument("--verify", action="store_true", help="then compare every table with the Delta store (--store)")
    p.add_argument("--store", help="the sync server's store directory (for --verify)")
    return p


def _size(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.verify and not args.store:
        print("cdc: --verify needs --store", file=sys.stderr)
        return 2
    try:
        address = PgAddress.parse(args.source)
    except ValueError as exc:
        print(f"cdc: {exc}", file=sys.stderr)
        return 2
    source = SlotSource(address, SlotSpec(args.slot, args.publication, args.create_slot, args.until_lsn,
                                          snapshot=args.snapshot == "initial", state_dir=args.state_dir,
                                          spill_bytes=args.spill))
    policy = OutagePolicy(args.slot, max_retained_wal=args.max_retained_wal)
    client = SyncClient(args.sync, origin=args.slot, deadline_s=policy.attempt_s)
    try:
        try:
            source.open(durable=lambda: settled_durable(client))
        except (SourceSetupError, PgServerError, PgConnectionError, ValueError) as exc:
            print(f"cdc: {one_line(exc, typed=False, whole=True)}", file=sys.stderr)
            return 2
        counts = replicate(source, client, policy=policy)
    except (PgOutputError, PgServerError, PgConnectionError, SourceSetupError, TransactionRefused,
            WalRetentionExceeded, SnapshotRefused, SyncUnavailable, TimeoutError) as exc:
        print(f"cdc: {one_line(exc, typed=False, whole=True)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        source.close()
        client.close()
    durable = "none" if counts.durable is None else format_lsn(counts.durable)
    print(f"cdc: {counts.transactions} transactions, {counts.rows} rows, durable at {durable}")
    if args.verify:
        differences = verify(address, args.publication, Path(args.store))
        for difference in differences:
            print(difference.line())
        if differences:
            return 1
        print("pipeline OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
