"""Every edge of the cluster's pure functions, derived from the spec's own tables rather than selected by mutants
(capability ``inputs``: the calls of conformance/cluster/inputs_target.py), so that a bug of a kind no operator
mutant plants (an entry left out of a table, a count restarted at the wrong value, a time assigned where it is
kept) is told apart too:

- every condition code the spec defines (each class of the spec's error tree), decoded off the wire from an
  ERROR frame to its typed error, every code next to them and the last that is not, and a CAS_ERROR with and
  without its entry;
- an update event split into frames (:func:`spec.cluster.wire.update_frames`), each an event (request id 0):
  empty, whole at its limit and one byte either side, a first and a later frame at the limit with its fixed part and one byte either side, an entry
  bigger than a frame, a batch that does not fit the room left or a whole frame, entries out of revision order,
  and the same at MAX_FRAME_BYTES;
- every frame bound (a stranger's, a node's, any frame's) at its length and one byte either side, and a body at a
  message header's length and one byte either side;
- the connection bounds the service's reactor holds (spec/admission.py, spec/departure.py): each size bound at
  its value and one either side, each deadline at its instant and one tick either side, a linger asked again,
  who a newcomer evicts (never itself);
- the failure detector's and the service session's deadlines at their instant and one tick either side, renewed,
  read late and held;
- each of those deadlines again at whole-millisecond instants whose float sum or difference falls on the wrong side
  (:mod:`conformance.inexact`), at the instant and one millisecond either side;
- each refusal of a HELLO answered with its ERROR frame, message included (the wire carries it; a wire walk records
  an ERROR by its condition): the secret carried, none and each of its nearest refused twins, an id refused as long
  as the part of it the refusal repeats and one character either side;
- a client's request built from typed ops (``wire.ops_to_wire``): an insert and updates;
- every rule of every well-formedness check (spec/cluster/types.py: ``check_id``, ``check_address``,
  ``check_batch``, ``Membership.check_well_formed``) at its smallest violating input and its nearest valid one,
  byte bounds counted in bytes of UTF-8, each rule met after a first item that keeps it;
- a membership view's snapshot, and a model's shard, in id order whatever order its members came in
  (``model._snapshot``, ``ClusterModel.shard_members``).

Each call's answer is what this process's spec gives (:func:`conformance.cluster.inputs.run_call`): nothing is
typed by hand, and a change of the spec changes what is owed. Times are binary fractions (a tick is 2**-10 s),
so an instant at its deadline is exactly equal to it; the inexact rows' are whole milliseconds, which the spec's
clock (spec/clock.py) adds as exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Final

from conformance import inexact
from conformance.cluster.inputs import TICK, run_call
from conformance.cluster.wire_walks import CONDITIONS
from spec.cluster import wire
from spec.cluster.detector import MAX_TIMING_MS
from spec.cluster.types import MAX_ADDRESS_BYTES, MAX_BATCH_OPS, MAX_ID_BYTES, MAX_KEY_BYTES, MAX_REVISION, MAX_VALUE_BYTES
from spec.cluster.wire import ServiceKind

SIDES: Final = (-1, 0, 1)
ROOM: Final = 100
"""The bytes of entries a split frame holds beyond its fixed part (the limit: the fixed part plus this)."""


@dataclass(frozen=True, slots=True)
class Edge:
    """One call at one edge, and which edge (what a failure names)."""

    label: str
    call: dict[str, Any]


def _side(offset: int, unit: str = "byte") -> str:
    """An edge's side in words: ``exactly``, ``one byte under``, ``one tick over``."""
    return "exactly" if not offset else f"one {unit} {'under' if offset < 0 else 'over'}"


# -- errors off the wire ---------------------------------------------------------------------------------------

def _error_body(code: int) -> str:
    return wire.encode(ServiceKind.ERROR, 5, code=code, message=f"code {code}")[wire.FRAME_HEADER.sizeof():].hex()


