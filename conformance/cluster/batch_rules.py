"""Every validation rule of a metadata batch (``spec.cluster.types.check_batch``), derived from its bounds:
for each rule the smallest input that breaks it and the largest that keeps it, sent raw on the service's
wire for both batch operations (UPDATE_SHARD_LOG, UPDATE_GOSSIP in each scope).

A provider client checks a batch before sending it, so a service that forgot a rule would pass every
case sent through a client: these are sent raw (capability ``service``). A refused batch must be
answered INVALID_BATCH and leave nothing behind: the batch's well-formed first key is still free (an
insert of it afterwards is served). The revision 0 rule has no wire form (0 there means an insert),
nor has a revision past MAX_REVISION (the field is a u64): the least and the most expected revisions, 1
and MAX_REVISION, are valid and, on a fresh key, a compare-and-swap that fails (CAS_ERROR), not an
invalid batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Final

from conformance.cluster.harness import ClusterTarget, session, verdict
from conformance.cluster.service_wire import RawConnection, ServiceAddress
from conformance.framework import CaseContext, Verdict
from spec.cluster.errors import InvalidBatch
from spec.cluster.types import MAX_BATCH_OPS, MAX_KEY_BYTES, MAX_REVISION, MAX_VALUE_BYTES, Scope
from spec.cluster.wire import ServiceKind

Ops = list[dict[str, Any]]


def _op(key: str, value: bytes = b"v", expected: int = 0) -> dict[str, Any]:
    return {"key": key, "value": value, "expected": expected}


EXPECTED_BOUNDS: Final = (1, MAX_REVISION)
"""The least and the most expected revision a batch may carry."""


def _sized_key(tag: str, size: int, filler: str = "k") -> str:
    """A key of exactly ``size`` UTF-8 bytes: ``tag-``, then ``filler`` (one character), topped up with ``k``."""
    head = f"{tag}-"
    room, width = size - len(head.encode()), len(filler.encode())
    return head + filler * (room // width) + "k" * (room % width)


@dataclass(frozen=True, slots=True)
class Rule:
    """One bound of ``check_batch``: the smallest violating batch and the largest valid one, for a tag
    that makes every key fresh (keys start with it; its second character, one per operation, is the
    one-byte key)."""

    name: str
    violating: Callable[[str], Ops]
    valid: Callable[[str], Ops]


RULES: Final[tuple[Rule, ...]] = (
    Rule("no ops (the least is 1)", lambda t: [], lambda t: [_op(f"{t}-one")]),
    Rule(f"{MAX_BATCH_OPS + 1} ops (the most is {MAX_BATCH_OPS})",
         lambda t: [_op(f"{t}-{i}") for i in range(MAX_BATCH_OPS + 1)],
         lambda t: [_op(f"{t}-{i}") for i in range(MAX_BATCH_OPS)]),
    Rule("an empty key (the least is 1 byte)", lambda t: [_op(f"{t}-first"), _op("")],
         lambda t: [_op(f"{t}-first"), _op(t[1])]),
    Rule(f"a key of {MAX_KEY_BYTES + 1} bytes (the most is {MAX_KEY_BYTES})",
         lambda t: [_op(f"{t}-first"), _op(_sized_key(t, MAX_KEY_BYTES + 1))],
         lambda t: [_op(f"{t}-first"), _op(_sized_key(t, MAX_KEY_BYTES))]),
    Rule(f"a key of {MAX_KEY_BYTES // 2} two-byte characters and one more byte (bytes counted, not characters)",
         lambda t: [_op(f"{t}-first"), _op(_sized_key(t, MAX_KEY_BYTES + 1, "\u00e9"))],
         lambda t: [_op(f"{t}-first"), _op(_sized_key(t, MAX_KEY_BYTES, "\u00e9"))]),
    Rule("a key holding NUL", lambda t: [_op(f"{t}-first"), _op(f"{t}-a\x00b")],
         lambda t: [_op(f"{t}-first"), _op(f"{t}-a\x01b")]),
    Rule(f"a value of {MAX_VALUE_BYTES + 1} bytes (the most is {MAX_VALUE_BYTES})",
         lambda t: [_op(f"{t}-first"), _op(f"{t}-big", bytes(MAX_VALUE_BYTES + 1))],
         lambda t: [_op(f"{t}-first"), _op(f"{t}-big", bytes(MAX_VALUE_BYTES))]),
    Rule("a key twice", lambda t: [_op(f"{t}-first"), _op(f"{t}-twice"), _op(f"{t}-twice", b"w")],
         lambda t: [_op(f"{t}-first"), _op(f"{t}-twice"), _op(f"{t}-once", b"w")]),
)

OPERATIONS: Final[tuple[tuple[str, ServiceKind, dict[str, Any]], ...]] = (
    ("UPDATE_SHARD_LOG", ServiceKind.UPDATE_SHARD_LOG, {}),
    ("UPDATE_GOSSIP SHARD", ServiceKind.UPDATE_GOSSIP, {"scope": Scope.SHARD.value}),
    ("UPDATE_GOSSIP GLOBAL", ServiceKind.UPDATE_GOSSIP, {"scope": Scope.GLOBAL.value}),
)

_ANSWERS: Final = (ServiceKind.REVISION, ServiceKind.ERROR, ServiceKind.CAS_ERROR)


class _Requests:
    """A joined node's raw connection, numbering its requests."""

    def __init__(self, raw: RawConnection) -> None:
        self.raw = raw
        self.next_id = 3

    def send(self, kind: ServiceKind, **payload: Any) -> str:
        """``kind``'s answer in words: ``REVISION``, ``ERROR <condition>``, ``CAS_ERROR`` or ``closed``."""
        request_id, self.next_id = self.next_id, self.next_id + 1
        self.raw.request(kind, request_id, **payload)
        answer, _ = self.raw.until(*_ANSWERS)
        if answer is None:
            return "closed"
        if answer.kind is ServiceKind.ERROR:
            return "ERROR INVALID_BATCH" if answer.payload["code"] == InvalidBatch.code else f"ERROR {answer.payload}"
        return answer.kind.name


