"""``python -m conformance.shuffle.machines_target``: the spec's shuffle machines behind the ``exec:``
trace contract, the reference any other implementation's trace driver is compared with.

With ``CONFORMANCE_ROLE=capabilities`` it prints ``CAPABILITIES writer reader traces connect-timeout reader-left deadlines trace-reset``. With
``CONFORMANCE_ROLE=trace`` it reads the trace named by ``CONFORMANCE_TRACE`` (role, peers, settings, writerIds, directoryId,
ackTimeoutMs, readersMayLeave, deadlines), then answers each input line on stdin (one step of ``traces.json`` without its
``sends``/``events``) with one line ``{"sends": [...], "events": [...]}`` on stdout (docs/conformance.md); the line
``{"input": "reset", "trace": HEADER}`` (``trace-reset``) starts the next trace in the same process, answered ``{}``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Final

from conformance.external import CAPABILITIES_ROLE, ROLE_VARIABLE

TRACE_ROLE: Final = "trace"
TRACE_VARIABLE: Final = "CONFORMANCE_TRACE"
CAPABILITIES: Final = "CAPABILITIES writer reader traces connect-timeout reader-left deadlines trace-reset"


def main() -> int:
    role = os.environ.get(ROLE_VARIABLE, "")
    if role == CAPABILITIES_ROLE:
        print(CAPABILITIES, flush=True)
        return 0
    if role != TRACE_ROLE:
        print(f"unsupported {ROLE_VARIABLE} {role!r}", file=sys.stderr)
        return 127
    return play_trace()


def play_trace() -> int:
    """Answer the trace named by ``CONFORMANCE_TRACE``, one stdin line at a time."""
    # imported here: the reference target imports this module for every case, and only a trace needs these
    from conformance.shuffle.vector_traces import answer_json, apply_input, new_machine

    with open(os.environ[TRACE_VARIABLE]) as document:
        trace = json.load(document)
    machine, deadlines = new_machine(trace["role"], trace), bool(trace.get("deadlines"))
    for line in sys.stdin:
        step = json.loads(line)
        if step.get("input") == "reset":  # trace-reset: the next trace, played by this process
            trace = step["trace"]
            machine, deadlines = new_machine(trace["role"], trace), bool(trace.get("deadlines"))
            print("{}", flush=True)
        else:
            print(json.dumps(answer_json(apply_input(machine, step), deadlines)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
