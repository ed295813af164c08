"""What writer and reader tasks share: options, first-error propagation, root causes, shutdown.

A task owns threads and sockets. Whichever thread fails first records its error and sets the
cancellation event every blocking call polls; the task thread re-raises that error. Before a
task reports a failure caused by a peer (a connection closed early), it looks for the attempt's
root cause (spec/shuffle/root_cause.py decides which wins), so every task of a failed shuffle
names the same first failure. A
retired attempt (nobody reads it any more, docs/shuffle-runtime.md) ends its tasks the same way,
but quietly: :class:`AttemptRetired` is neither reported nor raised by a writer.
"""

from __future__ import annotations

import threading
import time
import traceback
from abc import abstractmethod
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Final, Iterable, Protocol, Sequence

from reference.net import CloseReason, ConnectionLimits, Handler, Reactor, Stream
from reference.net.ledger import ResourceLedger
from reference.shuffle.transport import Connection, Transcript
from spec.auth import AuthConfig
from spec.shuffle import coordination
from spec.shuffle.coordination import ShuffleDirectory
from spec.shuffle import errors
from spec.shuffle.framing import DEFAULT_MAX_RECORD_SIZE
from spec.shuffle.root_cause import RootCause, is_symptom, root_cause
from spec.shuffle.steps import Send, Step

JOIN_TIMEOUT_S: Final = 10.0
"""Longest wait for one of the task's own threads to end during shutdown."""

FAILURE_POLL_S: Final = 0.1
"""How often a task asks the directory whether another task of the attempt failed."""

LOOK_AGAIN_S: Final = 0.02
"""A failed task's pause between looks for its root cause (how long it looks is spec/shuffle/root_cause.py's)."""


class AttemptRetired(errors.ShuffleError):
    """The driver retired the attempt: the job that read it took what it needed. Not a failure."""

    condition = "STREAMING_SHUFFLE_ATTEMPT_RETIRED"

    def __init__(self, key: coordination.ShuffleKey) -> None:
        super().__init__(f"attempt {key.attempt} of shuffle {key.shuffle_id} was retired: no job reads it any more",
                         shuffleId=key.shuffle_id, attempt=key.attempt)


class PeerTaskFailed(errors.ShuffleError):
    """Another task of the same shuffle attempt failed first; ``root_cause`` is its report."""

    condition = "STREAMING_SHUFFLE_PEER_TASK_FAILED"

    def __init__(self, root_cause: str, local: str) -> None:
        super().__init__(f"{root_cause} (here: {local})", rootCause=root_cause, local=local)
        self.root_cause = root_cause


@dataclass(frozen=True)
class TaskOptions:
    """Runtime choices that are not protocol settings."""

    bind_host: str = "127.0.0.1"
    """Address the writer's server binds and advertises (the executor's host in Spark)."""
    executor_id: str = "driver"
    transcript_path: str | None = None
    """Append every frame of every connection to this JSON-lines file."""
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE
    """Reader: the largest record accepted; with networkBufferSize it bounds an incoming DATA frame."""
    limits: ConnectionLimits = ConnectionLimits()
    """Writer: how many readers may wait to send their first CREDIT, and for how long."""
    ledger: ResourceLedger | None = None
    """Enter every socket and thread the task opens here (leak checks count only these)."""
    connect_timeout_s: float = 60.0
    """Reader: how long failed connect attempts to one writer may go on (the reader machine's ``connect_timeout``)."""
    ack_timeout_ms: int = -1
    """Writer: bound on the wait for termination acks (-1: wait forever, as Spark 4.3.0 does)."""
    auth: AuthConfig | None = None
    """Authenticate every connection with Spark's AuthEngine and encrypt it (None: plaintext, as Spark 4.3.0)."""
    readers_may_leave: bool = False
    """Writer: a reader closing before its ack has stopped early (a partial read), not failed: its
    data is dropped and the other readers are still served (WriterMachine's ``readers_may_leave``)."""
    flush_when_idle: bool = False
    """Writer: the idle (low-latency) flush: a buffer becomes a DATA as soon as the producer has handed over
    every record it had (WriterMachine's ``flush_when_idle``); False is Spark's flush, when a buffer fills or
    at networkBufferMaxWaitTimeMs. A compatible reader sees only smaller DATA. Opt-in: side by side on the
    streaming path it cost more than 5% of throughput in most runs (issue 41's rule; docs/shuffle-runtime.md)."""
    writer_owns_input: bool = False
    """Writer: the task thread iterates the input and drives the machine between records, and a standby thread
    serves only while the input's ``next()`` blocks (reference/shuffle/ownership.py), instead of handing
    the records to a serving thread that owns the machine."""
    clock: Callable[[], float] = time.monotonic
    """The only source of ``now`` for the task, its machine and its reactor (a test injects a fake one)."""


