"""The writer task: a TCP server per task driving :class:`spec.shuffle.writer.WriterMachine`.

Threads: the task thread produces records, writes the DATA its own writes flushed (blocking on
the socket as Spark's producer blocks on permits) and waits while the machine reports no permits;
one I/O thread accepts readers, receives credits and acks, runs the machine's timer and polls the
coordinator for failures, and never writes to a socket (so credits and acks are always drained);
one sender thread per bound reader writes what the I/O thread's steps queued (timer flushes, data
queued before the bind). Each connection's queue is written by one thread at a time, in machine
order, and every completed DATA write is reported back to the machine (which returns permits).
"""

from __future__ import annotations

import selectors
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from reference.shuffle.coordinator import WriterDirectory
from reference.shuffle.task import TaskBase, TaskOptions
from reference.shuffle.transport import POLL_S, Connection
from spec.shuffle import coordination as co
from spec.shuffle import errors
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Completed, Failed, ProducerBlocked, ProducerUnblocked, Send, Step
from spec.shuffle.writer import WriterMachine


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


@dataclass
class _Outbox:
    conn: Connection
    sends: deque[Send] = field(default_factory=deque)
    ready: threading.Condition | None = None
    held_bytes: int = 0
    busy: bool = False
    """A thread is writing this box (the producer or the box's sender thread)."""


