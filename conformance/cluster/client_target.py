"""The client role of the cluster target harness (capability ``client``): one client session machine driven
sans-IO through a walk of inputs, answered in plain JSON. A conformance case cannot otherwise reach the
client's end of a session (HELLO's token and resume point, WELCOME, request ids, the reconnect backoff,
the decoders only a client runs, what the Core is told), so a harness offering this role runs its own
client machine on the runner's inputs: no socket and no wall clock, only the ``now`` each step gives.

The control line ``CLIENT <json>`` (conformance/cluster/controls.py) carries a walk:
``{"settings": {"node", "secret", "timeoutMs", "takeover", "backoffFirstMs", "backoffLimitMs", "jitter"},
"steps": [...]}``; ``jitter`` is the list of fractions the backoff's random draws take in turn (a draw
between lo and hi is ``lo + f * (hi - lo)``). Each step has ``at`` (ms) and one input: ``connected`` (a
connection is up: send HELLO), ``dialFailed``, ``receive`` (hex bytes from the service), ``request`` (a
kind's name, with ``payload``: fields as the wire names them, values of ops in hex), ``forget`` (a request
id), ``tick``, ``lost`` (the connection ended) or ``close`` (the owner closed the handle). The answer, one
per step: ``sent`` (the hex of what the machine sends), ``id`` (a request's id), ``raised`` (an error's
class name; a CAS failure's key, expected revision and entry too), ``step`` (notifications for the Core,
replies and failures by request id, whether the session was welcomed and the timing WELCOME told, whether
the connection is to be closed, whether a dial is due) and ``deadline`` (ms, or null).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from typing import Any, Callable

from spec.cluster.errors import ClusterError, RevisionMismatch
from spec.cluster.session import Backoff, ClientSession, ClientStep
from spec.cluster.types import NodeId
from spec.cluster.wire import ServiceKind


def plain(value: Any) -> Any:
    """A value as plain JSON: dataclasses by field (named by type), enums by value, bytes in hex."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__} | {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return str(value) if isinstance(value, str) else value
    return str(value)


def error(raised: ClusterError | RuntimeError) -> Any:
    """An error as the caller sees it: its class, and a CAS failure's key, expected revision and entry."""
    if isinstance(raised, RevisionMismatch):
        return {"type": "RevisionMismatch", "key": raised.key, "expected": raised.expected, "actual": plain(raised.actual)}
    return type(raised).__name__


def _step(step: ClientStep, session: ClientSession) -> dict[str, Any]:
    out = {"notifications": [plain(n) for n in step.notifications],
           "replies": {str(rid): {"kind": m.kind.name} | plain(m.payload) for rid, m in sorted(step.replies.items())},
           "failed": {str(rid): error(e) for rid, e in sorted(step.failed.items())},
           "welcomed": step.welcomed, "close": step.close is not None, "dial": step.dial}
    if step.welcomed and session.timing is not None:  # what the runtime paces its heartbeats by
        out["timing"] = plain(session.timing)
    return out


def _uniform(jitter: list[float]) -> Callable[[float, float], float]:
    fractions = itertools.cycle(jitter or [1.0])
    return lambda lo, hi: lo + next(fractions) * (hi - lo)


def _ops(payload: dict[str, Any]) -> dict[str, Any]:
    if "ops" not in payload:
        return payload
    return payload | {"ops": [op | {"value": bytes.fromhex(op["value"])} for op in payload["ops"]]}


class ClientDriver:
    """One client session machine and the steps carried out on it (the generator also reads its state to
    aim a walk's next step)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        s = settings
        self.session = ClientSession(NodeId(s["node"]), secret=s["secret"], timeout=s["timeoutMs"] / 1000,
                                     takeover=s.get("takeover"),
                                     backoff=Backoff(s["backoffFirstMs"] / 1000, s["backoffLimitMs"] / 1000),
                                     uniform=_uniform(s.get("jitter", [1.0])))

    def step(self, step: dict[str, Any]) -> dict[str, Any]:
        """Carry out one step; what it produced, and the deadline after it."""
        session = self.session
        now = step["at"] / 1000
        out: dict[str, Any] = {}
        try:
            if "connected" in step:
                out["sent"] = session.hello(now).hex()
            elif "dialFailed" in step:
                session.dial_failed(now)
            elif "receive" in step:
                out["step"] = _step(session.receive(bytes.fromhex(step["receive"]), now), session)
            elif "request" in step:
                rid, frame = session.request(ServiceKind[step["request"]], now, **_ops(step.get("payload", {})))
                out |= {"id": rid, "sent": frame.hex()}
            elif "forget" in step:
                session.forget(step["forget"])
            elif "tick" in step:
                out["step"] = _step(session.tick(now), session)
            elif "lost" in step:
                out["step"] = _step(session.connection_lost(step["lost"], now), session)
            elif "close" in step:
                session.close()
        except (ClusterError, RuntimeError) as raised:  # what the machine raises: an answer the runner compares
            out["raised"] = error(raised)
        deadline = session.deadline
        out["deadline"] = None if deadline is None else round(deadline * 1000, 3)
        return out


def run(walk: dict[str, Any]) -> list[dict[str, Any]]:
    """Every step of ``walk`` carried out on a fresh client session; what each produced."""
    driver = ClientDriver(walk["settings"])
    return [driver.step(step) for step in walk["steps"]]
