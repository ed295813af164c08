"""``python -m reference.pipeline``: run the CDC pipeline once; exit 0 only if the table matches."""

from __future__ import annotations

import argparse
import sys

from streamwire.cli import HelpFormatter, guarded
from streamwire.extras import exit_without

if __name__ == "__main__":
    exit_without("pipeline", "python -m reference.pipeline")

from reference.pipeline.job import Options, PipelineError, run  # noqa: E402 - after the extra's check


def _parser() -> argparse.ArgumentParser:
    d = Options()
    p = argparse.ArgumentParser(prog="python -m reference.pipeline", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--changes", type=int, default=d.changes, help="row changes to generate (all origins)")
    p.add_argument("--keys", type=int, default=d.keys, help="size of the key space")
    p.add_argument("--origins", type=int, default=d.origins, help="source origins (databases)")
    p.add_argument("--writers", type=int, default=d.writers, help="source tasks")
    p.add_argument("--readers", type=int, default=d.readers, help="sink tasks")
    p.add_argument("--store", default=d.store, help="Delta store root (path or URL); default: a temporary dir")
    p.add_argument("--table", default=d.table, help="table path under the store (must not exist)")
    p.add_argument("--provider", default=d.provider, help="cluster provider: memory or etcd://HOST:PORT")
    p.add_argument("--master", default=d.master, help="Spark master URL (default local[writers+readers,4])")
    p.add_argument("--host", default=d.host,
                   help="address the driver, its sync server and cluster service bind and advertise to executors")
    p.add_argument("--report", default=d.report, help="directory for figures.json and latency.png")
    p.add_argument("--keep", action="store_true", help="keep the work dir (Delta table, server log) of a run that passed")
    p.add_argument("--chaos", action="store_true", help="kill the sync server and one sink task mid-run")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the change stream")
    p.add_argument("--rate", type=float, default=d.rate, help="changes/s over all sources (0: unthrottled)")
    p.add_argument("--shuffle", default=d.shuffle, choices=["streaming", "spark"],
                   help="routing shuffle: the streaming shuffle (default) or PySpark's partitionBy as a baseline")
    cdc = p.add_argument_group("a Postgres source instead of the generator (docs/cdc-postgres.md)")
    cdc.add_argument("--source", help="a libpq connection string: postgresql://USER@HOST:PORT/DB, 'service=NAME' "
                                       "or key=value pairs (libpq's password file and PG* variables apply)")
    cdc.add_argument("--publication", help="the publication to stream")
    cdc.add_argument("--slot", help="the logical replication slot (pgoutput) to stream from")
    cdc.add_argument("--create-slot", action="store_true", help="create the slot if it does not exist")
    cdc.add_argument("--snapshot", choices=("initial", "never"), default="initial",
                     help="when --create-slot creates the slot: first copy the rows the tables hold, in the slot's "
                          "snapshot (initial, the default; resumed by the next run after a crash), or stream only "
                          "what commits after it (never)")
    cdc.add_argument("--until-lsn", help="stop once every change committed before this LSN is durable "
                                         "('current': the WAL position at start); default: run until stopped")
    cdc.add_argument("--verify", action="store_true", help="then compare every published table with its Delta table")
    cdc.add_argument("--sync", help="a running sync server (grpc://HOST:PORT) serving --store; default: the driver "
                                    "starts one")
    return p


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when the table matches, 1 when it does not, 2 (one line) when the run could not start."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.source is not None:
        return guarded("pipeline", lambda: _postgres(parser, args))
    if args.publication or args.slot or args.create_slot or args.until_lsn or args.verify or args.sync:
        parser.error("--publication, --slot, --create-slot, --until-lsn, --verify and --sync go with --source")
    generator = {k: v for k, v in vars(args).items()
                 if k not in ("source", "publication", "slot", "create_slot", "snapshot", "until_lsn", "verify", "sync")}

    def pipeline() -> int:
        try:
            outcome = run(Options(**generator))
        except PipelineError as exc:
            print(f"pipeline: {exc}", file=sys.stderr)
            return 2
        return 0 if outcome.ok else 1

    return guarded("pipeline", pipeline)


def _postgres(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The Postgres source (reference/pipeline/postgres.py); set-up errors are one line, exit 2."""
    from reference.cdc.pgwire import PgConnectionError, PgServerError
    from reference.pipeline.postgres import CdcOptions, run as run_cdc
    from reference.cdc.source import SourceSetupError

    if not args.publication or not args.slot or not args.store:
        parser.error("--source needs --publication, --slot and --store (the slot is confirmed up to what that "
                     "store holds durable, so it must outlive the run)")
    options = CdcOptions(args.source, args.publication, args.slot, args.store, args.create_slot, args.until_lsn,
                         args.verify, args.readers, args.host, snapshot=args.snapshot == "initial",
                         provider=args.provider, master=args.master, sync=args.sync)
    try:
        return run_cdc(options)
    except (SourceSetupError, PgServerError, PgConnectionError) as exc:
        print(f"pipeline: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
