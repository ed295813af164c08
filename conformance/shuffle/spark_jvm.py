"""The ``spark-jvm`` target: Spark 4.3.0's own streaming-shuffle handlers, in a JVM, as a peer.

Runs ``conformance/shuffle/jvm/SparkShuffleAdapter.java`` (compiled against the installed pyspark's jars by
:mod:`conformance.shuffle.jvm_bridge`), which serves Spark's real ``StreamingShuffleServerHandler`` on Spark's
``TransportServer`` (Spark as the writer side) or connects Spark's real ``StreamingShuffleClientHandler``
through Spark's ``TransportClientFactory`` (Spark as the reader side), and reports what the handlers do
as JSON events. What Spark's writer and reader classes add on top of the handlers (sequence numbering,
the pre-bind queue, the connection timeout, the ack check, checksum verification) needs a live SparkEnv,
so the adapter transcribes it from their bytecode and raises Spark's own exceptions (the adapter's
comments name each transcribed method).

One JVM serves a whole run: each writer or reader is a peer of the adapter with its own id, and its own
Spark handler, ErrorNotifier, transport context, server or client and event loops, created by one command
and shut down by another (:meth:`SparkPeer.close` returns once the JVM reports it stopped), so cases stay
isolated without paying the JVM's start-up each time. If the JVM dies, the next peer starts a new one.

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
        spark.open_peers() -> list[int]                  # ids of the peers the JVM still holds
        spark.settings({key: value}) -> Event            # Spark's ConfigEntry reading: "refused" if any
        spark.pid                                        # the JVM's process id

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

import itertools
import threading
import time
from types import TracebackType
from typing import Any, Callable, Final

from conformance.shuffle.jvm_bridge import BridgeError, Jdk, JsonLinesProcess, find_jdk

Event = dict[str, Any]

ADAPTER: Final = "SparkShuffleAdapter"
DEFAULT_QUOTA: Final = 33554432
"""readerMaxMemory's default; one writer gets all of it."""
PEER_TIMEOUT_S: Final = 60.0
"""Bound on a peer opening or stopping in the JVM (generous: only a broken JVM gets near it)."""


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


class AdapterProcess:
    """The JVM running the adapter: one stdin for every peer's commands, its events routed by peer id."""

    def __init__(self, jdk: Jdk) -> None:
        self._process = JsonLinesProcess(ADAPTER, jdk=jdk)
        self._logs: dict[int, EventLog] = {}
        self._lock = threading.Lock()
        self._ended = False
        self._pump = threading.Thread(target=self._collect, name="spark-jvm-events", daemon=True)
        self._pump.start()

    @property
    def ended(self) -> bool:
        with self._lock:
            return self._ended or self._process.ended

    def _collect(self) -> None:
        try:
            while True:
                event = self._process.next_line(timeout=24 * 3600)
                with self._lock:
                    log = self._logs.get(event.get("peer", -1))
                if log is not None:
                    log.append(event)
        except BridgeError:
            with self._lock:
                self._ended = True
                logs = list(self._logs.values())
            for log in logs:
                log.end()

    def attach(self, peer_id: int) -> EventLog:
        """A new event log receiving ``peer_id``'s events."""
        log = EventLog()
        with self._lock:
            if self._ended:
                raise BridgeError(f"the Spark JVM has ended\n{self._process.stderr_tail()}")
            self._logs[peer_id] = log
        return log

    def detach(self, peer_id: int) -> None:
        with self._lock:
            log = self._logs.pop(peer_id, None)
        if log is not None:
            log.end()

    @property
    def pid(self) -> int:
        return self._process.pid

    def command(self, request: Event) -> None:
        self._process.send(request)

    def stderr_tail(self) -> str:
        return self._process.stderr_tail()

    def close(self) -> None:
        """End the JVM (it closes whatever peers are still open), then its event pump."""
        self._process.close()
        self._pump.join(timeout=PEER_TIMEOUT_S)


