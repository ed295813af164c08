"""The writer task: a TCP server per task driving :class:`spec.shuffle.writer.WriterMachine`.

Two threads, whatever the number of readers: the task thread produces records and writes the
DATA its own writes flushed; one I/O thread polls the task's reactor (accepts readers, receives
credits and acks, finishes writes the kernel could not take at once), runs the machine's timer
and polls the coordinator for failures. Writes never block: whoever holds the task lock when a
step is produced hands its sends to the connection in machine order, the kernel takes what it
can and the reactor writes the rest; every DATA whose bytes all went out is reported back to the
machine, which returns its permits (so queued bytes stay within the permit budget).

Strangers are bounded by construction: a connection may send only control-sized frames
(:func:`spec.shuffle.framing.max_frame_from_reader`), must bind with a CREDIT within
``limits.bind_timeout_s``, and at most ``limits.max_pending`` unbound connections are kept. With
``options.auth`` no frame is decoded before the connection's handshake, so a peer without the
secret never binds; a failed handshake closes only that connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Sequence

from reference.net import CloseReason, Stream
from reference.shuffle.task import AttemptRetired, TaskBase, TaskOptions, close_cause, describe
from reference.shuffle.transport import POLL_S, Connection
from spec.auth import AuthError, ReplayGuard, ServerHandshake
from spec.shuffle import coordination as co
from spec.shuffle.coordination import WriterDirectory
from spec.shuffle import errors
from spec.shuffle.framing import max_frame_from_reader
from spec.shuffle.messages import DataMessage
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Bound, Completed, Failed, ProducerBlocked, ProducerUnblocked, Send, Step
from spec.shuffle.writer import WriterMachine


BATCH_RECORDS = 512
"""Records of a sequence handed to the machine per lock (the I/O thread gets the lock between batches)."""


@dataclass
class WriterStats:
    """Figures a test or benchmark can check after the task."""

    records: int = 0
    messages_sent: int = 0
    bytes_sent: int = 0
    """DATA payload bytes written."""
    peak_held_bytes: int = 0
    """Most bytes the writer held at once: open buffers plus DATA not yet written to a socket."""
    blocked_count: int = 0


def _payload_size(send: Send) -> int:
    return len(send.message.payload) if isinstance(send.message, DataMessage) else 0


class WriterTask(TaskBase):
    """One writer: ``run(records)`` streams ``(reader_id, record_bytes)`` pairs to the readers."""

    role = co.Role.WRITER

    def __init__(self, key: co.ShuffleKey, writer_id: int, num_readers: int, settings: ShuffleSettings,
                 directory: WriterDirectory, options: TaskOptions = TaskOptions(),
                 served: Collection[int] | None = None) -> None:
        """``served``: the readers this run serves (default all); the others' records are dropped."""
        super().__init__(key, writer_id, directory, options, listen=(options.bind_host, 0))
        self.writer_id = writer_id
        self.machine = WriterMachine(key.shuffle_id, writer_id, num_readers, settings, self.clock(),
                                     ack_timeout_ms=options.ack_timeout_ms, readers_may_leave=options.readers_may_leave)
        for reader_id in range(num_readers):
            if served is not None and reader_id not in served:
                self.machine.reader_left(reader_id, self.clock())
        self.stats = WriterStats()
        self.connections: dict[Stream, Connection] = {}
        self._replays = ReplayGuard()
        self._held_bytes = 0
        self._blocked = False
        self._completed = False
        self._deadline: float | None = None
        self.port: int = self.reactor.port

    # -- the task thread --------------------------------------------------------------------------

    def run(self, records: Iterable[tuple[int, bytes]]) -> WriterStats:
        """Serve, register, write every record, terminate, wait for every ack; always cleans up.

        A sequence is written in batches; any other iterable record by record, so a record is
        never kept waiting for the next one to arrive. A retired attempt returns at once, without
        raising and without taking the rest of ``records``.
        """
        try:
            self.run_thread(self._io_loop, "shuffle-writer-io")
            self.directory.register(self.key, co.WriterLocation(
                self.writer_id, self.options.executor_id, self.options.bind_host, self.port))
            if isinstance(records, Sequence):
                for start in range(0, len(records), BATCH_RECORDS):
                    self.write_batch(records[start:start + BATCH_RECORDS])
            else:
                for reader_id, record in records:
                    self.write(reader_id, record)
            self.finish()
            return self.stats
        except BaseException as error:
            if error is self.error:
                final = self.final_error()
            else:
                self.fail(error)
                final = error
            self.report(final)
            with self.lock:
                self.machine.abort(errors.TaskAborted(str(final)), self.clock())
            if isinstance(final, AttemptRetired):
                return self.stats
            if final is error:
                raise
            raise final from (None if final.__cause__ else error)
        finally:
            self._unregister()
            self.shutdown()

    def write(self, reader_id: int, record: bytes) -> None:
        """Hand one record to the machine, first waiting while it has no permits."""
        with self.lock:
            self._wait_unblocked()
            self._apply(self.machine.write(reader_id, record, self.clock()))
            self.stats.records += 1

    def write_batch(self, records: Sequence[tuple[int, bytes]]) -> None:
        """Hand records the caller already holds to the machine in one step per lock, waiting only
        while it has no permits (a batch is what has arrived: nothing waits for more input)."""
        start = 0
        while start < len(records):
            with self.lock:
                self._wait_unblocked()
                step, taken = self.machine.write_batch(records[start:] if start else records, self.clock())
                self._apply(step)
                self.stats.records += taken
                start += taken

    def _wait_unblocked(self) -> None:
        """Wait (holding the lock between waits) until the producer may write again; raise a failure."""
        while self._blocked and self.error is None:
            self.changed.wait(POLL_S)
        self._raise_if_failed()

    def finish(self) -> None:
        """End of input: terminate every stream and wait (as Spark does, without a time limit) for the acks."""
        with self.lock:
            self._wait_unblocked()
            self._apply(self.machine.finish(self.clock()))
            while not self._completed and self.error is None:
                self.changed.wait(POLL_S)
            self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error

    # -- carrying out steps (caller holds the lock) -----------------------------------------------

    def _apply(self, step: Step) -> None:
        """Hand the step's sends to their connections, surface its events, follow up completed
        and failed writes."""
        if not step.sends and not step.events and step.deadline == self._deadline:
            return  # most records only grow a buffer
        steps = [step]
        while steps:
            step = steps.pop(0)
            follow_ups = self._send(step.sends)
            self._surface(step)
            steps += follow_ups

    def _send(self, sends: tuple[Send, ...]) -> list[Step]:
        """Write ``sends`` in order, a run to one connection per call; return the machine's steps
        for the DATA written now and for a write that failed."""
        follow_ups: list[Step] = []
        start = 0
        while start < len(sends):
            end = start + 1
            while end < len(sends) and sends[end].conn is sends[start].conn:
                end += 1
            run = sends[start:end]
            start = end
            conn = run[0].conn
            assert isinstance(conn, Connection)
            self.stats.messages_sent += len(run)
            self._held_bytes += sum(_payload_size(s) for s in run if s.notify)
            try:
                written = conn.send(run)
            except OSError as error:
                follow_ups += self._write_failed(conn, run, describe(error))
                continue  # the other connections' sends still go out (a reader may have left)
            now = self.clock()
            follow_ups += [self._completed_write(send, now) for send in written]
        if sends:
            self._sample_held()
        return follow_ups

    def _write_failed(self, conn: Connection, unwritten: Sequence[Send], cause: str) -> list[Step]:
        """A write failed: the machine fails with SendFailed for the first DATA it depended on; a
        control frame's failure closes the connection, whose close fails its channel (typed either way)."""
        data = [send for send in unwritten if send.notify]
        if data:
            return [self.machine.send_failed(data[0].peer, data[0].message.seq, cause, self.clock())]
        conn.close()
        return []

    def _completed_write(self, send: Send, now: float) -> Step:
        size = _payload_size(send)
        self._held_bytes -= size
        self.stats.bytes_sent += size
        return self.machine.send_completed(send.peer, send.message.seq, now)

    def _surface(self, step: Step) -> None:
        for event in step.events:
            if isinstance(event, ProducerBlocked):
                self._blocked = True
                self.stats.blocked_count += 1
            elif isinstance(event, ProducerUnblocked):
                self._blocked = False
                self.changed.notify_all()
            elif isinstance(event, Completed):
                self._completed = True
                self.changed.notify_all()
            elif isinstance(event, Bound):
                assert isinstance(event.conn, Connection)
                event.conn.stream.bind()
            elif isinstance(event, Failed):
                self.fail_locked(event.error)
        if step.deadline != self._deadline:
            earlier = step.deadline is not None and (self._deadline is None or step.deadline < self._deadline)
            self._deadline = step.deadline
            if earlier:
                self.wake()

    def _sample_held(self) -> None:
        """Peak memory is reached when buffers turn into DATA: sample there, not per record."""
        held = self._held_bytes + sum(len(ch.buffer) for ch in self.machine.channels if ch.buffer is not None)
        if held > self.stats.peak_held_bytes:
            self.stats.peak_held_bytes = held

    # -- the I/O thread ---------------------------------------------------------------------------

    def _io_loop(self) -> None:
        while not self.cancel.is_set():
            now = self.clock()
            with self.lock:
                deadline = self._deadline
            self.reactor.poll(POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - now)))
            now = self.clock()
            with self.lock:
                if self._deadline is not None and now >= self._deadline:
                    self._apply(self.machine.tick(now))
            self.poll_peer_failure(now)

    # reactor callbacks (I/O thread)

    def accepted(self, stream: Stream) -> None:
        auth = self.options.auth
        conn = Connection(stream, max_frame_from_reader(), transcript=self.transcript, fault=self.options.fault,
                          handshake=None if auth is None else ServerHandshake(auth, self._replays))
        stream.label = f"writer{self.writer_id}<-{stream.label}"
        self.connections[stream] = conn
        with self.lock:
            self._apply(self.machine.connection_accepted(conn, self.clock()))

    def received(self, stream: Stream, data: memoryview) -> None:
        conn = self.connections[stream]
        try:
            messages = conn.decode(data)
        except errors.CodecError as error:
            with self.lock:
                self._apply(self.machine.decode_failed(conn, error, self.clock()))
            stream.close()
            return
        except AuthError:
            stream.close()  # a stranger, or a peer whose bytes were forged: only its connection ends
            return
        with self.lock:
            now = self.clock()
            for message in messages:
                self._apply(self.machine.received(conn, message, now))

    def sent(self, stream: Stream, tokens: list[object]) -> None:
        with self.lock:
            now = self.clock()
            for token in tokens:
                assert isinstance(token, Send)
                self._apply(self._completed_write(token, now))

    def closed(self, stream: Stream, reason: CloseReason, error: OSError | None) -> None:
        """A failed socket (reset, timeout) with DATA still unwritten is that DATA's failed write."""
        conn = self.connections.pop(stream, None)
        if conn is None:
            return
        with self.lock:
            unwritten = [token for token in stream.abandoned if isinstance(token, Send)]
            if reason is CloseReason.FAILED and unwritten:
                for step in self._write_failed(conn, unwritten, close_cause(reason, error)):
                    self._apply(step)
            else:
                self._apply(self.machine.connection_closed(conn, self.clock()))

    # -- shutdown ---------------------------------------------------------------------------------

    def _unregister(self) -> None:
        try:
            self.directory.unregister(self.key, self.writer_id)
        except (OSError, co.CoordinationError):
            pass