def _judge(requests: _Requests, operation: str, kind: ServiceKind, payload: dict[str, Any], rule: Rule,
           tag: str) -> list[str]:
    problems = []
    violating = rule.violating(f"{tag}x")
    refused = requests.send(kind, ops=violating, **payload)
    if refused != "ERROR INVALID_BATCH":
        problems.append(f"{operation}, {rule.name}: answered {refused}, not INVALID_BATCH")
    elif violating:
        after = requests.send(kind, ops=[violating[0]], **payload)
        if after != "REVISION":
            problems.append(f"{operation}, {rule.name}: refused, but an insert of its first key afterwards was "
                            f"answered {after} (the refused batch left it written)")
    served = requests.send(kind, ops=rule.valid(f"{tag}v"), **payload)
    if served != "REVISION":
        problems.append(f"{operation}, largest valid beside {rule.name}: answered {served}, not REVISION")
    return problems


def _judge_expected(requests: _Requests, operation: str, kind: ServiceKind, payload: dict[str, Any],
                    tag: str) -> list[str]:
    """Each bound of the expected revision, on a fresh key: a valid op whose compare-and-swap fails."""
    problems = []
    for expected in EXPECTED_BOUNDS:
        answer = requests.send(kind, ops=[_op(f"{tag}-{expected}", expected=expected)], **payload)
        if answer != "CAS_ERROR":
            problems.append(f"{operation}, expected revision {expected} on a fresh key: answered {answer}, not CAS_ERROR")
    return problems


def batch_rules(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Each rule x each batch operation: the smallest violating batch refused with INVALID_BATCH leaving
    nothing written, the largest valid one served."""
    assert target.url is not None
    address = ServiceAddress.parse(target.url)
    problems: list[str] = []
    with session(target, ctx) as s:
        with RawConnection(address, timeout=min(30.0, ctx.remaining())) as raw:
            problem = raw.join(raw.hello(s.id_of("rules")))
            if problem is not None:
                return verdict("", [problem])
            requests = _Requests(raw)
            for o, (operation, kind, payload) in enumerate(OPERATIONS):
                for r, rule in enumerate(RULES):
                    problems += _judge(requests, operation, kind, payload, rule, f"o{o}r{r}")
                problems += _judge_expected(requests, operation, kind, payload, f"o{o}e")
    return verdict(f"{len(RULES)} rules x {len(OPERATIONS)} operations: the smallest violating batch is "
                   "INVALID_BATCH and writes nothing, the largest valid one is served; an expected revision of "
                   "1 or MAX_REVISION is valid (CAS_ERROR on a fresh key)", problems[:4])

