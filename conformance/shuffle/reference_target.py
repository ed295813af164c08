"""``python -m conformance.shuffle.reference_target``: this project's runtime as an ``exec:`` implementation.

The ``reference`` target of the shuffle suite is exactly ``exec:`` with this program, so the generic
contract (``docs/conformance.md``) is exercised on every run. It reads ``CONFORMANCE_ROLE`` and the
workload named by ``CONFORMANCE_WORKLOAD`` and runs one task of the runtime in
:mod:`reference.shuffle`: a :class:`~reference.shuffle.writer_task.WriterTask` (prints
``LISTENING <port>``, writes the workload's records, ends its input, waits for the acks) or a
:class:`~reference.shuffle.reader_task.ReaderTask` reading from the writer at ``CONFORMANCE_PEER``.
It reports ``COMPLETED`` or ``ERROR <CONDITION> <message>`` on stdout and exits. A workload with an
``auth`` object (an authenticated run) makes every connection run Spark's AuthEngine handshake.

With ``CONFORMANCE_ROLE=trace`` it answers the trace contract as
:mod:`conformance.shuffle.machines_target` does (``traces``, ``connect-timeout``, ``reader-left``, ``deadlines``, ``trace-reset``): the runtime's timers and
protocol decisions are the spec machines'.

With ``CONFORMANCE_ROLE=inputs`` (``inputs``) it answers each request line of ``vectors/inputs.json``'s contract
(the codec, the JSON form of messages, settings parsing) with the spec functions' answer line
(:func:`conformance.shuffle.inputs.serve`).

Besides the roles it declares ``slow-consumer`` (a reader workload with ``slow_consumer`` takes a DATA's
records only as ``CONSUME <n>`` lines on stdin allow, see :class:`Allowance`) and ``settings`` (settings
Spark refuses are reported as ``ERROR INVALID_CONF_VALUE...`` before anything starts).

The directory is a standalone one (reference/shuffle/standalone_directory.py): the runner is the
only other party, so a reader finds exactly the peer writers, and no other task can report a failure.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Callable, Final, Iterable, Iterator

from conformance.shuffle.targets import (
    ACK_TIMEOUT_KEY,
    CASE_VARIABLE,
    MAX_RECORD_SIZE_KEY,
    OTHER_WRITERS_KEY,
    SLOW_CONSUMER_KEY,
    WORKLOAD_VARIABLE,
    auth_from_json,
)
from conformance.external import CAPABILITIES_ROLE, PEER_VARIABLE, ROLE_VARIABLE, parse_tcp
from conformance.shuffle.machines_target import TRACE_ROLE, play_trace
from conformance.shuffle.vector_exec import INPUTS
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.standalone_directory import StandaloneDirectory
from reference.shuffle.task import TaskOptions, describe
from reference.shuffle.writer_task import WriterTask
from spec.shuffle import coordination
from spec.errors import ProtocolError
from spec.shuffle.framing import DEFAULT_MAX_RECORD_SIZE
from spec.shuffle.settings import SettingsError, ShuffleSettings

CAPABILITIES: Final = ("CAPABILITIES writer reader workload reports slow-consumer settings traces connect-timeout "
                       "reader-left deadlines trace-reset inputs inputs-auth inputs-tasks "
                       "inputs-admission")


def report(line: str) -> None:
    print(line.replace("\n", " "), flush=True)


def run(task: Callable[[], None]) -> int:
    """Run a task to its end and report how it ended."""
    try:
        task()
    except ProtocolError as error:
        report(f"ERROR {error.condition} {error.message}")
        return 1
    except Exception as error:  # noqa: BLE001 - any failure is the outcome being reported
        report(f"ERROR - {describe(error)}")
        return 1
    report("COMPLETED")
    return 0


def writer(workload: dict[str, Any], settings: ShuffleSettings, options: TaskOptions) -> int:
    num_readers = int(workload["num_readers"])
    try:
        task = WriterTask(coordination.ShuffleKey(int(workload["shuffle_id"]), 0), int(workload["writer_id"]),
                          num_readers, settings, StandaloneDirectory(), options,
                          directory_id=workload.get("directory_id"))
    except ValueError as refused:  # the permit budget's requirement, checked as Spark's constructor does
        report(f"ERROR - {describe(refused)}")
        return 1
    report(f"LISTENING {task.port}")

    def records() -> Iterator[tuple[int, bytes]]:
        for reader_id in range(num_readers):
            for record in workload["records"].get(str(reader_id), []):
                yield reader_id, bytes.fromhex(record)

    def produce() -> None:
        task.run(records())

    return run(produce)


def reader(workload: dict[str, Any], settings: ShuffleSettings, options: TaskOptions, peer: str) -> int:
    first, *others = (int(w) for w in workload["writer_ids"])
    addresses = {first: peer, **{int(w): a for w, a in workload.get(OTHER_WRITERS_KEY, {}).items()}}
    locations = tuple(coordination.WriterLocation(w, "conformance-peer", *parse_tcp(f"tcp://{addresses[w]}"))
                      for w in (first, *others))
    key = coordination.ShuffleKey(int(workload["shuffle_id"]), 0)
    task = ReaderTask(key, int(workload["reader_id"]), [w.writer_id for w in locations], settings,
                      StandaloneDirectory(locations), options)

    allowance = Allowance.from_stdin() if workload.get(SLOW_CONSUMER_KEY) else None

    def consume() -> None:
        for _ in task.records() if allowance is None else task.records(allowance.take):
            pass

    return run(consume)


class Allowance:
    """A slow consumer: it takes the records of one more DATA per ``CONSUME <n>`` line on stdin, never earlier."""

    def __init__(self) -> None:
        self.allowed = 0
        self.taken = 0
        self._lock = threading.Lock()

    @classmethod
    def from_stdin(cls) -> Allowance:
        allowance = cls()
        threading.Thread(target=allowance._read, args=(sys.stdin,), name="consume-commands", daemon=True).start()
        return allowance

    def _read(self, lines: Iterable[str]) -> None:
        for line in lines:
            words = line.split()
            if len(words) == 2 and words[0] == "CONSUME" and words[1].isdigit():
                with self._lock:
                    self.allowed += int(words[1])

    def take(self) -> bool:
        """Whether the consumer may take the next DATA's records now (and, if so, it does)."""
        with self._lock:
            if self.taken >= self.allowed:
                return False
            self.taken += 1
            return True


