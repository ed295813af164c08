"""Shuffle trace vectors driven through the ``exec:`` trace contract (docs/conformance.md).

The program is started once per trace with ``CONFORMANCE_ROLE=trace`` and ``CONFORMANCE_TRACE`` naming
a file with the trace's role, peers, settings, ack timeout and ids (writerIds, directoryId); each step's input goes to its stdin
as one JSON line and the answer (``{"sends": [...], "events": [...]}``) comes back as one line.
Which traces apply is what the program declares with ``CONFORMANCE_ROLE=capabilities``: ``traces``
and the role (``writer`` or ``reader``) the trace puts under test.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any, Final, Iterator, Mapping, Sequence

from conformance.external import ROLE_VARIABLE, ExecProcess, LaunchError

TRACES: Final = "traces"
DEADLINES: Final = "deadlines"
"""Capability: with the trace header ``deadlines`` true, the program adds to each answer ``deadline``, the
instant in milliseconds at which it next needs a ``tick`` (null: none), as the spec machines' steps say."""
RESET: Final = "trace-reset"
"""Capability: the input line ``{"input": "reset", "trace": HEADER}`` starts a fresh side under test from that
trace header (answered with one line, ``{}``), so that many traces are played by one process (the walk corpus)."""
INPUTS: Final = "inputs"
"""Capability: with ``CONFORMANCE_ROLE=inputs`` the program answers each request line on stdin (a pure function of
the codec, the JSON form or settings parsing: ``vectors/inputs.json``) with one answer line."""
INPUTS_AUTH: Final = "inputs-auth"
"""Capability: the inputs contract takes the authentication requests too (one end of the AuthEngine handshake with
its randomness given, its session cipher, the settings that ask for it: ``conformance/shuffle/auth_inputs.py``)."""
INPUTS_TASKS: Final = "inputs-tasks"
"""Capability: the inputs contract takes the task-failure requests too (an attempt's failure report, a task's root
cause, a typed error's text and JSON: ``conformance/shuffle/task_inputs.py``); the reference's own decisions, which
another implementation may make otherwise."""
INPUTS_ADMISSION: Final = "inputs-admission"
"""Capability: the inputs contract takes the connection-bound requests too (a server's policies for strangers,
departing connections and client connections, and a relay's reading of a connection's use from its HTTP/2 frame
headers, walked step by step: ``conformance/connection_policies.py``)."""
TRACE_ROLE: Final = "trace"
TRACE_VARIABLE: Final = "CONFORMANCE_TRACE"
ANSWER_TIMEOUT_S: Final = 10.0
READER_LEFT: Final = "reader-left"
"""Capability: the program takes the writer input ``readerLeft`` (the run no longer serves that reader: its open
buffer, queued and unwritten DATA are dropped and their permits return; no ack is awaited from it) and the writer
header ``readersMayLeave`` (a reader's connection closing, or a write to it failing, before its ack is such a leave
instead of a failure): the spec's ``WriterMachine.reader_left`` and ``readers_may_leave``, an extension Spark 4.3.0
lacks (docs/spec/shuffle.md, the LEAVE rows)."""
HEADER_KEYS: Final = ("role", "peers", "settings", "ackTimeoutMs", "writerIds", "directoryId", "connectTimeoutMs",
                       "readersMayLeave", "deadlines")


class TraceDriverError(Exception):
    """The program broke the trace contract (no answer, not JSON); the message says how."""


def missing_capability(declared: frozenset[str], role: str) -> str | None:
    """Why a program declaring ``declared`` cannot play a ``role`` trace, or None."""
    missing = sorted({TRACES, role} - declared)
    return f"target does not declare: {', '.join(missing)}" if missing else None


def exec_answers(command: str, test: Mapping[str, Any], inputs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The program's answer to every input of one trace."""
    (answers,) = exec_traces(command, [(test, inputs)])
    return answers


def exec_traces(command: str, traces: Sequence[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]]
                ) -> list[list[dict[str, Any]]]:
    """The program's answers to every input of each trace, all played by one process: the first trace's header
    starts it, each later one is a ``reset`` line (capability ``trace-reset``)."""
    if not traces:
        return []
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="conformance-trace-") as header:
        json.dump(_header(traces[0][0]), header)
        header.flush()
        try:
            process = ExecProcess(command, {ROLE_VARIABLE: TRACE_ROLE, TRACE_VARIABLE: header.name}, interactive=True)
        except LaunchError as exc:
            raise TraceDriverError(str(exc)) from None
        try:
            played: list[list[dict[str, Any]]] = []
            lines = 0
            for number, (test, inputs) in enumerate(traces):
                if number:
                    _answer(process, lines, {"input": "reset", "trace": _header(test)}, "reset")
                    lines += 1
                answers = []
                for index, step in enumerate(inputs):
                    answers.append(_answer(process, lines, step, f"step {index} ({step['input']})"))
                    lines += 1
                played.append(answers)
            return played
        finally:
            process.stop()


def exec_each(command: str, traces: Sequence[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]], reset: bool
              ) -> Iterator[list[dict[str, Any]] | TraceDriverError]:
    """Each trace's answers, or the contract breach that stopped it, in order: all played by one process when the
    program declares ``trace-reset`` (a process's start costs more than most traces), else (or when that one
    process breaks the contract, to pin the breach to its trace) one process a trace, each started only when the
    consumer asks for its trace."""
    if reset and len(traces) > 1:
        try:
            yield from exec_traces(command, traces)
            return
        except TraceDriverError:
            pass
    for test, inputs in traces:
        try:
            yield exec_answers(command, test, inputs)
        except TraceDriverError as exc:
            yield exc


def _header(test: Mapping[str, Any]) -> dict[str, Any]:
    return {k: test[k] for k in HEADER_KEYS if k in test}


def exec_inputs(command: str, requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The program's answer to every request of the inputs contract (capability ``inputs``), all sent to one
    process started with ``CONFORMANCE_ROLE=inputs``."""
    try:
        process = ExecProcess(command, {ROLE_VARIABLE: INPUTS}, interactive=True)
    except LaunchError as exc:
        raise TraceDriverError(str(exc)) from None
    try:
        return [_answer(process, n, request, f"request {n} ({request['function']})")
                for n, request in enumerate(requests)]
    finally:
        process.stop()


def _answer(process: ExecProcess, line_number: int, step: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Send one input, read its answer line."""
    if not process.send_line(json.dumps(step)):
        raise TraceDriverError(f"{where}: the program stopped reading stdin")
    line = process.line(line_number, ANSWER_TIMEOUT_S)
    if line is None:
        raise TraceDriverError(f"{where}: no answer line within {ANSWER_TIMEOUT_S:g} s\n{process.stderr_tail(500)}")
    try:
        answer: dict[str, Any] = json.loads(line)
    except json.JSONDecodeError:
        raise TraceDriverError(f"{where}: answer is not JSON: {line[:200]!r}") from None
    return answer