def error_codes() -> list[Edge]:
    """Every code of the spec's error tree, each code next to one (0 and the one past the last included) and the
    last a frame carries, each decoded off the wire; a CAS failure with its entry and without."""
    defined = sorted(CONDITIONS)
    codes = sorted(set(defined) | {c + d for c in defined for d in (-1, 1) if c + d >= 0} | {2**16 - 1})
    edges = [Edge(f"ERROR code {code} ({CONDITIONS.get(code, 'not defined')})",
                  {"call": "errorFrom", "body": _error_body(code)}) for code in codes]
    for found in (False, True):
        actual = {"key": "k", "value": b"\x0a", "revision": 4} if found else None
        body = wire.encode(ServiceKind.CAS_ERROR, 6, key="k", expected=3 if found else 0, found=found,
                           actual=actual)[wire.FRAME_HEADER.sizeof():]
        edges.append(Edge(f"CAS_ERROR {'with' if found else 'without'} its entry",
                          {"call": "errorFrom", "body": body.hex()}))
    return edges


# -- update events split into frames ----------------------------------------------------------------------------

def _fields(kind: ServiceKind) -> dict[str, Any]:
    return {"shard_id": "s1"} if kind is ServiceKind.SHARD_LOG_UPDATE else {}


def _fixed_part(kind: ServiceKind) -> int:
    """The body bytes of an event of ``kind`` holding no entry (each frame of a split event has it)."""
    header: int = wire.FRAME_HEADER.sizeof()
    return len(wire.encode(kind, 0, entries=[], **_fields(kind))) - header


def _entry(number: int, revision: int, size: int) -> dict[str, Any]:
    """An entry whose wire form is ``size`` bytes (its value fills what its key and revision leave)."""
    key = f"k{number}"
    bare: bytes = wire.EntryLayout.build({"key": key, "value": b"", "revision": revision})
    value = max(0, size - len(bare))
    return {"key": key, "value": "ab" * value if value <= 64 else {"repeat": "ab", "times": value},
            "revision": revision}


def _split(kind: ServiceKind, label: str, sized: list[tuple[int, int]], limit: int | None) -> Edge:
    """An update of entries ``(revision, wire size)`` split at ``limit`` (None: MAX_FRAME_BYTES)."""
    call: dict[str, Any] = {"call": "updateSplit", "kind": kind.name, "fields": _fields(kind),
                            "entries": [_entry(n, revision, size) for n, (revision, size) in enumerate(sized)]}
    if limit is not None:
        call["limit"] = limit
    return Edge(f"{kind.name}: {label}", call)


def update_splits() -> list[Edge]:
    """Each rule of the splitter at its edges, for both update kinds (their fixed parts differ)."""
    edges = []
    for kind in (ServiceKind.GOSSIP_UPDATE, ServiceKind.SHARD_LOG_UPDATE):
        limit = _fixed_part(kind) + ROOM
        edges.append(_split(kind, "an empty update", [], None))
        for d in SIDES:
            edges += [
                _split(kind, f"the whole update {_side(d)} its limit", [(1, 40), (2, ROOM - 40 + d)], limit),
                _split(kind, f"a first frame {_side(d)} its limit, then another", [(1, ROOM + d), (2, 20)], limit),
                _split(kind, f"a later frame with its fixed part {_side(d)} the limit",
                       [(1, ROOM), (2, 40), (3, ROOM - 40 + d)], limit),
                _split(kind, f"a third frame with its fixed part {_side(d)} the limit",
                       [(1, ROOM), (2, ROOM), (3, 30), (4, ROOM - 30 + d)], limit),
                _split(kind, f"a batch {_side(d)} the room a frame leaves it",
                       [(1, 40), (2, 30), (2, ROOM - 70 + d), (3, 20)], limit),
            ]
        edges += [
            _split(kind, "a batch bigger than a frame, kept whole", [(1, 20), (2, 50), (2, 50), (2, 50), (3, 20)], limit),
            _split(kind, "entries out of revision order", [(3, 40), (1, 40), (2, 40), (1, 30)], limit),
        ]
        room = wire.MAX_FRAME_BYTES - _fixed_part(kind)
        edges += [_split(kind, f"a first frame {_side(d)} MAX_FRAME_BYTES, then another", [(1, room + d), (2, 20)],
                         None) for d in (0, 1)]
    return edges


# -- frame bounds ---------------------------------------------------------------------------------------------

