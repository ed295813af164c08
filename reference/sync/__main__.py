"""``python -m reference.sync serve --store PATH_OR_URL [--host H] [--port 0] [options]``.

Prints ``LISTENING <port>`` as the first line of stdout, then serves.  A bad setting, a store
that cannot be written or an address that cannot be bound ends it first, with one line on
stderr and exit status 2.  The first SIGTERM (or SIGINT) stops taking puts, lets running puts
finish (a stalled one ends at ``--put-timeout-s``), flushes what is pending and exits; a
second one exits at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from streamwire.extras import exit_without

if __name__ == "__main__":
    exit_without("sync", "python -m reference.sync")

# gRPC's core logs a failed bind on stderr itself; the command says it in one line instead.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

SMALL_ALLOCATORS = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}
"""Arrow on the system allocator, glibc at two arenas and every block of 128 KiB or more mapped on its own
(unless the environment chose otherwise).

Puts and flushes run on up to --max-concurrent-puts threads; with Arrow's own pool and glibc's
arena per thread, the memory a flush freed stayed with the thread that flushed. Measured (the
benchmark's floods, docs/sync.md "Memory"): 16 MiB puts 561-661 -> 352-382 MiB over idle, 30 MiB
puts 1,884-2,052 -> 1,367-1,449 MiB. glibc raises its mapping threshold to the largest block freed
(up to 32 MiB), after which a flush's column buffers come from the heap, whose freed holes it keeps:
a fixed threshold gives each back when it is freed (in-limit floods, before the connection front:
363 -> 318, 209 -> 173 and 395 -> 321 MiB over idle). All are read at process start, hence the exec."""
if __name__ == "__main__" and any(name not in os.environ for name in SMALL_ALLOCATORS):
    os.environ.update({k: v for k, v in SMALL_ALLOCATORS.items() if k not in os.environ})
    os.execv(sys.executable, [sys.executable, "-m", "reference.sync", *sys.argv[1:]])

import resource
import select
import signal
import socket
import threading
from pathlib import Path
from types import FrameType

from streamwire.cli import HelpFormatter, OneLineParser, count_at_least, fraction, port, read_secret, seconds
from spec.sync.messages import MAX_MESSAGE_BYTES
from spec.sync.writer import SyncSettings
from reference.sync.credentials import ServerSecurity
from reference.sync.server import (
    DEFAULT_FIRST_MESSAGE_TIMEOUT_S,
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONCURRENT_PUTS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_STREAMS_PER_CONNECTION,
    DEFAULT_PUT_TIMEOUT_S,
    SyncServer,
)
from reference.sync.store import DeltaStore, StoreSettings, StoreUnwritable
from reference.sync.transport import BindError

log = logging.getLogger("reference.sync")

EXIT_INTERRUPTED = 130
EXIT_USAGE = 2
SERVE_MAX_REPLICATION_LAG_S = 5.0
"""``serve``'s lag (Seafowl's is 600 s): a client waiting for durability waits about this long."""


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


def _parser() -> argparse.ArgumentParser:
    defaults = SyncSettings()
    store = StoreSettings()
    parser = OneLineParser(prog="python -m reference.sync", formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    serve = sub.add_parser("serve", help="run a data-sync Arrow Flight server", formatter_class=HelpFormatter)
    size = count = count_at_least(1)
    interval = seconds(positive=True)
    serve.add_argument("--store", required=True, help="root path or URL of the Delta tables")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port, default=0, help="0 picks a free port")
    serve.add_argument("--max-in-memory-bytes", type=size, default=defaults.max_in_memory_bytes)
    serve.add_argument("--high-watermark-bytes", type=size, default=None,
                       help="pending + in-flight bytes above which puts are refused (default: max-in-memory + max-message)")
    serve.add_argument("--max-message-bytes", type=size, default=MAX_MESSAGE_BYTES)
    serve.add_argument("--max-concurrent-puts", type=count, default=DEFAULT_MAX_CONCURRENT_PUTS,
                       help="puts served at once (a stream counts once its first message arrived); more are "
                            "RESOURCE_EXHAUSTED, which clients retry")
    serve.add_argument("--max-connections", type=count, default=DEFAULT_MAX_CONNECTIONS,
                       help="open client connections at most; a newcomer at the cap closes one without a put in "
                            "flight (the one handshaking or idle for longest first), or is refused when every one "
                            "carries a put")
    serve.add_argument("--put-timeout-s", type=interval, default=DEFAULT_PUT_TIMEOUT_S,
                       help="a put not complete this long after its first message ends DEADLINE_EXCEEDED, "
                            "nothing of it kept")
    serve.add_argument("--first-message-timeout-s", type=interval, default=DEFAULT_FIRST_MESSAGE_TIMEOUT_S,
                       help="a stream whose first message has not arrived by then ends DEADLINE_EXCEEDED")
    serve.add_argument("--handshake-timeout-s", type=interval, default=DEFAULT_HANDSHAKE_TIMEOUT_S,
                       help="a connection that has not completed its HTTP/2 (and TLS) handshake by then is closed")
    serve.add_argument("--idle-timeout-s", type=interval, default=DEFAULT_IDLE_TIMEOUT_S,
                       help="a connection without a stream for this long is closed (GOAWAY; clients reconnect)")
    serve.add_argument("--max-streams-per-connection", type=count, default=DEFAULT_MAX_STREAMS_PER_CONNECTION,
                       help="streams open at once on one connection (HTTP/2 MAX_CONCURRENT_STREAMS)")
    serve.add_argument("--transaction-timeout-s", type=interval, default=defaults.transaction_timeout_s,
                       help="an open transaction without a put for this long is discarded (its client replays it)")
    serve.add_argument("--max-replication-lag-s", type=seconds(positive=False), default=SERVE_MAX_REPLICATION_LAG_S,
                       help="pending data is flushed once it is this old (the flusher wakes then)")
    serve.add_argument("--max-syncs-per-url", type=count, default=defaults.max_syncs_per_url)
    serve.add_argument("--write-lock-timeout-s", type=interval, default=defaults.write_lock_timeout_s)
    serve.add_argument("--flush-task-interval-s", type=interval, default=defaults.flush_task_interval_s,
                       help="longest sleep of the flusher (it also wakes when the lag or a retry is due)")
    serve.add_argument("--target-file-rows", type=count, default=store.target_file_rows,
                       help="rows per data file at most (a flush rewrites about this many per key range)")
    serve.add_argument("--vacuum-retention-hours", type=count_at_least(0), default=store.vacuum_retention_hours,
                       help="maintenance deletes files removed longer ago than this")
    serve.add_argument("--deletion-vectors", action=argparse.BooleanOptionalAction, default=store.deletion_vectors,
                       help="flushes of local tables mark changed rows in Delta deletion vectors (readers need DV "
                            "support) instead of rewriting the files that hold them")
    serve.add_argument("--dv-purge-fraction", type=fraction, default=store.dv_purge_fraction,
                       help="compaction rewrites a file once its deletion vector deletes this fraction of its rows")
    serve.add_argument("--maintenance-interval-s", type=seconds(positive=False), default=600.0,
                       help="seconds between compaction/vacuum/checkpoint rounds (0: never)")
    serve.add_argument("--token-file", help="require 'authorization: Bearer <token>' with the token in this file")
    serve.add_argument("--tls-cert", help="PEM certificate: serve grpc+tls (needs --tls-key)")
    serve.add_argument("--tls-key", help="PEM private key of --tls-cert")
    serve.add_argument("--allow-store-location", action="append", default=[], metavar="URL",
                       help="a store root clients may name in their command (repeatable; none by default)")
    serve.add_argument("-v", "--verbose", action="store_true", help="log flushes to stderr")
    return parser


class _BadSetting(Exception):
    """A setting that names a file that cannot be read, or options that do not go together."""


def _security(args: argparse.Namespace) -> ServerSecurity:
    if (args.tls_cert is None) != (args.tls_key is None):
        raise _BadSetting("--tls-cert and --tls-key go together")
    try:
        return ServerSecurity(
            token=read_secret(args.token_file, "--token-file") if args.token_file else None,
            tls_cert=Path(args.tls_cert).read_bytes() if args.tls_cert else None,
            tls_key=Path(args.tls_key).read_bytes() if args.tls_key else None,
        )
    except (OSError, ValueError) as exc:
        raise _BadSetting(f"cannot read a security file: {exc}") from None


def _fail(message: str) -> int:
    print(f"python -m reference.sync serve: error: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


DESCRIPTORS_PER_CONNECTION = 3
"""The client's socket, and the front's and gRPC's ends of its private one (``reference.sync.front``)."""
DESCRIPTORS_BESIDES = 256
"""The store's files, the listening sockets, the interpreter's own."""


