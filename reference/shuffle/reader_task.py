"""The reader task: one connection per writer, driving :class:`spec.shuffle.reader.ReaderMachine`.

The I/O runs on the task thread, inside the consuming iterator, whenever it has no delivered
record left: it discovers writers through the directory as they register (every 10 ms, as
Spark's tracker clients poll), connects, reads every connection the machine has not paused and
writes the machine's credits and acks: every frame one read completed is one machine input, whose
credits go out in one write. No second thread means no hand-over of every message between threads
(under the GIL that hand-over cost more than the protocol work). Releasing a
message after its last record gives its bytes back to the writer's quota, which may resume
reading that connection. While the consumer is busy nothing is read, so TCP pushes back on the
writers as a paused connection would.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Callable, Generator, Sequence

from reference.net import CloseReason, Stream
from reference.shuffle.heap import retain_freed_heap
from reference.shuffle.task import TaskBase, TaskOptions, close_cause, describe
from reference.shuffle.transport import POLL_S, Connection
from spec.auth import AuthError, ClientHandshake
from spec.shuffle import coordination
from spec.shuffle.coordination import ShuffleDirectory
from spec.shuffle import errors
from spec.shuffle.framing import max_frame_from_writer
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Completed, Deliver, Failed, PauseReading, ResumeReading, Send, Step

CONNECT_ATTEMPT_S = 2.0
"""The longest connection attempt to a writer (cut at the machine's next deadline); failed attempts
are retried at each discovery poll."""

RECEIVE_BUFFER = 1024 * 1024
"""Bytes per read: about 32 DATA frames of a default 32 KiB buffer at once (one buffer per task), so the
credits of 32 DATA go out in one write (at 256 KiB, 8: the credit writes were 17% of the reader's samples)."""


class ReaderTask(TaskBase):
    """One reader: iterate ``records()`` to receive every record sent to ``reader_id``."""

    role = coordination.Role.READER
    machine: ReaderMachine

    def __init__(self, key: coordination.ShuffleKey, reader_id: int, writer_ids: Sequence[int],
                 settings: ShuffleSettings, directory: ShuffleDirectory, options: TaskOptions = TaskOptions()) -> None:
        # A writer that never completes its handshake is dropped at the bind timeout, like a stranger; every
        # writer may be handshaking at once, so none is evicted for another.
        limits = replace(options.limits, max_pending=max(options.limits.max_pending, len(writer_ids)))
        super().__init__(key, reader_id, directory, replace(options, limits=limits), receive_buffer=RECEIVE_BUFFER)
        self.reader_id = reader_id
        self.writer_ids = tuple(writer_ids)
        retain_freed_heap(settings.reader_max_memory)
        self.machine = ReaderMachine(key.shuffle_id, reader_id, self.writer_ids, settings, self.clock(),
                                     connect_timeout=options.connect_timeout_s)
        self._deliveries: deque[Deliver] = deque()
        self._ended = False
        self._deadline: float | None = None
        """When the machine's ``tick`` is due (its last step said so)."""
        self._last_lookup = -1.0
        self.connections: dict[int, Connection] = {}
        self._writer_of: dict[Stream, int] = {}
        self._location_of: dict[int, coordination.WriterLocation] = {}
        self._max_frame_length = max_frame_from_writer(settings, options.max_record_size)

    def records(self, may_take: Callable[[], bool] = lambda: True) -> Generator[bytes, None, None]:
        """Every record for this reader, each writer's in its order; cleans up however it ends.

        ``may_take`` is asked before each DATA's records are taken: while it says no (a slow consumer),
        the task keeps reading and answering its connections, and the DATA delivered meanwhile hold
        their bytes of the quota (so the reader pauses as Spark's does)."""
        try:
            while True:
                while not (self._deliveries and may_take()):
                    if self._ended and not self._deliveries:
                        return
                    self._pump()
                    if self.error is not None:
                        raise self.error
                item = self._deliveries.popleft()
                yield from item.records
                self.carry_out(self.machine.release(item.writer_id, item.seq, self.clock()))
        except GeneratorExit:
            raise  # the consumer stopped early (take, limit): not a failure; the writers see the close
        except BaseException as error:
            if error is not self.error:
                self.fail(error)
            final = self.final_error()
            self.report(final)
            if final is error:
                raise
            raise final from error
        finally:
            self.machine.abort(errors.TaskAborted("reader closed"), self.clock())
            self.shutdown()

    # -- carrying out steps (task thread) ---------------------------------------------------------

    def surface(self, step: Step) -> None:
        for event in step.events:
            if isinstance(event, Deliver):
                self._deliveries.append(event)
            elif isinstance(event, PauseReading):
                self.connections[event.writer_id].stream.pause()
            elif isinstance(event, ResumeReading):
                self.connections[event.writer_id].stream.resume()
            elif isinstance(event, Completed):
                self._ended = True
            elif isinstance(event, Failed):
                self.fail(event.error)
        self._deadline = step.deadline

    def connection_of(self, send: Send) -> Connection:
        return self.connections[send.peer]

    # -- I/O, on the task thread whenever the consumer waits for data --------------------------

    def _pump(self) -> None:
        """One round of I/O: the machine's timer when due, discover writers, read what is ready,
        write credits and acks; the poll waits no longer than the machine's deadline."""
        now = self.clock()
        if self._deadline is not None and now >= self._deadline:
            self.carry_out(self.machine.tick(now))
            if self.machine.done:
                return
        discovering = len(self.connections) < len(self.writer_ids)
        if discovering and now - self._last_lookup >= coordination.POLL_INTERVAL_S:
            self._last_lookup = now
            self._discover()
        else:
            self.poll_peer_failure(now)
        self.reactor.poll(self._until_deadline(coordination.POLL_INTERVAL_S if discovering else POLL_S))

    def _until_deadline(self, longest: float) -> float:
        """How long a blocking wait may last: ``longest``, cut at the machine's next deadline."""
        if self._deadline is None:
            return longest
        return max(0.0, min(longest, self._deadline - self.clock()))

    def _discover(self) -> None:
        found = self.directory.lookup(self.key)
        if isinstance(found.state, coordination.AttemptFailure):
            self.peer_failed(found.state)
            return
        for location in found.writers:
            writer_id = location.writer_id
            if writer_id in self.connections or writer_id not in self.machine.channels:
                continue
            label = f"reader{self.reader_id}->writer{writer_id}"
            time_left = self._until_deadline(CONNECT_ATTEMPT_S)
            if time_left <= 0:  # the machine's deadline is due: a connect given no time would only say "in progress"
                return
            try:
                stream = self.reactor.connect((location.host, location.port), label, time_left,
                                              identified=self.options.auth is None)
            except OSError as error:
                # Retried at the next poll, which also notices a failure the writer reported.
                self._connect_failed(location, describe(error))
                if self.machine.done:
                    return
                continue
            auth = self.options.auth
            conn = Connection(stream, self._max_frame_length, transcript=self.transcript,
                              handshake=None if auth is None else ClientHandshake(auth))
            self.connections[writer_id] = conn
            self._writer_of[stream] = writer_id
            self._location_of[writer_id] = location
            conn.start()
            if conn.authenticated:
                self.carry_out(self.machine.connected(writer_id, self.clock()))

    def _connect_failed(self, location: coordination.WriterLocation, cause: str) -> None:
        """One more failed attempt to reach a writer: the machine decides when that is fatal."""
        where = f"{location.host}:{location.port} (executor {location.executor}): {cause}"
        self.carry_out(self.machine.connect_failed(location.writer_id, where, self.clock()))

    # reactor callbacks (task thread, inside ``_pump``)

    def accepted(self, stream: Stream) -> None:
        """Never called: a reader's reactor does not listen."""
        return None

    def received(self, stream: Stream, data: memoryview) -> None:
        writer_id = self._writer_of[stream]
        conn = self.connections[writer_id]
        authenticated = conn.authenticated
        try:
            messages = conn.decode_views(data)
        except errors.CodecError as error:
            self.carry_out(self.machine.decode_failed(writer_id, error, self.clock()))
            return
        except AuthError as error:
            self.fail(error)
            return
        if not authenticated and conn.authenticated:
            stream.bind()  # the writer proved the secret: no more bind deadline
            self.carry_out(self.machine.connected(writer_id, self.clock()))
        if messages:
            self.carry_out(self.machine.received_all(writer_id, messages, self.clock()))

    def closed(self, stream: Stream, reason: CloseReason, error: OSError | None) -> None:
        """A failed socket with the TERMINATION_ACK unwritten is that ack's failed write. A connection
        closed inside its handshake never reached the machine: it is connected again, as a refused
        connect is, until ``connect_timeout_s``."""
        writer_id = self._writer_of.pop(stream)
        conn = self.connections[writer_id]
        if not conn.authenticated:
            del self.connections[writer_id]
            self._connect_failed(self._location_of[writer_id], f"closed during the handshake: {close_cause(reason, error)}")
            return
        unwritten = [token for token in stream.abandoned if isinstance(token, Send)]
        if reason is CloseReason.FAILED and unwritten:
            failed = self.write_failed(conn, unwritten, close_cause(reason, error))
            if failed is not None:
                self.carry_out(failed)
            return
        try:
            conn.end()
        except errors.CodecError as truncated:
            self.carry_out(self.machine.decode_failed(writer_id, truncated, self.clock()))
        except AuthError as cut:
            self.fail(cut)
        else:
            self.carry_out(self.machine.connection_closed(writer_id, self.clock()))