def frame_bounds() -> list[Edge]:
    """Each bound a frame reader holds (a stranger's, a node's, any frame's) and a message header's length, each
    announced at its value and one byte either side; a body of a header's length and one either side decoded."""
    edges = []
    for name, bound in (("MAX_HELLO_BYTES", wire.MAX_HELLO_BYTES), ("MAX_REQUEST_BYTES", wire.MAX_REQUEST_BYTES),
                        ("MAX_FRAME_BYTES", wire.MAX_FRAME_BYTES)):
        edges += [Edge(f"a frame {_side(d)} {name}", {"call": "feed", "bound": bound, "chunks": [f"{bound + d:08x}21"]})
                  for d in SIDES]
    header = wire.Header.sizeof()
    for d in SIDES:
        renew = wire.encode(ServiceKind.RENEW, 7)[wire.FRAME_HEADER.sizeof():]
        body = (renew + b"\0" * d if d >= 0 else renew[:d]).hex()
        edges += [Edge(f"a frame {_side(d)} a message header", {"call": "feed", "bound": wire.MAX_FRAME_BYTES,
                                                                "chunks": [f"{header + d:08x}" + body]}),
                  Edge(f"a body {_side(d)} a message header", {"call": "decode", "body": body})]
    return edges


# -- the reactor's connection bounds --------------------------------------------------------------------------

def departures() -> list[Edge]:
    """A departure's byte bound at its value and one either side (and nothing queued), its linger at its instant
    and one tick either side, a departure asked again (its linger is not restarted), two in order, one closed."""
    bound, linger = 4, 1.0

    def edge(label: str, steps: list[list[Any]], max_bytes: int = bound, linger_s: float = linger) -> Edge:
        return Edge(f"departures: {label}", {"call": "departures", "maxBytes": max_bytes, "lingerS": linger_s,
                                             "steps": steps})

    edges = [edge(f"{queued} bytes queued", [["leaving", 0, queued, 0.0], ["len"], ["deadline"]])
             for queued in (0, 1, bound - 1, bound, bound + 1)]
    edges += [edge(f"expired {_side(d, 'tick')} its linger", [["leaving", 0, 1, 0.0], ["expired", linger + d * TICK],
                                                              ["len"], ["deadline"]]) for d in SIDES]
    edges += [edge(f"asked again with {queued} bytes queued one tick before its linger ends",
                   [["leaving", 0, 1, 0.0], ["leaving", 0, queued, linger - TICK], ["deadline"], ["expired", linger],
                    ["len"]]) for queued in (bound, bound + 1)]
    edges += [edge("two departures in order, the older first", [["leaving", 1, 1, 0.0], ["leaving", 0, 1, TICK],
                                                                ["deadline"], ["expired", linger], ["deadline"],
                                                                ["expired", linger + TICK], ["len"]]),
              edge("one closed before its linger ends", [["leaving", 0, 1, 0.0], ["closed", 0], ["deadline"],
                                                         ["expired", linger], ["len"]])]
    edges += [edge(f"bounds {max_bytes} bytes, {linger_s} s", [["len"]], max_bytes, linger_s)
              for max_bytes, linger_s in ((-1, linger), (0, linger), (0, 0.0), (0, TICK), (0, -TICK))]
    return edges


