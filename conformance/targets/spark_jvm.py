"""The ``spark-jvm`` target: Spark 4.3.0's own streaming-shuffle handlers, in a JVM, as a peer.

Runs ``conformance/jvm/SparkShuffleAdapter.java`` (compiled against the installed pyspark's jars by
:mod:`conformance.jvm_bridge`), which serves Spark's real ``StreamingShuffleServerHandler`` on Spark's
``TransportServer`` (Spark as the writer side) or connects Spark's real ``StreamingShuffleClientHandler``
through Spark's ``TransportClientFactory`` (Spark as the reader side), and reports what the handlers do
as JSON events. What Spark's writer and reader classes add on top of the handlers (sequence numbering,
the pre-bind queue, the connection timeout, the ack check, checksum verification) needs a live SparkEnv,
so the adapter transcribes it from their bytecode and raises Spark's own exceptions
(``/tmp/notes/jvm-findings.md`` sections 6 and 7 hold the details).

Interface used by the shuffle suite::

    with SparkJvm.open() as spark:                       # a Target: description, capabilities
        writer = spark.writer(writer_id=3, num_readers=1, connection_timeout_ms=-1, checksum=True)
        writer.port                                      # Spark listens on 127.0.0.1:port
        writer.send_data(reader_id, payload)             # Spark numbers it; queued until the bind
        writer.terminate(reader_id)                      # TERMINATION_CONTROL
        reader = spark.reader("127.0.0.1", port, writer_id=3, reader_id=0,
                              quota=33554432, checksum=True, manual_consume=False)
        reader.consume(n)                                # manual_consume: release the n oldest DATA
        peer.events.wait_for(lambda e: e["event"] == "ack", timeout) -> Event
        peer.events.snapshot() -> list[Event]; peer.close()

Events (``event`` key; ``seq`` and ``checksum`` are decimal strings):

- writer: ``bound`` (reader_id, remote) when a reader's first CREDIT completes Spark's bind future;
  ``written`` (reader_id, seq, type, ok) when a socket write completed; ``ack`` (reader_id, seq,
  counted) for an ack that passed Spark's seq check (``counted`` false for a duplicate); ``all_acks``;
- reader: ``connected`` (local) / ``connect_failed``; ``data`` (writer_id, seq, checksum, payload hex)
  for each DATA that passed checksum verification; ``termination`` (writer_id, seq);
  ``ack_written`` (writer_id) when the TERMINATION_ACK write completed; ``closed`` when the channel went
  inactive;
- both: ``error`` (exception, detail, and ``condition`` + ``parameters`` for Spark's error conditions)
  for everything handed to Spark's ``ErrorNotifier``; ``command_failed`` for a rejected command.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any, Callable, Final

from conformance.jvm_bridge import BridgeError, Jdk, JsonLinesProcess, find_jdk

Event = dict[str, Any]

ADAPTER: Final = "SparkShuffleAdapter"
DEFAULT_QUOTA: Final = 33554432
"""readerMaxMemory's default; one writer gets all of it."""


class EventLog:
    """Events a peer reported, in arrival order, with waiting by predicate."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._changed = threading.Condition()
        self.ended = False

    def append(self, event: Event) -> None:
        with self._changed:
            self._events.append(event)
            self._changed.notify_all()

    def end(self) -> None:
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def snapshot(self) -> list[Event]:
        with self._changed:
            return list(self._events)

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float) -> Event | None:
        """The first event (already seen or still to come) matching ``predicate``, or None at the deadline."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for event in self._events:
                    if predicate(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0 or self.ended:
                    return None
                self._changed.wait(left)


class SparkPeer:
    """One adapter process; its events are collected by a background thread."""

    def __init__(self, args: list[str], jdk: Jdk) -> None:
        self.events = EventLog()
        self._process = JsonLinesProcess(ADAPTER, args, jdk=jdk)
        self._pump = threading.Thread(target=self._collect, name="spark-jvm-events", daemon=True)
        self._pump.start()

    def _collect(self) -> None:
        try:
            while True:
                self.events.append(self._process.next_line(timeout=24 * 3600))
        except BridgeError:
            self.events.end()

    def command(self, request: Event) -> None:
        self._process.send(request)

    def stderr_tail(self) -> str:
        return self._process.stderr_tail()

    def close(self) -> None:
        self._process.close()
        self._pump.join(timeout=10)


class SparkWriter(SparkPeer):
    """Spark as the writer side: a StreamingShuffleServerHandler listening on 127.0.0.1."""

    def __init__(self, jdk: Jdk, writer_id: int, num_readers: int, shuffle_id: int,
                 connection_timeout_ms: int, checksum: bool) -> None:
        super().__init__(["writer", str(writer_id), str(num_readers), str(shuffle_id),
                          str(connection_timeout_ms), str(checksum).lower()], jdk)
        self.writer_id = writer_id
        self.port = int(self._process.ready["port"])

    def send_data(self, reader_id: int, payload: bytes) -> None:
        self.command({"op": "data", "reader_id": reader_id, "payload": payload.hex()})

    def terminate(self, reader_id: int) -> None:
        self.command({"op": "terminate", "reader_id": reader_id})


class SparkReader(SparkPeer):
    """Spark as the reader side: a StreamingShuffleClientHandler connected to ``host:port``."""

    def __init__(self, jdk: Jdk, host: str, port: int, writer_id: int, reader_id: int, shuffle_id: int,
                 quota: int, checksum: bool, manual_consume: bool) -> None:
        super().__init__(["reader", host, str(port), str(writer_id), str(reader_id), str(shuffle_id),
                          str(quota), str(checksum).lower(), str(manual_consume).lower()], jdk)
        self.reader_id = reader_id

    def consume(self, count: int) -> None:
        self.command({"op": "consume", "count": count})


class SparkJvm:
    """The ``spark-jvm`` target: makes Spark writer and reader peers, and closes them all at the end."""

    description: Final = "Spark 4.3.0 StreamingShuffleServerHandler/ClientHandler (pyspark jars, in a JVM)"
    capabilities: Final = frozenset({"writer", "reader"})

    def __init__(self, jdk: Jdk) -> None:
        self._jdk = jdk
        self._peers: list[SparkPeer] = []

    @classmethod
    def open(cls, jdk: Jdk | None = None) -> SparkJvm:
        return cls(jdk or find_jdk())

    def writer(self, writer_id: int, num_readers: int, *, shuffle_id: int = 0,
               connection_timeout_ms: int = -1, checksum: bool = True) -> SparkWriter:
        peer = SparkWriter(self._jdk, writer_id, num_readers, shuffle_id, connection_timeout_ms, checksum)
        self._peers.append(peer)
        return peer

    def reader(self, host: str, port: int, writer_id: int, reader_id: int, *, shuffle_id: int = 0,
               quota: int = DEFAULT_QUOTA, checksum: bool = True, manual_consume: bool = False) -> SparkReader:
        peer = SparkReader(self._jdk, host, port, writer_id, reader_id, shuffle_id, quota, checksum,
                           manual_consume)
        self._peers.append(peer)
        return peer

    def close(self) -> None:
        while self._peers:
            self._peers.pop().close()

    def __enter__(self) -> SparkJvm:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