def describe(error: BaseException) -> str:
    """A one-line root-cause description: exception type and message."""
    text = str(error) or "".join(traceback.format_exception_only(type(error), error)).strip()
    return f"{type(error).__name__}: {text}"


def close_cause(reason: CloseReason, error: OSError | None) -> str:
    """Why a connection ended, for a typed error's ``cause`` (e.g. a reset or a timeout)."""
    return reason.value if error is None else f"{reason.value} ({describe(error)})"


class Machine(Protocol):
    """What the shared write path asks of either machine: written and failed sends, in its own terms."""

    def sends_completed(self, written: Iterable[tuple[int, int]], now: float, /) -> Step: ...

    def send_failed(self, peer: int, seq: int, cause: str, now: float, /) -> Step: ...


class TaskBase(Handler):
    """Error slot, cancellation, the task's reactor, carrying out steps and shutdown shared by both roles.

    A task has a fixed number of threads whatever its number of connections, and one of them owns
    the machine, the reactor and the connections (the reader's task thread; the writer's serving
    thread): every step is carried out there, so nothing is locked per message.
    """

    role: coordination.Role
    machine: Machine

    def __init__(self, key: coordination.ShuffleKey, task_id: int, directory: ShuffleDirectory, options: TaskOptions,
                 *, listen: tuple[str, int] | None = None, receive_buffer: int | None = None) -> None:
        """``listen``: serve peers on this address; ``receive_buffer``: the role's read size (default: the limits')."""
        self.key = key
        self.task_id = task_id
        self.directory = directory
        self.options = options
        self.clock = options.clock
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.error: BaseException | None = None
        self.threads: list[threading.Thread] = []
        self.transcript = Transcript(options.transcript_path) if options.transcript_path else None
        limits = options.limits if receive_buffer is None else replace(options.limits, receive_buffer=receive_buffer)
        self.reactor = Reactor(self, limits, listen=listen, ledger=options.ledger, clock=self.clock)
        self._reported = False
        self._last_failure_poll = 0.0

    # -- carrying out steps (on the owning thread) ------------------------------------------------

    @abstractmethod
    def surface(self, step: Step) -> None:
        """Act on the step's events (and, writer, its new deadline)."""

    @abstractmethod
    def connection_of(self, send: Send) -> Connection:
        """The connection ``send`` goes out on."""

    def carry_out(self, step: Step) -> None:
        """Carry out ``step`` and every step it leads to: surface its events, write its sends in order
        (each run to one connection in one vectored write), report the writes completed at once in one
        input, and a failed write."""
        if not step.sends:
            self.surface(step)  # most inputs: events at most (a reader's release, a buffer growing)
            return
        steps = deque((step,))
        while steps:
            step = steps.popleft()
            self.surface(step)
            sends = step.sends
            start = 0
            while start < len(sends):
                conn = self.connection_of(sends[start])
                end = start + 1
                while end < len(sends) and self.connection_of(sends[end]) is conn:
                    end += 1
                run = sends[start:end]
                start = end
                try:
                    written = conn.send(run)
                except OSError as error:
                    failed = self.write_failed(conn, run, describe(error))
                    if failed is not None:
                        steps.append(failed)
                    continue  # the other connections' sends still go out (a reader may have left)
                if written:
                    steps.append(self.written(written))

    def written(self, sends: Sequence[Send]) -> Step:
        """These notifying sends were written whole: the machine's input for them, in one step."""
        return self.machine.sends_completed([(send.peer, send.message.seq) for send in sends], self.clock())

    def write_failed(self, conn: Connection, unwritten: Sequence[Send], cause: str) -> Step | None:
        """A write failed: the machine fails with SendFailed for the first send it waits on (DATA, or
        the reader's TERMINATION_ACK); a credit or control frame's failure closes the connection, whose
        close fails its channel (typed either way, never a raw OSError)."""
        for send in unwritten:
            if send.notify:
                return self.machine.send_failed(send.peer, send.message.seq, cause, self.clock())
        conn.close()
        return None

    def sent(self, stream: Stream, tokens: list[object]) -> None:
        """The reactor finished writes the kernel could not take at once."""
        self.carry_out(self.written([token for token in tokens if isinstance(token, Send)]))

    # -- errors -----------------------------------------------------------------------------------

    def fail(self, error: BaseException) -> None:
        """Record the first error, stop every wait, and wake the task thread."""
        with self.lock:
            if self.error is None:
                self.error = error
            self.cancel.set()
            self.changed.notify_all()
        self.wake()

    def wake(self) -> None:
        """Interrupt the reactor's poll."""
        self.reactor.wake()

    def run_thread(self, target: Callable[[], None], name: str) -> None:
        """Start a task thread whose exception fails the task instead of vanishing."""
        def body() -> None:
            try:
                target()
            except BaseException as error:  # noqa: BLE001 - every thread error must reach the task thread
                self.fail(error)
        thread = threading.Thread(target=body, name=f"{name}-{self.key.shuffle_id}-{self.task_id}", daemon=True)
        self.threads.append(thread)
        if self.options.ledger is not None:
            self.options.ledger.add_thread(thread)
        thread.start()

    def poll_peer_failure(self, now: float) -> None:
        """Every FAILURE_POLL_S, fail fast if another task of the attempt reported a failure."""
        if now - self._last_failure_poll < FAILURE_POLL_S:
            return
        self._last_failure_poll = now
        state = self.directory.lookup(self.key).state
        if isinstance(state, coordination.AttemptFailure):
            self.peer_failed(state)
        elif state is coordination.AttemptState.RETIRED:
            self.retired()

    def retired(self) -> None:
        """Nobody reads the attempt any more: stop (quietly, see :class:`AttemptRetired`)."""
        self._reported = True
        self.fail(AttemptRetired(self.key))

    def peer_failed(self, failure: coordination.AttemptFailure) -> None:
        """Another task reported ``failure``: stop, naming it (and do not report it again)."""
        self._reported = True
        self.fail(PeerTaskFailed(failure.text, "stopped by the directory"))

    def final_error(self) -> BaseException:
        """The error to raise on the task thread: a peer's root cause beats its local symptom, and
        a retirement explains a peer's early close (the job that read the attempt has ended)."""
        error = self.error
        assert error is not None
        started = self.clock()
        while True:
            seen = self._look_at_attempt() if is_symptom(error) else None
            verdict = root_cause(error, seen, self.clock() - started)
            if verdict is RootCause.LOOK_AGAIN:
                time.sleep(LOOK_AGAIN_S)
                continue
            if verdict is RootCause.NODE_FAILED:
                assert isinstance(seen, errors.ShuffleError)
                seen.__cause__ = error
                return seen
            if verdict is RootCause.PEER_FAILED:
                assert isinstance(seen, coordination.Writers) and isinstance(seen.state, coordination.AttemptFailure)
                self._reported = True
                peer = PeerTaskFailed(seen.state.text, describe(error))
                peer.__cause__ = error
                return peer
            if verdict is RootCause.RETIRED:
                self._reported = True
                return AttemptRetired(self.key)
            return error

    def _look_at_attempt(self) -> coordination.Writers | errors.ShuffleError | None:
        """One look at the attempt: what the directory holds, the node failure it raised, or None
        when it cannot be asked."""
        try:
            return self.directory.lookup(self.key)
        except (OSError, coordination.CoordinationError):
            return None
        except errors.ShuffleError as node_failed:
            return node_failed

    def report(self, error: BaseException) -> None:
        """Tell the directory (once) so the other tasks stop and name this root cause."""
        if self._reported or isinstance(error, (PeerTaskFailed, AttemptRetired)):
            return
        self._reported = True
        try:
            self.directory.report_failure(self.key, self.role, self.task_id, describe(error))
        except (OSError, coordination.CoordinationError):
            pass

    # -- shutdown ---------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop every thread, then close every socket; call once, from the task thread."""
        self.cancel.set()
        with self.lock:
            self.changed.notify_all()
        self.wake()
        current = threading.current_thread()
        for thread in self.threads:
            if thread is not current:
                thread.join(JOIN_TIMEOUT_S)
        self.reactor.close()
        if self.transcript is not None:
            self.transcript.close()