def strangers() -> list[Edge]:
    """Strangers at their bound and one past (who the newcomer evicts: the oldest unproven other, else the oldest,
    never itself), their deadline at its instant and one tick either side, one identified or closed."""
    pending, timeout = 2, 1.0

    def edge(label: str, steps: list[list[Any]], max_pending: int = pending, bind_s: float = timeout) -> Edge:
        return Edge(f"strangers: {label}", {"call": "strangers", "maxPending": max_pending, "bindTimeoutS": bind_s,
                                            "steps": steps})

    full = [["accepted", 0, 0.0], ["accepted", 1, TICK]]
    edges = [edge(f"{count} accepted", [["accepted", n, 0.0] for n in range(count)] + [["len"], ["deadline"]])
             for count in (pending - 1, pending, pending + 1)]
    edges += [
        edge("a newcomer at the bound, none proven", full + [["accepted", 2, TICK], ["contains", 0], ["len"]]),
        edge("a newcomer at the bound, the oldest proven", full + [["proven", 0], ["accepted", 2, TICK], ["contains", 0]]),
        edge("a newcomer at the bound, every other proven", full + [["proven", 0], ["proven", 1], ["accepted", 2, TICK],
                                                                    ["contains", 2], ["len"]]),
        edge("an evicted stranger back at the bound, every other proven",
             full + [["proven", 1], ["accepted", 2, TICK], ["proven", 2], ["accepted", 0, 2 * TICK], ["contains", 0]]),
        edge("one held stranger, a newcomer", [["accepted", 0, 0.0], ["accepted", 1, TICK], ["contains", 1]], 1),
        edge("one identified, then a newcomer", full + [["identified", 0], ["accepted", 2, TICK], ["len"],
                                                        ["deadline"]]),
        edge("one closed, its proof forgotten", full + [["proven", 0], ["proven", 1], ["closed", 0], ["len"],
                                                        ["contains", 0], ["accepted", 0, TICK], ["accepted", 2, TICK],
                                                        ["contains", 0]]),
        edge("a newcomer named lower than those held", [["accepted", 5, 0.0], ["accepted", 6, TICK], ["proven", 5],
                                                        ["accepted", 1, TICK], ["contains", 1]]),
    ]
    edges += [edge(f"expired {_side(d, 'tick')} its deadline", full + [["expired", timeout + d * TICK], ["len"],
                                                                       ["deadline"]]) for d in SIDES]
    edges += [edge(f"bounds {max_pending} strangers, {bind_s} s", [["len"]], max_pending, bind_s)
              for max_pending, bind_s in ((0, timeout), (1, timeout), (1, 0.0), (1, TICK))]
    return edges


# -- the detector's and the session's deadlines ----------------------------------------------------------------

def detector_deadlines() -> list[Edge]:
    """Each verdict threshold at its instant and one tick either side, counted from a renewal and from a later one,
    with renewals read late (unread time is not silence, a negative one is none), and a member gone; the policy's
    own bounds at their value and one step either side."""
    heartbeat, fail_after = 0.5, 2.0

    def edge(label: str, renewals: dict[str, float], ticks: list[dict[str, Any]]) -> Edge:
        return Edge(f"detector: {label}", {"call": "detector", "heartbeatS": heartbeat, "failAfterS": fail_after,
                                           "renewals": renewals, "ticks": ticks})

    edges = []
    for name, threshold in (("pfail_after", fail_after / 2), ("fail_after", fail_after)):
        for since in (0.0, 0.25):
            edges.append(edge(f"{name} after a renewal at {since} s, one tick either side", {"n1": since, "n2": 0.0},
                              [{"now": since + threshold + d * TICK, "members": ["n1", "n2"]} for d in SIDES]))
        edges.append(edge(f"{name} one tick past, none, one and two ticks of it unread", {"n1": 0.0},
                          [{"now": threshold + TICK, "members": ["n1"], "unreadFor": u} for u in (0.0, TICK, 2 * TICK)]))
    edges.append(edge("a negative unread time is none, at each threshold", {"n1": 0.0},
                      [{"now": at, "members": ["n1"], "unreadFor": -TICK} for at in (fail_after / 2, fail_after)]))
    edges.append(edge("a member gone, then back", {"n1": 0.0, "n2": 0.0},
                      [{"now": fail_after + TICK, "members": ["n2"]}, {"now": fail_after + TICK, "members": ["n1", "n2"]}]))
    limit_s = MAX_TIMING_MS / 1000
    for heartbeat_s, fail_s in ((0.001, 0.002), (0.001 - 2.0 ** -30, 0.002), (0.001, 0.002 - 2.0 ** -30),
                                (1.0, limit_s - 1.0), (1.0, limit_s - 1.0 + 0.001)):
        edges.append(Edge(f"policy: heartbeat {heartbeat_s} s, fail_after {fail_s} s",
                          {"call": "policy", "heartbeatS": heartbeat_s, "failAfterS": fail_s}))
    return edges


