"""``python -m reference.sync serve --store PATH_OR_URL [--host H] [--port 0] [options]``.

Prints ``LISTENING <port>`` as the first line of stdout, then serves.  The first
SIGTERM (or SIGINT) stops taking puts, flushes what is pending and exits; a second
one exits at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path
from types import FrameType, TracebackType

from streamwire.cli import HelpFormatter
from spec.sync.messages import MAX_MESSAGE_BYTES
from spec.sync.writer import SyncSettings
from reference.sync.auth import read_token
from reference.sync.server import ServerSecurity, SyncServer
from reference.sync.store import DeltaStore, StoreSettings

log = logging.getLogger("reference.sync")

EXIT_INTERRUPTED = 130
LOG_TRACEBACK_LIMIT = 1000


class _FullTracebacks(logging.Formatter):
    """Formats logged exceptions with their whole traceback whatever ``sys.tracebacklimit`` says."""

    def formatException(
        self, ei: tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]
    ) -> str:
        return "".join(traceback.format_exception(ei[1], limit=LOG_TRACEBACK_LIMIT)).rstrip("\n")


class _ShutdownSignals:
    """Counts SIGTERM/SIGINT deliveries: each writes one byte to a wakeup socket.

    Python runs signal handlers only on the main thread and merges deliveries that
    arrive before it does, so two quick signals could count as one; the wakeup socket
    receives a byte per delivery, whichever thread the kernel picked.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)
        signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        for signum in self.SIGNALS:
            signal.signal(signum, self._ignore)

    @staticmethod
    def _ignore(signum: int, frame: FrameType | None) -> None:
        """The byte on the wakeup socket is what counts."""

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the next signal; False when ``timeout`` passed without one."""
        ready, _, _ = select.select([self._read], [], [], timeout)
        if ready:
            self._read.recv(1)
        return bool(ready)


def _quiet_client_errors() -> None:
    """Keep tracebacks out of the statuses clients receive; the log keeps them.

    pyarrow appends ``traceback.format_exception`` of the raise to the status of every
    error without a Flight class (INVALID_ARGUMENT among them), naming this server's
    source files.  A limit of 0 leaves only the exception's own line.  The process is
    the CLI's, so the setting is too; the log formats tracebacks with an explicit limit.
    """
    sys.tracebacklimit = 0
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_FullTracebacks(logging.BASIC_FORMAT))
    logging.getLogger().handlers[:] = [handler]


def _parser() -> argparse.ArgumentParser:
    defaults = SyncSettings()
    store = StoreSettings()
    parser = argparse.ArgumentParser(prog="python -m reference.sync", formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a data-sync Arrow Flight server", formatter_class=HelpFormatter)
    serve.add_argument("--store", required=True, help="root path or URL of the Delta tables")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--max-in-memory-bytes", type=int, default=defaults.max_in_memory_bytes)
    serve.add_argument("--high-watermark-bytes", type=int, default=None,
                       help="pending + in-flight bytes above which puts are refused (default: max-in-memory + max-message)")
    serve.add_argument("--max-message-bytes", type=int, default=MAX_MESSAGE_BYTES)
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
    serve.add_argument("--token-file", help="require 'authorization: Bearer <token>' with the token in this file")
    serve.add_argument("--tls-cert", help="PEM certificate: serve grpc+tls (needs --tls-key)")
    serve.add_argument("--tls-key", help="PEM private key of --tls-cert")
    serve.add_argument("--allow-store-location", action="append", default=[], metavar="URL",
                       help="a store root clients may name in their command (repeatable; none by default)")
    serve.add_argument("-v", "--verbose", action="store_true", help="log flushes to stderr")
    return parser


def _security(args: argparse.Namespace, parser: argparse.ArgumentParser) -> ServerSecurity:
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    return ServerSecurity(
        token=read_token(args.token_file) if args.token_file else None,
        tls_cert=Path(args.tls_cert).read_bytes() if args.tls_cert else None,
        tls_key=Path(args.tls_key).read_bytes() if args.tls_key else None,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    _quiet_client_errors()
    settings = SyncSettings(
        max_in_memory_bytes=args.max_in_memory_bytes,
        max_replication_lag_s=args.max_replication_lag_s,
        max_syncs_per_url=args.max_syncs_per_url,
        write_lock_timeout_s=args.write_lock_timeout_s,
        flush_task_interval_s=args.flush_task_interval_s,
        high_watermark_bytes=args.high_watermark_bytes,
    )
    store = DeltaStore(args.store, settings=StoreSettings(args.target_file_rows, args.vacuum_retention_hours))
    server = SyncServer(
        store,
        host=args.host,
        port=args.port,
        settings=settings,
        security=_security(args, parser),
        allowed_locations=args.allow_store_location,
        max_message_bytes=args.max_message_bytes,
        maintenance_interval_s=args.maintenance_interval_s,
    )
    signals = _ShutdownSignals()
    serving = threading.Thread(target=server.serve, name="sync-serve", daemon=True)
    serving.start()
    print(f"LISTENING {server.port}", flush=True)
    signals.wait()
    # Drain on another thread: the main thread keeps listening for a second signal.
    left: list[str] = []
    draining = threading.Thread(target=lambda: left.extend(server.drain()), name="sync-drain", daemon=True)
    draining.start()
    while draining.is_alive():
        if signals.wait(0.5):
            os._exit(EXIT_INTERRUPTED)  # the second signal: no more waiting
    if left:
        log.error("exiting with unflushed data in %d table(s): %s", len(left), ", ".join(left))
    server.shutdown()
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
