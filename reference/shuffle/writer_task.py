"""The writer task: a TCP server per task driving :class:`spec.shuffle.writer.WriterMachine`.

Owning the input (``TaskOptions.writer_owns_input``), the task thread is the owner: it takes the input in
rounds of up to HANDOVER_BUFFERS network buffers' worth and drives the machine, the reactor and every
connection between them, and a standby thread (:mod:`reference.shuffle.ownership`) holds the machine only
while the input's ``next()`` blocks: it gives the machine the records the round took, runs the flush timer
and serves the sockets until the owner is back. Otherwise:

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
from typing import Collection, Final, Iterable, Iterator, Sequence

from reference.net import CloseReason, Stream
from reference.shuffle.handover import Handover, Record
from reference.shuffle.heap import retain_freed_heap
from reference.shuffle.ownership import Ownership
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
"""Network buffers' worth of records the task thread may hand over (or, owning the input, take) ahead of the
machine."""

STANDBY_S: Final = 0.002
"""How often the standby of a writer that owns its input looks at it: a round of input (or one ``next()``)
running since its last look is served by it (the owner's records given to the machine, the flush timer, the
sockets), so a record pulled waits at most about two looks for the machine."""


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
        self._round_limit = HANDOVER_BUFFERS * settings.network_buffer_size
        self._ownership = Ownership(self.wake) if options.writer_owns_input else None
        self._waiting: list[Record] = []
        """(owning the input) Records taken from the input that the machine has not taken yet."""
        self._rounds = 0
        self._nudged = False
        self._wrote = False
        self._ended = self._finished = False
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
        that wait at once), so a record is never kept waiting for the next one; owning the input
        (``options.writer_owns_input``), this thread drives the machine itself between records and its
        standby serves while the input blocks. A retired attempt returns at once, without
        raising and without taking the rest of ``records``.
        """
        try:
            if self._ownership is not None:
                self._own_input(iter(records), self._ownership)
                return self.stats
            self.run_thread(self._serve, "shuffle-writer-io")
            self._register()
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

    def _register(self) -> None:
        self.directory.register(self.key, coordination.WriterLocation(
            self.machine.directory_id, self.options.executor_id, self.options.bind_host, self.port))

    def _raise_failure(self) -> None:
        assert self.error is not None
        raise self.error

    # -- owning the input: the task thread is the machine's owner -----------------------------------

    def _own_input(self, records: Iterator[Record], ownership: Ownership) -> None:
        """Rounds of: the timer, the records taken, the directory, one reactor poll, then a round of input;
        after the input, until every reader acked. The standby serves while ``next()`` blocks."""
        self.run_thread(self._stand_by, "shuffle-writer-standby")
        self._register()
        while not self._completed:
            if self.error is not None:
                self._raise_failure()
            now = self.clock()
            self._serve_round(now)
            if self._ended and not self._finished and not self._waiting and not self._blocked:
                self._finished = True
                self.carry_out(self.machine.finish(now))
            if self._blocked or self._ended:
                ownership.not_taking_input()
                self._poll_until_deadline()
            else:
                self.reactor.poll(0.0)
                self._take_round(records, ownership)

    def _take_round(self, records: Iterator[Record], ownership: Ownership) -> None:
        """Take records until the round holds HANDOVER_BUFFERS network buffers' worth, the standby asks
        for a new round, or the input ends; the machine is let go during every ``next()``."""
        if not ownership.taking:
            ownership.taking_input()
        self._nudged = False
        size = 0
        while size < self._round_limit and not self._nudged:
            ownership.let_go()
            try:
                record = next(records, None)
            finally:
                ownership.take_back()
            if record is None:
                self._ended = True
                break
            self._waiting.append(record)
            size += len(record[1])
        self._rounds += 1

    def _serve_round(self, now: float) -> None:
        """(whoever holds the machine) The flush timer when due, the records waiting, the directory."""
        if self._deadline is not None and now >= self._deadline:
            self.carry_out(self.machine.tick(now))
        waiting = self._waiting
        if waiting and not self._blocked:
            step, taken = self.machine.write_batch(waiting, now)
            self.stats.records += taken
            self._waiting = waiting[taken:] if taken < len(waiting) else []
            self._wrote = True
            self.carry_out(step)
        self.poll_peer_failure(now)

    def _poll_until_deadline(self) -> None:
        deadline = self._deadline
        self.reactor.poll(POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - self.clock())))

    def _stand_by(self) -> None:
        """(standby) Every STANDBY_S while the owner takes input: if it took no record since the last look and
        is inside ``next()``, serve here until it is back; if its round was already running at the last look,
        or a flush timer is due, ask it to end its round (it serves the timer and the sockets between rounds)."""
        ownership = self._ownership
        assert ownership is not None
        seen = (-1, 0)
        while not self.cancel.is_set():
            deadline = self._deadline
            ownership.watch(STANDBY_S if deadline is None else max(0.0, min(STANDBY_S, deadline - self.clock())),
                            self.cancel)
            now = self.clock()
            progress = (self._rounds, len(self._waiting))
            stuck, stale, seen = progress == seen, progress[0] == seen[0], progress
            if self._deadline is not None and now >= self._deadline:
                stale = True  # the flush timer is due
            if not (stuck or stale) or not ownership.taking:
                continue
            if not stuck or not ownership.stand_in():
                self._nudged = True
                continue
            try:
                self._stand_in(ownership)
            finally:
                ownership.step_out()

    def _stand_in(self, ownership: Ownership) -> None:
        """(standby, holding the machine) The owner waits on its input: give the machine what it took, tell
        it the input has nothing more for now, and serve until the owner is back."""
        while not ownership.wanted_back and not self.cancel.is_set():
            now = self.clock()
            self._serve_round(now)
            if self._wrote and not self._waiting:
                self._wrote = False
                self.carry_out(self.machine.producer_idle(now))
            self._poll_until_deadline()
        self._nudged = True

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
                    self.handover.make_room()
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

    def shutdown(self) -> None:
        if self._ownership is not None:
            self.cancel.set()
            self._ownership.wake_watch()
        super().shutdown()

    def _unregister(self) -> None:
        try:
            self.directory.unregister(self.key, self.machine.directory_id)
        except (OSError, coordination.CoordinationError):
            pass
