"""The writer task: a TCP server per task driving :class:`spec.shuffle.writer.WriterMachine`.

Two threads, whatever the number of readers, and one owner: the **serving thread** owns the
machine, the reactor and every connection. It takes the records the task thread handed over
(:mod:`reference.shuffle.handover`) as one batch per round, gives them to the machine in one input,
writes the DATA that batch flushed to each reader in one vectored write, reads every reader's
credits and acks of one read as one input, reports the writes the kernel finished as one input,
runs the machine's timer and polls the directory for failures of other tasks. The **task thread**
only iterates the input and hands records over; nothing is locked per record or per message.
Writes never block: the kernel takes what it can and the reactor writes the rest; every DATA whose
bytes all went out is reported back to the machine, which returns its permits (so queued bytes
stay within the permit budget, and the hand-over within its own bound).

Strangers are bounded by construction: a connection may send only control-sized frames
(:func:`spec.shuffle.framing.max_frame_from_reader`), must bind with a CREDIT within
``limits.bind_timeout_s``, and at most ``limits.max_pending`` unbound connections are kept. With
``options.auth`` no frame is decoded before the connection's handshake, so a peer without the
secret never binds; a failed handshake closes only that connection, and a completed one still binds
only at its first CREDIT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Sequence

from reference.net import CloseReason, Stream
from reference.shuffle.handover import Handover, Record
from reference.shuffle.heap import retain_freed_heap
from reference.shuffle.task import AttemptRetired, TaskBase, TaskOptions, close_cause
from reference.shuffle.transport import POLL_S, Connection
from spec.auth import AuthError, ReplayGuard, ServerHandshake
from spec.shuffle import coordination
from spec.shuffle.coordination import ShuffleDirectory
from spec.shuffle import errors
from spec.shuffle.framing import max_frame_from_reader
from spec.shuffle.messages import DataMessage
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Bound, Completed, Failed, ProducerBlocked, ProducerUnblocked, Send, Step
from spec.shuffle.writer import WriterMachine


HANDOVER_BUFFERS = 32
"""Network buffers' worth of records the task thread may hand over ahead of the machine."""


@dataclass
class WriterStats:
    """Figures a test or benchmark can check after the task."""

    records: int = 0
    messages_sent: int = 0
    """DATA messages written."""
    bytes_sent: int = 0
    """DATA payload bytes written."""
    peak_held_bytes: int = 0
    """Most bytes the writer held at once: open buffers plus DATA not yet written to a socket."""
    blocked_count: int = 0


def _payload_size(send: Send) -> int:
    return len(send.message.payload) if isinstance(send.message, DataMessage) else 0