def session_deadlines() -> list[Edge]:
    """A welcomed session's silence at its deadline and one tick either side, after HELLO and after a later frame,
    with its reads held before, at and after the deadline; HELLO at the session bound and one under; the frame
    bound before HELLO and after WELCOME at its value and one byte either side."""
    bound = 1.0

    def frame(kind: ServiceKind, request_id: int, **payload: Any) -> str:
        return wire.encode(kind, request_id, **payload).hex()

    hello = frame(ServiceKind.HELLO, 1, node_id="n1", secret="", takeover="", resume=False, resume_after=0)
    welcomed: list[dict[str, Any]] = [{"at": 0.0, "data": hello, "served": 0},
                                      {"welcome": ["tok", 0.5, 2.0, bound]}]

    def edge(label: str, steps: list[dict[str, Any]]) -> Edge:
        return Edge(f"session: {label}", {"call": "serviceSession", "secret": None, "maxSessions": 2,
                                          "failBoundS": bound, "steps": steps})

    edges = [edge("silence after HELLO, one tick either side of the deadline",
                  welcomed + [{"silent": bound + d * TICK} for d in SIDES]),
             edge("silence after a later frame, one tick either side of the deadline",
                  welcomed + [{"at": 0.5, "data": frame(ServiceKind.RENEW, 2), "served": 1}] +
                  [{"silent": 0.5 + bound + d * TICK} for d in SIDES]),
             edge("reads held one tick either side of the deadline, judged long after",
                  welcomed + [{"silent": 10 * bound, "heldSince": bound + d * TICK} for d in SIDES]),
             edge("reads held long after, judged one tick either side of the deadline",
                  welcomed + [{"silent": bound + d * TICK, "heldSince": 10 * bound} for d in SIDES]),
             edge("a stranger is never silent", [{"silent": 10 * bound}])]
    edges += [edge(f"HELLO with {served} of 2 sessions served", [{"at": 0.0, "data": hello, "served": served}])
              for served in (1, 2)]
    for d in SIDES:  # the bounds the session gives its frame reader: a stranger's, then a welcomed node's
        edges += [edge(f"a stranger's frame {_side(d)} MAX_HELLO_BYTES",
                       [{"at": 0.0, "data": f"{wire.MAX_HELLO_BYTES + d:08x}01", "served": 0}]),
                  edge(f"a welcomed node's frame {_side(d)} MAX_REQUEST_BYTES",
                       welcomed + [{"at": 0.5, "data": f"{wire.MAX_REQUEST_BYTES + d:08x}07", "served": 1}])]
    return edges


INEXACT_MS: Final = 300
"""The bind timeout, linger and silence bound of the inexact rows: 0.3 s, inexact in binary."""
INEXACT_POLICY_MS: Final = (100, 300)
"""The detector policy of the inexact rows (heartbeat, fail_after): thresholds 150 ms and 300 ms."""


def _s(ms: int) -> float:
    return ms / 1000


