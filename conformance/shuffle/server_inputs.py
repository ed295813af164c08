"""The connection-bound requests of the shuffle input corpus (``vectors/inputs.json``, capability
``inputs-admission``): the policies with which a server bounds what strangers make it hold (:mod:`spec.admission`,
:mod:`spec.departure`), walked step by step; a trace is one channel and never fills a server.

``strangers`` (:class:`~spec.admission.StrangerAdmission`: ``maxPending``, ``bindTimeoutS``), ``departures``
(:class:`~spec.departure.Departures`: ``maxBytes``, ``lingerS``) and ``connections``
(:class:`~spec.admission.ConnectionAdmission`: ``maxConnections``) each run ``steps``, one ``[method, args...]``
each (peers are integers, times seconds), and answer every step's result in order (``accepted`` on
``connections``: ``{"admitted", "evicted"}``); a bound the policy refuses is answered as the refusal.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Final, Mapping

from spec.admission import Admission, ConnectionAdmission, ConnectionUse, StrangerAdmission
from spec.departure import Departures

Json = Mapping[str, Any]
STEPS: Final[dict[str, tuple[str, ...]]] = {
    "strangers": ("accepted", "proven", "identified", "closed", "expired", "deadline", "len", "contains"),
    "departures": ("leaving", "closed", "expired", "deadline", "len"),
    "connections": ("accepted", "using", "closed", "len", "contains"),
}
"""Each request's policy and the methods its steps may call."""
FUNCTIONS: Final = tuple(STEPS)


def _policy(request: Json) -> Any:
    if request["function"] == "strangers":
        return StrangerAdmission[int](int(request["maxPending"]), float(request["bindTimeoutS"]))
    if request["function"] == "departures":
        return Departures[int](int(request["maxBytes"]), float(request["lingerS"]))
    return ConnectionAdmission[int](int(request["maxConnections"]))


def _result(value: object) -> Any:
    if isinstance(value, Admission):
        return {"admitted": value.admitted, "evicted": value.evicted}
    return value


def answer_server(request: Json) -> dict[str, Any]:
    """The spec's answer to one connection-bound request: every step's result, or the refusal of its bounds."""
    try:
        policy = _policy(request)
    except ValueError as error:
        return {"error": type(error).__name__, "errorParams": {}}
    results = []
    for name, *args in request["steps"]:
        assert name in STEPS[request["function"]], name
        if name == "len":
            results.append(len(policy))
        elif name == "contains":
            results.append(args[0] in policy)
        else:
            call: Callable[..., object] = getattr(policy, name)
            results.append(_result(call(*(ConnectionUse[a] if isinstance(a, str) else a for a in args))))
    return {"value": results}


# -- the generator ----------------------------------------------------------------------------------------------

_BOUNDS: Final = (0, 1, 1, 2, 2, 2, 3, 3, 2**31 - 1, 2**31, -1)
_TIMES: Final = (0.0, -0.5, 0.25, 0.25, 0.5, 0.5, 0.5, 1.0, 1.0)


def _steps(rng: random.Random, function: str, timeout: float, size: int) -> list[list[Any]]:
    """Up to 14 steps on peers 0..3, time moving forward by 0, the timeout and a quarter either side."""
    now, steps = 0.0, []
    for _ in range(rng.randint(1, 14)):
        name = rng.choice(STEPS[function] + STEPS[function][:1] * 3 + STEPS[function][1:2])  # arrivals, proofs
        peer = rng.randint(0, 3)
        now += rng.choice((0.0, 0.0, 0.25, timeout, max(timeout - 0.25, 0.0), timeout + 0.25))
        if name == "expired":
            steps.append([name, now])
        elif name == "accepted" and function == "strangers":
            steps.append([name, peer, now])
        elif name == "leaving":
            queued = rng.choice((0, 1, size, size - 1, size + 1, 2**31 - 1, 2**31))
            steps.append([name, peer, max(queued, 0), now])
        elif name == "using":
            steps.append([name, peer, rng.choice([u.name for u in ConnectionUse])])
        elif name in ("deadline", "len"):
            steps.append([name])
        else:
            steps.append([name, peer])
    return steps


def _server_request(rng: random.Random) -> dict[str, Any]:
    function = rng.choice(FUNCTIONS)
    size, timeout = rng.choice(_BOUNDS), rng.choice(_TIMES)
    request: dict[str, Any] = {"function": function}
    if function == "strangers":
        request.update(maxPending=size, bindTimeoutS=timeout)
    elif function == "departures":
        request.update(maxBytes=size, lingerS=timeout)
    else:
        request.update(maxConnections=size)
    request["steps"] = _steps(rng, function, timeout, size)
    if function == "strangers" and 0 < size <= 3 and rng.random() < 0.6:
        request["steps"][:0] = _full_house(rng, size)
    return request


def _full_house(rng: random.Random, size: int) -> list[list[Any]]:
    """Every place held, some strangers proven (one perhaps closed and back), then a newcomer: who is evicted."""
    steps: list[list[Any]] = [["accepted", peer, 0.0] for peer in range(size)]
    for peer in rng.sample(range(size), rng.randint(1, size)):
        steps.append(["proven", peer])
    if rng.random() < 0.4:
        steps += [["closed", 0], ["accepted", 0, 0.0]]
    steps.append(["accepted", rng.choice((size, size, 0, size - 1)), 0.0])
    return steps


SHAPES: Final[tuple[tuple[Callable[[random.Random], dict[str, Any]], int], ...]] = ((_server_request, 6),)
"""The connection-bound request shape with its weight among all the inputs' shapes."""