class WriterTask(TaskBase):
    """One writer: ``run(records)`` streams ``(reader_id, record_bytes)`` pairs to the readers."""

    role = co.Role.WRITER

    def __init__(self, key: co.ShuffleKey, writer_id: int, num_readers: int, settings: ShuffleSettings,
                 directory: WriterDirectory, options: TaskOptions = TaskOptions()) -> None:
        super().__init__(key, writer_id, directory, options)
        self.writer_id = writer_id
        self.machine = WriterMachine(key.shuffle_id, writer_id, num_readers, settings, self.clock(),
                                     ack_timeout_ms=options.ack_timeout_ms)
        self.stats = WriterStats()
        self._outboxes: dict[int, _Outbox] = {}
        self._touched: list[_Outbox] = []
        self._blocked = False
        self._completed = False
        self._deadline: float | None = None
        self._buffered = 0
        self._listener = socket.create_server((options.bind_host, 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]

    # -- the task thread --------------------------------------------------------------------------

    def run(self, records: Iterable[tuple[int, bytes]]) -> WriterStats:
        """Serve, register, write every record, terminate, wait for every ack; always cleans up."""
        try:
            self.run_thread(self._io_loop, "shuffle-writer-io")
            self.directory.register(self.key, co.WriterLocation(
                self.writer_id, self.options.executor_id, self.options.bind_host, self.port))
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
            if final is error:
                raise
            raise final from (None if final.__cause__ else error)
        finally:
            self._unregister()
            self.shutdown()

    def write(self, reader_id: int, record: bytes) -> None:
        """Hand one record to the machine, first waiting while it has no permits."""
        with self.lock:
            while self._blocked and self.error is None:
                self.changed.wait(POLL_S)
            self._raise_if_failed()
            self._apply(self.machine.write(reader_id, record, self.clock()), direct=True)
            self.stats.records += 1
            self._drain_touched()

    def finish(self) -> None:
        """End of input: terminate every stream and wait (as Spark does, without a time limit) for the acks."""
        with self.lock:
            while self._blocked and self.error is None:
                self.changed.wait(POLL_S)
            self._raise_if_failed()
            self._apply(self.machine.finish(self.clock()), direct=True)
            self._drain_touched()
            while not self._completed and self.error is None:
                self.changed.wait(POLL_S)
            self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error

    # -- carrying out steps (caller holds the lock) -----------------------------------------------

    def _apply(self, step: Step, direct: bool = False) -> None:
        """Queue sends and surface events. ``direct``: the producer will write the sends itself
        (no hand-over to a sender thread, which under the GIL costs more than the write)."""
        for send in step.sends:
            box = self._outboxes[id(send.conn)] if send.conn is not None else None
            if box is None:
                continue
            box.sends.append(send)
            if send.notify:
                box.held_bytes += len(getattr(send.message, "payload", b""))
            if direct:
                self._touched.append(box)
            else:
                assert box.ready is not None
                box.ready.notify()
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
            elif isinstance(event, Failed):
                self.fail_locked(event.error)
        if step.deadline != self._deadline:
            earlier = step.deadline is not None and (self._deadline is None or step.deadline < self._deadline)
            self._deadline = step.deadline
            if earlier:
                self.wake()
        if step.sends:
            self._sample_held()

    def _sample_held(self) -> None:
        """Peak memory is reached when buffers turn into DATA: sample there, not per record."""
        held = sum(b.held_bytes for b in self._outboxes.values()) + sum(
            len(ch.buffer) for ch in self.machine.channels if ch.buffer is not None)
        if held > self.stats.peak_held_bytes:
            self.stats.peak_held_bytes = held

    # -- the I/O thread ---------------------------------------------------------------------------

    def _io_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ, None)
            selector.register(self.wakeup_socket, selectors.EVENT_READ, None)
            while not self.cancel.is_set():
                now = self.clock()
                with self.lock:
                    deadline = self._deadline
                timeout = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - now))
                for key, _ in selector.select(timeout):
                    if key.fileobj is self._listener:
                        self._accept(selector)
                    elif key.fileobj is self.wakeup_socket:
                        self.drain_wakeups()
                    else:
                        self._receive(key.data, selector)
                now = self.clock()
                with self.lock:
                    if self._deadline is not None and now >= self._deadline:
                        self._apply(self.machine.tick(now))
                self.poll_peer_failure(now)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            sock, _ = self._listener.accept()
        except BlockingIOError:
            return
        conn = Connection(sock, f"writer{self.writer_id}<-{sock.getpeername()}", self.cancel,
                          max_frame_length=self.options.max_frame_length, transcript=self.transcript,
                          fault=self.options.fault)
        self.connections[id(conn)] = conn
        selector.register(sock, selectors.EVENT_READ, conn)
        with self.lock:
            box = _Outbox(conn, ready=threading.Condition(self.lock))
            self._outboxes[id(conn)] = box
            self._apply(self.machine.connection_accepted(conn, self.clock()))
        self.run_thread(lambda: self._send_loop(box), "shuffle-writer-send")

    def _receive(self, conn: Connection, selector: selectors.BaseSelector) -> None:
        try:
            messages = conn.receive()
        except errors.CodecError as error:
            with self.lock:
                self._apply(self.machine.decode_failed(conn, error, self.clock()))
            return
        except OSError:
            messages = None
        with self.lock:
            if messages is None:
                selector.unregister(conn.sock)
                self._apply(self.machine.connection_closed(conn, self.clock()))
                return
            now = self.clock()
            for message in messages:
                self._apply(self.machine.received(conn, message, now))

    # -- sender threads ---------------------------------------------------------------------------

    def _send_loop(self, box: _Outbox) -> None:
        """Writes what the I/O thread queued (flush timer, bind), when the producer is not writing."""
        assert box.ready is not None
        with self.lock:
            while not self.cancel.is_set():
                if box.sends and not box.busy:
                    self._drain(box)
                else:
                    box.ready.wait(POLL_S)

    def _drain_touched(self) -> None:
        """Producer (lock held): write what its own step queued, unless a sender is already at it."""
        touched, self._touched = self._touched, []
        for box in touched:
            if box.sends and not box.busy:
                self._drain(box)
            elif box.sends:
                assert box.ready is not None
                box.ready.notify()

    def _drain(self, box: _Outbox) -> None:
        """Write ``box`` empty in machine order; the lock is released around each socket write.

        Only one thread drains a box at a time (``busy``), so frames never interleave or reorder.
        """
        box.busy = True
        try:
            while box.sends and not self.cancel.is_set():
                batch = list(box.sends)
                box.sends.clear()
                self.lock.release()
                try:
                    box.conn.send([s.message for s in batch])
                finally:
                    self.lock.acquire()
                now = self.clock()
                self.stats.messages_sent += len(batch)
                self.stats.bytes_sent += sum(len(getattr(s.message, "payload", b"")) for s in batch)
                for send in batch:
                    if send.notify:
                        box.held_bytes -= len(getattr(send.message, "payload", b""))
                        self._apply(self.machine.send_completed(send.peer, send.message.seq, now))
        finally:
            box.busy = False

    # -- shutdown ---------------------------------------------------------------------------------

    def _unregister(self) -> None:
        try:
            self.directory.unregister(self.key, self.writer_id)
        except (OSError, co.CoordinationError):
            pass

    def close_extra(self) -> None:
        self._listener.close()