def inexact_instants() -> list[Edge]:
    """Each deadline the service's bounds and its detector compute, at whole-millisecond instants whose seconds are
    inexact in binary (found by :mod:`conformance.inexact`: the first at which the float sum or difference falls on
    the wrong side), at its instant and one millisecond either side: what an implementation counting integer
    milliseconds decides there (spec/clock.py)."""
    bound = INEXACT_MS
    edges = []
    at = inexact.sum_late(bound)
    for d in SIDES:
        edges += [Edge(f"strangers: a bind timeout of {bound} ms from {at} ms, expired {_side(d, 'ms')} it",
                       {"call": "strangers", "maxPending": 2, "bindTimeoutS": _s(bound),
                        "steps": [["accepted", 0, _s(at)], ["deadline"], ["expired", _s(at + bound + d)], ["len"]]}),
                  Edge(f"departures: a linger of {bound} ms from {at} ms, expired {_side(d, 'ms')} it",
                       {"call": "departures", "maxBytes": 4, "lingerS": _s(bound),
                        "steps": [["leaving", 0, 1, _s(at)], ["deadline"], ["expired", _s(at + bound + d)], ["len"]]})]
    heartbeat, fail_after = INEXACT_POLICY_MS
    for name, threshold in (("pfail_after", fail_after // 2), ("fail_after", fail_after)):
        renewed = inexact.difference_long(threshold)
        edges.append(Edge(f"detector: {name} ({threshold} ms) after a renewal at {renewed} ms, one ms either side",
                          {"call": "detector", "heartbeatS": _s(heartbeat), "failAfterS": _s(fail_after),
                           "renewals": {"n1": _s(renewed)},
                           "ticks": [{"now": _s(renewed + threshold + d), "members": ["n1"]} for d in SIDES]}))
        unread = inexact.difference_long(renewed + threshold)  # now - unread_for lands past the renewal's age
        edges.append(Edge(f"detector: {name} ({threshold} ms) after a renewal at {renewed} ms, {unread} ms of it "
                          "unread, one ms either side",
                          {"call": "detector", "heartbeatS": _s(heartbeat), "failAfterS": _s(fail_after),
                           "renewals": {"n1": _s(renewed)},
                           "ticks": [{"now": _s(renewed + threshold + unread + d), "members": ["n1"],
                                      "unreadFor": _s(unread)} for d in SIDES]}))
    frame = wire.encode(ServiceKind.RENEW, 2).hex()
    hello = wire.encode(ServiceKind.HELLO, 1, node_id="n1", secret="", takeover="", resume=False, resume_after=0).hex()
    last = inexact.sum_early(bound)
    edges.append(Edge(f"session: silence {bound} ms after a frame at {last} ms, one ms either side of the deadline",
                      {"call": "serviceSession", "secret": None, "maxSessions": 2, "failBoundS": _s(bound),
                       "steps": [{"at": 0.0, "data": hello, "served": 0},
                                 {"welcome": ["tok", _s(heartbeat), _s(fail_after), _s(bound)]},
                                 {"at": _s(last), "data": frame, "served": 1},
                                 *({"silent": _s(last + bound + d)} for d in SIDES)]}))
    return edges


HELLO_SECRET: Final = "s3cret"
ECHOED_ID_CHARS: Final = 60
"""How much of a refused id InvalidIdentifier's message repeats (spec/cluster/errors.py): the refusal's text, which the
ERROR frame carries, is answered byte for byte."""


SECRET_TWINS: Final = (("one character short", HELLO_SECRET[:-1]), ("one character longer", HELLO_SECRET + "t"),
                       ("with a blank after it", HELLO_SECRET + " "), ("with a blank before it", " " + HELLO_SECRET),
                       ("with a newline after it", HELLO_SECRET + "\n"), ("in another case", HELLO_SECRET.upper()))
"""The presented secrets nearest the configured one that the service must refuse: a character less or more, a blank
or newline around it (a secret is compared as given, never trimmed: spec.shared_secret), and another case."""


def hello_refusals() -> list[Edge]:
    """Each refusal of a HELLO by the service's session, answered with its ERROR frame, message included (the wire
    carries it): a service with a secret given a HELLO with it, none, and each of its nearest refused twins
    (:data:`SECRET_TWINS`); an id refused that is as long as the part of it the refusal repeats and one character
    either side."""
    def hello(secret: str, node_id: str) -> str:
        return wire.encode(ServiceKind.HELLO, 1, node_id=node_id, secret=secret, takeover="", resume=False,
                           resume_after=0).hex()

    def edge(label: str, secret: str | None, data: str) -> Edge:
        return Edge(f"HELLO refused: {label}", {"call": "serviceSession", "secret": secret, "maxSessions": 2,
                                                "failBoundS": 1.0, "steps": [{"at": 0.0, "data": data, "served": 0}]})

    edges = [edge(f"the secret {label}", HELLO_SECRET, hello(presented, "n1"))
             for label, presented in (("carried", HELLO_SECRET), ("none", ""), *SECRET_TWINS)]
    edges += [edge(f"an id refused {_side(d, 'character')} the {ECHOED_ID_CHARS} its refusal repeats", None,
                   hello("", "n" * (ECHOED_ID_CHARS + d - 1) + "/")) for d in SIDES]
    return edges


# -- well-formedness checks -------------------------------------------------------------------------------------

def _repeat(text: str, times: int) -> dict[str, Any]:
    return {"repeat": text, "times": times}


def identifiers() -> list[Edge]:
    """``check_id``: empty and one character, each character the pattern allows and ones next to it it refuses (a
    trailing newline, a non-ASCII letter), MAX_ID_BYTES and one byte either side."""
    texts: list[tuple[str, Any]] = [(repr(t), t) for t in ("", "a", "Z9", "a.", "a_", "a:", "a-", "a/", "a ", "a\n",
                                                            "\u00e9", "a\x00")]
    texts += [(f"{_side(d)} MAX_ID_BYTES", _repeat("a", MAX_ID_BYTES + d)) for d in SIDES]
    return [Edge(f"id: {label}", {"call": "checkId", "kind": "node", "text": text}) for label, text in texts]


def addresses() -> list[Edge]:
    """``check_address``: empty, MAX_ADDRESS_BYTES and one byte either side, and in two-byte characters exactly and
    one character over (still fewer characters than the bound)."""
    edges = [Edge("address: empty", {"call": "checkAddress", "address": ""})]
    edges += [Edge(f"address: {_side(d)} MAX_ADDRESS_BYTES", {"call": "checkAddress",
                                                               "address": _repeat("a", MAX_ADDRESS_BYTES + d)})
              for d in SIDES]
    edges += [Edge(f"address: two-byte characters, {_side(d, 'character')} MAX_ADDRESS_BYTES",
                   {"call": "checkAddress", "address": _repeat("\u00e9", MAX_ADDRESS_BYTES // 2 + d)}) for d in (0, 1)]
    return edges


def batches() -> list[Edge]:
    """``check_batch``: each rule (op count, key bytes, NUL, value bytes, expected revision, a key twice) at its
    bound and one past, the rule met by a later op after a first that keeps it."""
    def op(key: Any = "k", value: Any = "", expected: int | None = None) -> dict[str, Any]:
        return {"key": key, "value": value, "expected": expected}

    def edge(label: str, ops: list[dict[str, Any]]) -> Edge:
        return Edge(f"batch: {label}", {"call": "checkBatch", "ops": ops})

    edges = [edge(f"{n} ops", [op(f"k{i}") for i in range(n)]) for n in (0, 1, MAX_BATCH_OPS, MAX_BATCH_OPS + 1)]
    edges += [edge(f"a later key of {size} bytes", [op("a"), op(_repeat("k", size))])
              for size in (0, 1, MAX_KEY_BYTES - 1, MAX_KEY_BYTES, MAX_KEY_BYTES + 1)]
    edges += [edge(f"a key of two-byte characters, {_side(d, 'character')} MAX_KEY_BYTES",
                   [op(_repeat("\u00e9", MAX_KEY_BYTES // 2 + d))]) for d in (0, 1)]
    edges += [edge(f"a later key {key!r}", [op("a"), op(key)]) for key in ("k\x00", "\x00", "k\x01")]
    edges += [edge(f"a later value {_side(d)} MAX_VALUE_BYTES", [op("a"), op("b", {"repeat": "00",
                                                                                    "times": MAX_VALUE_BYTES + d})])
              for d in SIDES]
    edges += [edge(f"a later op expecting {expected}", [op("a"), op("b", expected=expected)])
              for expected in (None, -1, 0, 1, MAX_REVISION, MAX_REVISION + 1)]
    edges += [edge(label, ops) for label, ops in (
        ("a key twice in a row", [op("a"), op("a")]), ("a key twice apart", [op("a"), op("b"), op("a")]),
        ("two keys", [op("a"), op("b")]), ("keys that differ in case", [op("a"), op("A")]))]
    return edges


def update_requests() -> list[Edge]:
    """A client's UPDATE_SHARD_LOG request built from typed ops (``wire.ops_to_wire``, which only a client runs, so no
    wire walk reaches it): an insert (no expected revision), an update expecting revision 1 after an insert, and one
    expecting MAX_REVISION."""
    def op(key: str, value: str, expected: int | None) -> dict[str, Any]:
        return {"key": key, "value": value, "expected": expected}

    return [Edge(f"request: {label}", {"call": "updateRequest", "id": 2, "ops": ops}) for label, ops in (
        ("an insert", [op("k", "01", None)]), ("an update of revision 1 after an insert", [op("a", "", None),
                                                                                          op("k", "01", 1)]),
        (f"an update of revision {MAX_REVISION}", [op("k", "", MAX_REVISION)]))]


def memberships() -> list[Edge]:
    """``Membership.check_well_formed``: no shard, a shard with no member and with one (first and after another),
    a shard or node id refused and at MAX_ID_BYTES, a node twice in one shard, in two shards, and two nodes."""
    def edge(label: str, shards: list[tuple[Any, list[Any]]]) -> Edge:
        return Edge(f"membership: {label}", {"call": "checkMembership", "shards": [[s, n] for s, n in shards]})

    return [
        edge("no shard", []),
        edge("a shard with no member", [("s1", [])]),
        edge("a shard with one member", [("s1", ["n1"])]),
        edge("a shard with no member after one with a member", [("s1", ["n1"]), ("s2", [])]),
        edge("a shard id refused", [("s/1", ["n1"])]),
        edge("an empty shard id", [("", ["n1"])]),
        edge("a node id refused, after a valid one", [("s1", ["n1", "n/2"])]),
        edge("a node twice in one shard", [("s1", ["n1", "n1"])]),
        edge("a node in two shards", [("s1", ["n1"]), ("s2", ["n1"])]),
        edge("two nodes in two shards", [("s1", ["n1"]), ("s2", ["n2"])]),
        edge("a node named as a shard", [("s1", ["s1"])]),
    ] + [edge(f"{what} id {_side(d)} MAX_ID_BYTES", [(_repeat("s", MAX_ID_BYTES + d) if what == "shard" else "s1",
                                                      [_repeat("n", MAX_ID_BYTES + d) if what == "node" else "n1"])])
         for what in ("shard", "node") for d in SIDES]


def view_orders() -> list[Edge]:
    """A membership view's snapshot lists its shards and each shard's members by id (``model._snapshot``) whatever
    order its records came in: a member removed and added again (last in), and one moved to a shard whose id sorts
    before that of its old shard-mates; and a model lists a shard's members by id (``shard_members``, out of a set,
    whose order Python's string hashing draws anew in each process: twelve members leave it no chance to be
    sorted)."""
    def view(label: str, changes: list[tuple[int, str, list[str] | None]]) -> Edge:
        nodes = [["n1", "127.0.0.1:7001", "OK"], ["n2", "127.0.0.1:7002", "OK"], ["n3", "127.0.0.1:7003", "OK"]]
        return Edge(f"view: {label}", {"call": "view", "snapshot": {"epoch": 1, "shards": {"s2": nodes}},
                                       "changes": [{"epoch": e, "node": n, "record": r} for e, n, r in changes],
                                       "owed": ["n1", []]})

    members = {f"n{i:02d}": [f"127.0.0.1:{7000 + i}", "s1", "OK", 0] for i in range(12, 0, -1)}
    return [view("a member removed and added again", [(2, "n1", None), (3, "n1", ["s2", "127.0.0.1:7001", "OK"])]),
            view("the lowest id moved to a later shard id", [(2, "n1", ["s3", "127.0.0.1:7001", "OK"])]),
            view("a higher id moved to an earlier shard id", [(2, "n3", ["s1", "127.0.0.1:7003", "OK"])]),
            Edge("model: a shard of twelve members, listed by id", {
                "call": "model", "revision": 1, "members": members, "after": 0,
                "op": {"kind": "SetState", "node_id": "n01", "state": "PFAIL"}})]


FAMILIES: Final[tuple[Callable[[], list[Edge]], ...]] = (
    error_codes, update_splits, frame_bounds, departures, strangers, detector_deadlines, session_deadlines,
    inexact_instants, identifiers, addresses, batches, memberships, hello_refusals, update_requests, view_orders)


def every_edge() -> list[Edge]:
    return [edge for family in FAMILIES for edge in family()]


def differences(answer: Callable[[dict[str, Any]], dict[str, Any]], edges: list[Edge] | None = None) -> list[str]:
    """Each edge whose call ``answer`` answers otherwise than the spec does, with both answers."""
    problems = []
    for edge in every_edge() if edges is None else edges:
        owed, got = run_call(edge.call), answer(edge.call)
        if got != owed:
            problems.append(f"{edge.label}: answered {str(got)[:300]}, expected {str(owed)[:300]}")
    return problems
