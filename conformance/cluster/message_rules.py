"""Every rule of the service's messages (spec/cluster/wire.py and the service's end of a session,
spec/cluster/session.py), each at its smallest violating input, sent raw (capability ``service``):

- each request kind, with a valid payload, one byte long and one byte short: MALFORMED_MESSAGE and
  closed (a layout parsed without its end check, or a prefix of it, passes neither);
- the kinds next to each range of defined ones (0, 9, 31, 39, 63, 69, 255): unknown, so MALFORMED_MESSAGE
  and closed, before HELLO and after;
- a request before HELLO: MALFORMED_MESSAGE for that request, and closed;
- after HELLO, a second HELLO or a kind that is not a request (a reply's, OK): answered MALFORMED_MESSAGE
  with its own request id, and the session goes on (a RENEW is still served);
- a key that is not UTF-8, a scope that is not a Scope: MALFORMED_MESSAGE.
"""

from __future__ import annotations

from typing import Any, Callable, Final

from conformance.cluster.harness import ClusterTarget, session, verdict
from conformance.cluster.service_wire import RawConnection, ServiceAddress
from conformance.framework import CaseContext, Verdict
from spec.cluster import wire
from spec.cluster.errors import MalformedMessage
from spec.cluster.session import REQUESTS
from spec.cluster.wire import ServiceKind

UNKNOWN_KINDS: Final = tuple(k for k in (0, 9, 31, 39, 63, 69, 255) if k not in set(ServiceKind))
"""The numbers next to every range of defined kinds (1-8, 32-38, 64-68), and the last."""


def _payloads(node: str) -> dict[ServiceKind, dict[str, Any]]:
    """A valid payload of each request kind (whatever the answer, it parses)."""
    ops = [{"key": f"{node}-k", "value": b"v", "expected": 0}]
    return {
        ServiceKind.JOIN_CLUSTER: {"address": "127.0.0.1:7000"},
        ServiceKind.REMOVE_FROM_CLUSTER: {"node_id": node},
        ServiceKind.JOIN_SHARD: {"shard_id": "no-such-shard"},
        ServiceKind.REMOVE_FROM_SHARD: {"node_id": node},
        ServiceKind.UPDATE_GOSSIP: {"scope": 1, "ops": ops},
        ServiceKind.UPDATE_SHARD_LOG: {"ops": ops},
        ServiceKind.RENEW: {},
    }


def _body(kind: int, request_id: int, payload: bytes = b"") -> bytes:
    """A frame of any kind number, known or not."""
    body = kind.to_bytes(1, "big") + request_id.to_bytes(8, "big") + payload
    return len(body).to_bytes(wire.FRAME_HEADER.sizeof(), "big") + body


def _after_join(address: ServiceAddress, node: str, frame: bytes, judge: Callable[[RawConnection], list[str]]) -> list[str]:
    """``frame`` sent by a node that said HELLO and joined; what ``judge`` finds of the service's answer."""
    with RawConnection(address) as raw:
        problem = raw.join(raw.hello(node))
        if problem is not None:
            return [problem]
        raw.send(frame)
        return judge(raw)


def _closed_as_malformed(raw: RawConnection) -> list[str]:
    """MALFORMED_MESSAGE with request id 0 (after any events), then the connection closed."""
    refused, _ = raw.until(ServiceKind.ERROR)
    if refused is None:
        return ["closed without the MalformedMessage line"]
    if refused.payload["code"] != MalformedMessage.code or refused.request_id != 0:
        return [f"answered {refused.payload} (request {refused.request_id}) instead of MalformedMessage"]
    rest, _ = raw.until(ServiceKind.ERROR, ServiceKind.OK, ServiceKind.REVISION, ServiceKind.RENEWED)
    return [] if rest is None else [f"kept the connection open after the refusal ({rest.kind.name})"]


def _refused_before_hello(address: ServiceAddress, frame: bytes, request_id: int) -> list[str]:
    """``frame`` from a stranger: MALFORMED_MESSAGE for ``request_id`` (0: the frame broke the wire), then closed."""
    with RawConnection(address) as raw:
        raw.send(frame)
        reply = raw.read()
        if reply is None or reply.kind is not ServiceKind.ERROR or reply.payload["code"] != MalformedMessage.code \
                or reply.request_id != request_id:
            return [f"answered {reply and (reply.kind.name, reply.request_id, reply.payload)}, not MALFORMED_MESSAGE "
                    f"for request {request_id}"]
        return [] if raw.read() is None else ["kept the connection open after the refusal"]


