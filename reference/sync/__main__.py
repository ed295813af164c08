"""``python -m reference.sync serve --store PATH_OR_URL [--host H] [--port 0]``.

Prints ``LISTENING <port>`` as the first line of stdout, then serves until killed.
"""

from __future__ import annotations

import argparse
import logging
import sys

from spec.sync.writer import SyncSettings
from reference.sync.server import SyncServer
from reference.sync.store import DeltaStore, StoreSettings


def _parser() -> argparse.ArgumentParser:
    defaults = SyncSettings()
    store = StoreSettings()
    parser = argparse.ArgumentParser(prog="python -m reference.sync")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a data-sync Arrow Flight server")
    serve.add_argument("--store", required=True, help="root path or URL of the Delta tables")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--max-in-memory-bytes", type=int, default=defaults.max_in_memory_bytes)
    serve.add_argument("--max-replication-lag-s", type=float, default=defaults.max_replication_lag_s)
    serve.add_argument("--max-syncs-per-url", type=int, default=defaults.max_syncs_per_url)
    serve.add_argument("--write-lock-timeout-s", type=float, default=defaults.write_lock_timeout_s)
    serve.add_argument("--flush-task-interval-s", type=float, default=defaults.flush_task_interval_s)
    serve.add_argument("--target-file-rows", type=int, default=store.target_file_rows,
                       help="rows per data file at most (a flush rewrites about this many per key range)")
    serve.add_argument("--vacuum-retention-hours", type=int, default=store.vacuum_retention_hours,
                       help="maintenance deletes files removed longer ago than this")
    serve.add_argument("--maintenance-interval-s", type=float, default=600.0,
                       help="seconds between compaction/vacuum/checkpoint rounds (0: never)")
    serve.add_argument("-v", "--verbose", action="store_true", help="log flushes to stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    settings = SyncSettings(
        max_in_memory_bytes=args.max_in_memory_bytes,
        max_replication_lag_s=args.max_replication_lag_s,
        max_syncs_per_url=args.max_syncs_per_url,
        write_lock_timeout_s=args.write_lock_timeout_s,
        flush_task_interval_s=args.flush_task_interval_s,
    )
    store = DeltaStore(args.store, settings=StoreSettings(args.target_file_rows, args.vacuum_retention_hours))
    server = SyncServer(store, host=args.host, port=args.port, settings=settings,
                        maintenance_interval_s=args.maintenance_interval_s)
    print(f"LISTENING {server.port}", flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
