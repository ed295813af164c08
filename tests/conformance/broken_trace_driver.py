"""A deliberately broken ``exec:`` trace driver: the spec's reader machine, but it never answers a
DATA with a CREDIT (only the handshake CREDIT goes out), and it declares no writer role, so writer
traces are unsupported rather than failed."""

from __future__ import annotations

import json
import os
import sys

from conformance.external import CAPABILITIES_ROLE, ROLE_VARIABLE
from conformance.shuffle.machines_target import TRACE_VARIABLE
from conformance.shuffle.vector_traces import answer_json, apply_input, new_machine


def main() -> int:
    if os.environ.get(ROLE_VARIABLE) == CAPABILITIES_ROLE:
        print("CAPABILITIES reader traces", flush=True)
        return 0
    with open(os.environ[TRACE_VARIABLE]) as document:
        trace = json.load(document)
    machine = new_machine(trace["role"], trace)
    for line in sys.stdin:
        step = json.loads(line)
        answer = answer_json(apply_input(machine, step))
        if step["input"] == "received":
            answer["sends"] = [s for s in answer["sends"] if s["message"]["type"] != "CREDIT_CONTROL_MESSAGE"]
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