def _raise_descriptor_limit(max_connections: int) -> None:
    """Raise the soft limit on open files towards what ``--max-connections`` needs, up to the hard limit;
    say in one line when the hard limit is below it (past it, connections are refused as they come)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = DESCRIPTORS_PER_CONNECTION * max_connections + DESCRIPTORS_BESIDES
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    if hard != resource.RLIM_INFINITY and hard < wanted:
        log.warning("--max-connections %d needs about %d open files; the limit is %d", max_connections, wanted, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    settings = SyncSettings(
        max_in_memory_bytes=args.max_in_memory_bytes,
        max_replication_lag_s=args.max_replication_lag_s,
        max_syncs_per_url=args.max_syncs_per_url,
        write_lock_timeout_s=args.write_lock_timeout_s,
        flush_task_interval_s=args.flush_task_interval_s,
        high_watermark_bytes=args.high_watermark_bytes,
        transaction_timeout_s=args.transaction_timeout_s,
    )
    try:
        _raise_descriptor_limit(args.max_connections)
        security = _security(args)
        store = DeltaStore(args.store, settings=StoreSettings(
            target_file_rows=args.target_file_rows, vacuum_retention_hours=args.vacuum_retention_hours,
            deletion_vectors=args.deletion_vectors, dv_purge_fraction=args.dv_purge_fraction))
        store.check_writable()
        server = SyncServer(
            store,
            host=args.host,
            port=args.port,
            settings=settings,
            security=security,
            allowed_locations=args.allow_store_location,
            max_message_bytes=args.max_message_bytes,
            max_concurrent_puts=args.max_concurrent_puts,
            max_connections=args.max_connections,
            put_timeout_s=args.put_timeout_s,
            first_message_timeout_s=args.first_message_timeout_s,
            handshake_timeout_s=args.handshake_timeout_s,
            idle_timeout_s=args.idle_timeout_s,
            max_streams_per_connection=args.max_streams_per_connection,
            maintenance_interval_s=args.maintenance_interval_s,
        )
    except (StoreUnwritable, BindError, _BadSetting) as exc:
        return _fail(str(exc))
    signals = _ShutdownSignals()
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
