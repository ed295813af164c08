"""The spec's answer to a connection-bound policy request, shared by the shuffle and cluster input corpora: the
policies with which a server bounds what strangers make it hold (:mod:`spec.admission`, :mod:`spec.departure`) and
what a relay reads of a connection's use from its HTTP/2 frame headers (:mod:`spec.http2_watch`), walked step by step.

``strangers`` (:class:`~spec.admission.StrangerAdmission`: ``maxPending``, ``bindTimeoutS``), ``departures``
(:class:`~spec.departure.Departures`: ``maxBytes``, ``lingerS``) and ``connections``
(:class:`~spec.admission.ConnectionAdmission`: ``maxConnections``) each run ``steps``, one ``[method, args...]``
each (peers are integers, times seconds), and answer every step's result in order (``accepted`` on
``connections``: ``{"admitted", "evicted"}``); a bound the policy refuses is answered as the refusal. ``watch``
(:class:`~spec.http2_watch.ConnectionWatch`: ``maxStreams``) feeds ``["from_client", HEX]`` and
``["from_server", HEX]`` (the bytes relayed each way) and answers the connection's use after each.

A corpus that replays these names this module among its ``PREFIXES``, so a planted spec reaches the answers.
"""

from __future__ import annotations

from typing import Any, Callable, Final, Mapping

from spec.admission import Admission, ConnectionAdmission, ConnectionUse, StrangerAdmission
from spec.departure import Departures
from spec.http2_watch import ConnectionWatch

Json = Mapping[str, Any]
STEPS: Final[dict[str, tuple[str, ...]]] = {
    "strangers": ("accepted", "proven", "identified", "closed", "expired", "deadline", "len", "contains"),
    "departures": ("leaving", "closed", "expired", "deadline", "len"),
    "connections": ("accepted", "using", "closed", "len", "contains"),
    "watch": ("from_client", "from_server"),
}
"""Each request's policy and the methods its steps may call."""


def _policy(request: Json) -> Any:
    if request["function"] == "strangers":
        return StrangerAdmission[int](int(request["maxPending"]), float(request["bindTimeoutS"]))
    if request["function"] == "departures":
        return Departures[int](int(request["maxBytes"]), float(request["lingerS"]))
    if request["function"] == "watch":
        return ConnectionWatch(int(request["maxStreams"]))
    return ConnectionAdmission[int](int(request["maxConnections"]))


def _result(value: object) -> Any:
    if isinstance(value, Admission):
        return {"admitted": value.admitted, "evicted": value.evicted}
    return value


def answer_policy(request: Json) -> dict[str, Any]:
    """The spec's answer to one connection-bound request: every step's result, or the refusal of its bounds."""
    try:
        policy = _policy(request)
    except ValueError as error:
        return {"error": type(error).__name__, "errorParams": {}}
    results: list[Any] = []
    for name, *args in request["steps"]:
        assert name in STEPS[request["function"]], name
        if name == "len":
            results.append(len(policy))
        elif name == "contains":
            results.append(args[0] in policy)
        elif isinstance(policy, ConnectionWatch):
            getattr(policy, name)(bytes.fromhex(args[0]))
            results.append(policy.use.name)
        else:
            call: Callable[..., object] = getattr(policy, name)
            results.append(_result(call(*(ConnectionUse[a] if isinstance(a, str) else a for a in args))))
    return {"value": results}
