"""``make demo-postgres``: a throwaway Postgres, a concurrent workload, the pipeline, the verification.

Starts Postgres 15 (``initdb`` in a temporary directory, ``wal_level=logical``), creates the
workload's tables, a publication and a slot, runs ``--sessions`` sessions at once committing
``--transactions`` transactions each (inserts, updates, key changes, deletes, NULLs, TOASTed
values), then ``python -m reference.pipeline --source ... --until-lsn current --verify``: the last
line is ``pipeline OK`` when every table equals its Delta table. Everything is removed afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from reference.cdc import workload
from conformance.pgoutput.postgres_server import PostgresServer, postgres_bin_dir
from reference.pipeline.__main__ import main as pipeline_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.pgoutput.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--transactions", type=int, default=150, help="per session")
    parser.add_argument("--readers", type=int, default=2, help="sink tasks")
    args = parser.parse_args(argv)
    if postgres_bin_dir() is None:
        print("demo-postgres: no Postgres binaries (Debian: apt-get install postgresql-15)", file=sys.stderr)
        return 2
    with PostgresServer() as server, tempfile.TemporaryDirectory(prefix="streamwire-demo-") as store:
        conn = server.connect()
        workload.create(conn, "demo")
        conn.query("SELECT pg_create_logical_replication_slot('demo', 'pgoutput')")
        conn.close()
        started = time.monotonic()
        statements = workload.run_concurrently(server.address(), args.sessions, args.transactions)
        print(f"demo: Postgres {server.url(with_password=False)}; {args.sessions} sessions committed "
              f"{args.sessions * args.transactions} transactions ({statements} statements) in "
              f"{time.monotonic() - started:.1f} s", flush=True)
        return pipeline_main(["--source", server.url(), "--publication", "demo", "--slot", "demo", "--store", store,
                              "--readers", str(args.readers), "--until-lsn", "current", "--verify"])


if __name__ == "__main__":
    sys.exit(main())