def _answered_and_open(request_id: int) -> Callable[[RawConnection], list[str]]:
    """MALFORMED_MESSAGE for request ``request_id``, then a RENEW served."""
    def judge(raw: RawConnection) -> list[str]:
        answer, _ = raw.until(ServiceKind.ERROR, ServiceKind.OK, ServiceKind.REVISION, ServiceKind.WELCOME)
        if answer is None or answer.kind is not ServiceKind.ERROR or answer.payload["code"] != MalformedMessage.code \
                or answer.request_id != request_id:
            return [f"answered {answer and (answer.kind.name, answer.request_id, answer.payload)}, not "
                    f"MALFORMED_MESSAGE for request {request_id}"]
        raw.request(ServiceKind.RENEW, request_id + 1)
        renewed, _ = raw.until(ServiceKind.RENEWED, ServiceKind.ERROR)
        if renewed is None or renewed.kind is not ServiceKind.RENEWED:
            return [f"the session did not go on: a RENEW afterwards was answered {renewed}"]
        return []
    return judge


def _malformed_answer(raw: RawConnection) -> list[str]:
    """MALFORMED_MESSAGE, as the answer to the request or before a close."""
    answer, _ = raw.until(ServiceKind.ERROR, ServiceKind.REVISION)
    if answer is None or answer.kind is not ServiceKind.ERROR or answer.payload["code"] != MalformedMessage.code:
        return [f"answered {answer and (answer.kind.name, answer.payload)}, not MALFORMED_MESSAGE"]
    return []


def message_rules(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Each rule of this module's docstring at its smallest violating input."""
    assert target.url is not None
    address = ServiceAddress.parse(target.url)
    problems: list[str] = []
    with session(target, ctx) as s:
        for kind, payload in _payloads(s.id_of("payload")).items():
            assert kind in REQUESTS
            good = wire.encode(kind, 3, **payload)[wire.FRAME_HEADER.sizeof():]
            for what, body in (("one byte long", good + b"\0"), ("one byte short", good[:-1])):
                if len(body) < wire.Header.sizeof():
                    continue  # a RENEW one byte short is a short frame (wire/short-frames)
                frame = wire.FRAME_HEADER.build(len(body)) + body
                problems += [f"{kind.name} {what}: {p}" for p in _after_join(
                    address, s.id_of(f"{kind.value}-{len(body)}"), frame, _closed_as_malformed)]
            problems += [f"{kind.name} before HELLO: {p}" for p in _refused_before_hello(
                address, wire.encode(kind, 3, **payload), 3)]
        for number in UNKNOWN_KINDS:
            problems += [f"kind {number} before HELLO: {p}" for p in _refused_before_hello(address, _body(number, 1), 0)]
            problems += [f"kind {number} after HELLO: {p}" for p in _after_join(
                address, s.id_of(f"unknown-{number}"), _body(number, 3), _closed_as_malformed)]
        again = wire.encode(ServiceKind.HELLO, 3, node_id=s.id_of("twice"), secret=address.secret, takeover="",
                            resume=False, resume_after=0)
        problems += [f"HELLO twice: {p}" for p in _after_join(address, s.id_of("twice"), again, _answered_and_open(3))]
        problems += [f"OK (a reply) after HELLO: {p}" for p in _after_join(
            address, s.id_of("reply"), wire.encode(ServiceKind.OK, 3), _answered_and_open(3))]
        bad_key = wire.encode(ServiceKind.UPDATE_SHARD_LOG, 3, ops=[{"key": "k\u00e9", "value": b"", "expected": 0}])
        bad_key = bad_key.replace("k\u00e9".encode(), b"k\xff\xfe")
        problems += [f"a key that is not UTF-8: {p}" for p in _after_join(address, s.id_of("utf8"), bad_key,
                                                                           _closed_as_malformed)]
        scope = wire.encode(ServiceKind.UPDATE_GOSSIP, 3, scope=1, ops=_payloads(s.id_of("scope"))[
            ServiceKind.UPDATE_SHARD_LOG]["ops"])
        scope = scope[:wire.FRAME_HEADER.sizeof() + wire.Header.sizeof()] + b"\x02" + \
            scope[wire.FRAME_HEADER.sizeof() + wire.Header.sizeof() + 1:]
        problems += [f"scope 2: {p}" for p in _after_join(address, s.id_of("scope"), scope, _malformed_answer)]
    return verdict("each message rule at its smallest violating input is refused with MALFORMED_MESSAGE (closing "
                   "the connection for a frame that breaks the wire, answering the request for one out of place)",
                   problems[:4])
