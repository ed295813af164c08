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
from typing import Any, Final, Mapping, Sequence

from conformance.external import ROLE_VARIABLE, ExecProcess, LaunchError

TRACES: Final = "traces"
DEADLINES: Final = "deadlines"
"""Capability: with the trace header ``deadlines`` true, the program adds to each answer ``deadline``, the
instant in milliseconds at which it next needs a ``tick`` (null: none), as the spec machines' steps say."""
TRACE_ROLE: Final = "trace"
TRACE_VARIABLE: Final = "CONFORMANCE_TRACE"
ANSWER_TIMEOUT_S: Final = 10.0
HEADER_KEYS: Final = ("role", "peers", "settings", "ackTimeoutMs", "writerIds", "directoryId", "connectTimeoutMs",
                       "deadlines")


class TraceDriverError(Exception):
    """The program broke the trace contract (no answer, not JSON); the message says how."""


def missing_capability(declared: frozenset[str], role: str) -> str | None:
    """Why a program declaring ``declared`` cannot play a ``role`` trace, or None."""
    missing = sorted({TRACES, role} - declared)
    return f"target does not declare: {', '.join(missing)}" if missing else None


def exec_answers(command: str, test: Mapping[str, Any], inputs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The program's answer to every input of one trace."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="conformance-trace-") as header:
        json.dump({k: test[k] for k in HEADER_KEYS if k in test}, header)
        header.flush()
        try:
            process = ExecProcess(command, {ROLE_VARIABLE: TRACE_ROLE, TRACE_VARIABLE: header.name}, interactive=True)
        except LaunchError as exc:
            raise TraceDriverError(str(exc)) from None
        try:
            answers = []
            for index, step in enumerate(inputs):
                if not process.send_line(json.dumps(step)):
                    raise TraceDriverError(f"step {index} ({step['input']}): the program stopped reading stdin")
                line = process.line(index, ANSWER_TIMEOUT_S)
                if line is None:
                    raise TraceDriverError(f"step {index} ({step['input']}): no answer line within "
                                           f"{ANSWER_TIMEOUT_S:g} s\n{process.stderr_tail(500)}")
                try:
                    answers.append(json.loads(line))
                except json.JSONDecodeError:
                    raise TraceDriverError(f"step {index} ({step['input']}): answer is not JSON: {line[:200]!r}") from None
            return answers
        finally:
            process.stop()