def main() -> int:
    role = os.environ.get(ROLE_VARIABLE, "")
    if role == CAPABILITIES_ROLE:
        report(CAPABILITIES)
        return 0
    if role == TRACE_ROLE:  # the runtime takes every protocol decision from the spec machines: they answer traces
        return play_trace()
    if role == INPUTS:  # the runtime's codec, JSON form and settings parsing are the spec's functions
        from conformance.shuffle.inputs import serve

        return serve()
    with open(os.environ[WORKLOAD_VARIABLE]) as document:
        workload = json.load(document)
    try:
        settings = ShuffleSettings.from_dict(workload.get("settings", {}))
    except SettingsError as refused:
        report(f"ERROR {refused.condition} {refused.message}")
        return 1
    ack_timeout_ms = int(workload.get("settings", {}).get(ACK_TIMEOUT_KEY, -1))
    max_record_size = int(workload.get("settings", {}).get(MAX_RECORD_SIZE_KEY, DEFAULT_MAX_RECORD_SIZE))
    auth = workload.get("auth")
    # Spark's flush rule, not the runtime's default idle flush: the suite's cases are Spark's (a buffer is
    # sent when 90% full or at networkBufferMaxWaitTimeMs), so the target behaves as Spark's writer does
    options = TaskOptions(ack_timeout_ms=ack_timeout_ms, auth=None if auth is None else auth_from_json(auth),
                          max_record_size=max_record_size, flush_when_idle=False)
    print(f"conformance case {os.environ.get(CASE_VARIABLE, '?')} as {role}", file=sys.stderr)
    if role == "writer":
        return writer(workload, settings, options)
    if role == "reader":
        return reader(workload, settings, options, os.environ[PEER_VARIABLE])
    print(f"unknown {ROLE_VARIABLE} {role!r}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())