class WriterTask(TaskBase):
    """One writer: ``run(records)`` streams ``(reader_id, record_bytes)`` pairs to the readers."""

    role = coordination.Role.WRITER
    machine: WriterMachine

    def __init__(self, key: coordination.ShuffleKey, writer_id: int, num_readers: int, settings: ShuffleSettings,
                 directory: ShuffleDirectory, options: TaskOptions = TaskOptions(),
                 served: Collection[int] | None = None, directory_id: int | None = None) -> None:
        """``served``: the readers this run serves (default all); the others' records are dropped.
        ``directory_id``: the id the writer registers under, which readers name in their handshake (Spark:
        the map task id; default ``writer_id``, the partition id its messages name)."""
        super().__init__(key, writer_id, directory, options, listen=(options.bind_host, 0))
        self.writer_id = writer_id
        retain_freed_heap(settings.writer_max_memory)
        self.machine = WriterMachine(key.shuffle_id, writer_id, num_readers, settings, self.clock(),
                                     ack_timeout_ms=options.ack_timeout_ms, readers_may_leave=options.readers_may_leave,
                                     flush_when_idle=options.flush_when_idle, directory_id=directory_id)
        for reader_id in range(num_readers):
            if served is not None and reader_id not in served:
                self.machine.reader_left(reader_id, self.clock())
        self.stats = WriterStats()
        self.handover = Handover(HANDOVER_BUFFERS * settings.network_buffer_size, self.wake, self.cancel)
        self.connections: dict[Stream, Connection] = {}
        self._replays = ReplayGuard()
        self._held_bytes = 0
        self._blocked = False
        self._completed = False
        self._deadline: float | None = None
        self.port: int = self.reactor.port

    # -- the task thread --------------------------------------------------------------------------

    def run(self, records: Iterable[tuple[int, bytes]]) -> WriterStats:
        """Serve, register, hand every record over, terminate, wait for every ack; always cleans up.

        Records are handed over one by one as the input yields them (the serving thread takes all
        that wait at once), so a record is never kept waiting for the next one. A retired attempt returns at once, without
        raising and without taking the rest of ``records``.
        """
        try:
            self.run_thread(self._serve, "shuffle-writer-io")
            self.directory.register(self.key, coordination.WriterLocation(
                self.machine.directory_id, self.options.executor_id, self.options.bind_host, self.port))
            for reader_id, record in records:
                if not self.handover.put(reader_id, record):
                    self._raise_failure()
            self.handover.end()
            with self.lock:
                while not self._completed and self.error is None:
                    self.changed.wait(POLL_S)
            if self.error is not None:
                self._raise_failure()
            return self.stats
        except BaseException as error:
            if error is self.error:
                final = self.final_error()
            else:
                self.fail(error)
                final = error
            self.report(final)
            if isinstance(final, AttemptRetired):
                return self.stats
            if final is error:
                raise
            raise final from (None if final.__cause__ else error)
        finally:
            self._unregister()
            self.shutdown()

    def _raise_failure(self) -> None:
        assert self.error is not None
        raise self.error

    # -- the serving thread: the machine's owner ----------------------------------------------------

    def _serve(self) -> None:
        """Rounds of: the timer, the records handed over (one batch), the directory, one reactor poll."""
        backlog: Sequence[Record] = ()
        ended = finished = False
        wrote = False
        while not self.cancel.is_set():
            now = self.clock()
            if self._deadline is not None and now >= self._deadline:
                self.carry_out(self.machine.tick(now))
            if not self._blocked and not finished:
                if not backlog:
                    backlog, ended = self.handover.take()
                if backlog:
                    step, taken = self.machine.write_batch(backlog, now)
                    self.stats.records += taken
                    backlog = backlog[taken:] if taken < len(backlog) else ()
                    wrote = True
                    self.carry_out(step)
                elif ended:
                    finished = True
                    self.carry_out(self.machine.finish(now))
                elif wrote:
                    wrote = False  # the producer has nothing more for now
                    self.carry_out(self.machine.producer_idle(now))
            self.poll_peer_failure(now)
            wants_records = not self._blocked and not finished
            if wants_records and (backlog or wrote or not self.handover.sleep()):
                timeout = 0.0
            else:
                deadline = self._deadline
                timeout = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - self.clock()))
            self.reactor.poll(timeout)
            self.handover.awake()

    def connection_of(self, send: Send) -> Connection:
        assert isinstance(send.conn, Connection)
        return send.conn

    def surface(self, step: Step) -> None:
        for event in step.events:
            if isinstance(event, ProducerBlocked):
                self._blocked = True
                self.stats.blocked_count += 1
            elif isinstance(event, ProducerUnblocked):
                self._blocked = False
            elif isinstance(event, Completed):
                with self.lock:
                    self._completed = True
                    self.changed.notify_all()
            elif isinstance(event, Bound):
                assert isinstance(event.conn, Connection)
                event.conn.stream.bind()
            elif isinstance(event, Failed):
                self.fail(event.error)
        if step.sends:
            self._held_bytes += sum(_payload_size(send) for send in step.sends if send.notify)
            self._sample_held()
        self._deadline = step.deadline

    def written(self, sends: Sequence[Send]) -> Step:
        size = sum(_payload_size(send) for send in sends)
        self._held_bytes -= size
        self.stats.bytes_sent += size
        self.stats.messages_sent += len(sends)
        return super().written(sends)

    def _sample_held(self) -> None:
        """Peak memory is reached when buffers turn into DATA: sample there, not per record."""
        held = self._held_bytes + sum(ch.buffered for ch in self.machine.channels)
        if held > self.stats.peak_held_bytes:
            self.stats.peak_held_bytes = held

    # reactor callbacks (serving thread)

    def accepted(self, stream: Stream) -> None:
        auth = self.options.auth
        conn = Connection(stream, max_frame_from_reader(), transcript=self.transcript,
                          handshake=None if auth is None else ServerHandshake(auth, self._replays))
        stream.label = f"writer{self.writer_id}<-{stream.label}"
        self.connections[stream] = conn
        self.carry_out(self.machine.connection_accepted(conn, self.clock()))

    def received(self, stream: Stream, data: memoryview) -> None:
        conn = self.connections[stream]
        try:
            messages = conn.decode(data)
        except errors.CodecError as error:
            self.carry_out(self.machine.decode_failed(conn, error, self.clock()))
            stream.close()
            return
        except AuthError:
            stream.close()  # a stranger, or a peer whose bytes were forged: only its connection ends
            return
        if messages:
            self.carry_out(self.machine.received_all(conn, messages, self.clock()))

    def closed(self, stream: Stream, reason: CloseReason, error: OSError | None) -> None:
        """A failed socket (reset, timeout) with DATA still unwritten is that DATA's failed write."""
        conn = self.connections.pop(stream, None)
        if conn is None:
            return
        unwritten = [token for token in stream.abandoned if isinstance(token, Send)]
        failed = None
        if reason is CloseReason.FAILED and unwritten:
            failed = self.write_failed(conn, unwritten, close_cause(reason, error))
        self.carry_out(failed or self.machine.connection_closed(conn, self.clock()))

    # -- shutdown ---------------------------------------------------------------------------------

    def _unregister(self) -> None:
        try:
            self.directory.unregister(self.key, self.machine.directory_id)
        except (OSError, coordination.CoordinationError):
            pass