class SparkPeer:
    """One writer or reader side in the adapter, with its own events; closing it shuts it down in the JVM."""

    def __init__(self, jvm: AdapterProcess, peer_id: int, request: Event) -> None:
        self._jvm = jvm
        self.peer_id = peer_id
        self.events = jvm.attach(peer_id)
        self._closed = False
        try:
            jvm.command({**request, "peer": peer_id})
            ready = self.events.wait_for(lambda e: e["event"] in ("ready", "command_failed"), PEER_TIMEOUT_S)
            if ready is None or ready["event"] != "ready":
                raise BridgeError(f"Spark {request['op']} did not open: {ready}\n{jvm.stderr_tail()}")
        except BaseException:
            self.close()
            raise
        self.ready = ready

    def command(self, request: Event) -> None:
        self._jvm.command({**request, "peer": self.peer_id})

    def stderr_tail(self) -> str:
        return self._jvm.stderr_tail()

    def close(self) -> None:
        """Shut the peer down in the JVM and wait until it has (its sockets closed, its events ended)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.command({"op": "close"})
            stopped = self.events.wait_for(lambda e: e["event"] == "stopped", PEER_TIMEOUT_S)
        except BridgeError:  # the JVM has died, and everything of the peer with it
            stopped = None
        finally:
            self._jvm.detach(self.peer_id)
        if stopped is None and not self._jvm.ended:
            raise BridgeError(f"Spark peer {self.peer_id} did not stop\n{self._jvm.stderr_tail()}")


class SparkWriter(SparkPeer):
    """Spark as the writer side: a StreamingShuffleServerHandler listening on 127.0.0.1."""

    def __init__(self, jvm: AdapterProcess, peer_id: int, writer_id: int, num_readers: int, shuffle_id: int,
                 connection_timeout_ms: int, checksum: bool, auth: Event | None = None) -> None:
        super().__init__(jvm, peer_id, {"op": "writer", "writer_id": writer_id, "num_readers": num_readers,
                                        "shuffle_id": shuffle_id, "connection_timeout_ms": connection_timeout_ms,
                                        "checksum": checksum, **({"auth": auth} if auth else {})})
        self.writer_id = writer_id
        self.port = int(self.ready["port"])

    def send_data(self, reader_id: int, payload: bytes) -> None:
        self.command({"op": "data", "reader_id": reader_id, "payload": payload.hex()})

    def terminate(self, reader_id: int) -> None:
        self.command({"op": "terminate", "reader_id": reader_id})


class SparkReader(SparkPeer):
    """Spark as the reader side: a StreamingShuffleClientHandler connected to ``host:port``."""

    def __init__(self, jvm: AdapterProcess, peer_id: int, host: str, port: int, writer_id: int, reader_id: int,
                 shuffle_id: int, quota: int, checksum: bool, manual_consume: bool, auth: Event | None = None) -> None:
        super().__init__(jvm, peer_id, {"op": "reader", "host": host, "port": port, "writer_id": writer_id,
                                        "reader_id": reader_id, "shuffle_id": shuffle_id, "quota": quota,
                                        "checksum": checksum, "manual": manual_consume,
                                        **({"auth": auth} if auth else {})})
        self.reader_id = reader_id

    def consume(self, count: int) -> None:
        self.command({"op": "consume", "count": count})


class SparkJvm:
    """The ``spark-jvm`` target: one adapter JVM making Spark writer and reader peers; closing it ends them all."""

    description: Final = "Spark 4.3.0 StreamingShuffleServerHandler/ClientHandler (pyspark jars, in a JVM)"
    capabilities: Final = frozenset({"writer", "reader"})

    def __init__(self, jdk: Jdk) -> None:
        self._jdk = jdk
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._jvm = AdapterProcess(jdk)

    @classmethod
    def open(cls, jdk: Jdk | None = None) -> SparkJvm:
        return cls(jdk or find_jdk())

    def _adapter(self) -> tuple[AdapterProcess, int]:
        """The running JVM (a new one if the last has died) and a fresh peer id."""
        with self._lock:
            if self._jvm.ended:
                self._jvm.close()
                self._jvm = AdapterProcess(self._jdk)
            return self._jvm, next(self._ids)

    def writer(self, writer_id: int, num_readers: int, *, shuffle_id: int = 0,
               connection_timeout_ms: int = -1, checksum: bool = True, auth: Event | None = None) -> SparkWriter:
        """``auth``: install Spark's AuthServerBootstrap with this secret, cipher and version (targets.auth_to_json)."""
        return SparkWriter(*self._adapter(), writer_id, num_readers, shuffle_id, connection_timeout_ms, checksum, auth)

    def reader(self, host: str, port: int, writer_id: int, reader_id: int, *, shuffle_id: int = 0,
               quota: int = DEFAULT_QUOTA, checksum: bool = True, manual_consume: bool = False,
               auth: Event | None = None) -> SparkReader:
        """``auth``: install Spark's AuthClientBootstrap with this secret, app id, cipher and version."""
        return SparkReader(*self._adapter(), host, port, writer_id, reader_id, shuffle_id, quota, checksum,
                           manual_consume, auth)

    @property
    def pid(self) -> int:
        """The process id of the JVM serving new peers (for diagnostics)."""
        with self._lock:
            return self._jvm.pid

    def open_peers(self) -> list[int]:
        """Ids of the peers the JVM still holds (closed peers are gone from it)."""
        return sorted(int(peer) for peer in self._ask({"op": "status"}, "status")["peers"])

    def settings(self, values: dict[str, str]) -> Event:
        """Spark's reading of these settings: an event with ``refused`` (the key) and Spark's ``condition``
        and ``detail`` if its ConfigEntry objects refuse one."""
        return self._ask({"op": "settings", "settings": values}, "settings")

    def _ask(self, request: Event, answer: str) -> Event:
        """A one-shot command to the JVM and its answer event."""
        jvm, tag = self._adapter()
        events = jvm.attach(tag)
        try:
            jvm.command({**request, "peer": tag})
            reply = events.wait_for(lambda e: e["event"] in (answer, "command_failed"), PEER_TIMEOUT_S)
        finally:
            jvm.detach(tag)
        if reply is None or reply["event"] != answer:
            raise BridgeError(f"no {answer} from the Spark JVM: {reply}\n{jvm.stderr_tail()}")
        return reply

    def close(self) -> None:
        with self._lock:
            self._jvm.close()

    def __enter__(self) -> SparkJvm:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
