"""Cases on the cluster service's own wire (capability ``service``): frames at and around every size
bound of spec/cluster/wire.py, one byte short and one byte long, each rule of HELLO's node id at its smallest
violating input, and a resumed HELLO's catch-up.
A provider client never sends these, so they are sent raw."""

from __future__ import annotations

import time
from typing import cast

from conformance.cluster.harness import ClusterTarget, op, session, stopped_clock, verdict
from conformance.cluster.service_wire import RawConnection, ServiceAddress, refusal
from conformance.framework import CaseContext, Verdict
from spec.cluster import wire
from spec.cluster.errors import FrameTooLarge, InvalidIdentifier, MalformedMessage, ProviderClosed, ProviderUnavailable
from spec.cluster.types import MAX_BATCH_OPS, MAX_ID_BYTES, MAX_KEY_BYTES, MAX_VALUE_BYTES, Scope
from spec.cluster.wire import ServiceKind, ServiceMessage


def _address(target: ClusterTarget) -> ServiceAddress:
    assert target.url is not None
    return ServiceAddress.parse(target.url)


def short_frames(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Every length shorter than a message header (kind + request id), each on a fresh connection after a
    good HELLO: a RENEW cut short, so only the length can refuse it (its kind is known and its payload
    empty; zero bytes would be refused as an unknown kind by a service that checks no length)."""
    address = _address(target)
    renew = wire.encode(ServiceKind.RENEW, 2)[wire.FRAME_HEADER.sizeof():]
    problems = []
    with session(target, ctx) as s:
        for length in range(wire.Header.sizeof()):
            with RawConnection(address) as raw:
                raw.send(raw.hello(s.id_of(f"short-{length}")))
                welcome, _ = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)
                if welcome is None or welcome.kind is not ServiceKind.WELCOME:
                    problems.append(f"a good HELLO was answered {welcome}")
                    continue
                raw.send(wire.FRAME_HEADER.build(length) + renew[:length])
                problems += [f"a {length}-byte RENEW: {p}" for p in refusal(raw, MalformedMessage)]
    return verdict(f"a frame of 0..{wire.Header.sizeof() - 1} bytes (a RENEW cut short) is refused with "
                   "MALFORMED_MESSAGE and the connection closed", problems)


def one_byte_off(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """A HELLO one byte short and one byte long, and a RENEW one byte long after a good HELLO."""
    address = _address(target)
    with session(target, ctx) as s:
        problems = []
        with RawConnection(address) as raw:
            body = raw.hello(s.id_of("short"))[wire.FRAME_HEADER.sizeof():]
            raw.send(wire.FRAME_HEADER.build(len(body) - 1) + body[:-1])
            problems += [f"HELLO one byte short: {p}" for p in refusal(raw, MalformedMessage)]
        with RawConnection(address) as raw:
            body = raw.hello(s.id_of("long"))[wire.FRAME_HEADER.sizeof():] + b"\x00"
            raw.send(wire.FRAME_HEADER.build(len(body)) + body)
            problems += [f"HELLO one byte long: {p}" for p in refusal(raw, MalformedMessage)]
        with RawConnection(address) as raw:
            raw.send(raw.hello(s.id_of("renew")))
            welcome, _ = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)
            if welcome is None or welcome.kind is not ServiceKind.WELCOME:
                problems.append(f"a good HELLO was answered {welcome}")
            else:
                body = wire.encode(ServiceKind.RENEW, 2)[wire.FRAME_HEADER.sizeof():] + b"\x00"
                raw.send(wire.FRAME_HEADER.build(len(body)) + body)
                problems += [f"RENEW one byte long: {p}" for p in refusal(raw, MalformedMessage)]
        return verdict("a message one byte shorter or longer than its layout is refused with MALFORMED_MESSAGE "
                       "and the connection closed, before HELLO and after", problems)


def _full_batch(node: str) -> list[dict[str, object]]:
    """MAX_BATCH_OPS ops, each with a key of MAX_KEY_BYTES and a value of MAX_VALUE_BYTES."""
    return [{"key": f"{node}-{i:03d}-".ljust(MAX_KEY_BYTES, "k"), "value": bytes(MAX_VALUE_BYTES), "expected": 0}
            for i in range(MAX_BATCH_OPS)]


def size_bounds(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """A HELLO of exactly MAX_HELLO_BYTES and a request of exactly MAX_REQUEST_BYTES (a full batch of
    full-size keys and values) are served; a frame announcing one byte more is refused from its header."""
    address = _address(target)
    with session(target, ctx) as s:
        problems = []
        with RawConnection(address) as raw:
            raw.send(wire.FRAME_HEADER.build(wire.MAX_HELLO_BYTES + 1))
            problems += [f"a stranger's frame of MAX_HELLO_BYTES + 1: {p}" for p in refusal(raw, FrameTooLarge)]
        node = s.id_of("big")
        with RawConnection(address, timeout=min(30.0, ctx.remaining())) as raw:
            pad = wire.MAX_HELLO_BYTES - (len(raw.hello(node)) - wire.FRAME_HEADER.sizeof())
            hello = raw.hello(node, takeover="t" * pad)
            assert len(hello) == wire.FRAME_HEADER.sizeof() + wire.MAX_HELLO_BYTES
            raw.send(hello)
            welcome, _ = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)
            if welcome is None or welcome.kind is not ServiceKind.WELCOME:
                return verdict("", [f"a HELLO of exactly MAX_HELLO_BYTES was answered {welcome}"])
            raw.request(ServiceKind.JOIN_CLUSTER, 2, address="127.0.0.1:7000")
            joined, _ = raw.until(ServiceKind.SHARD, ServiceKind.ERROR)
            if joined is None or joined.kind is not ServiceKind.SHARD:
                return verdict("", [f"JOIN_CLUSTER was answered {joined}"])
            batch = wire.encode(ServiceKind.UPDATE_GOSSIP, 3, scope=Scope.SHARD.value, ops=_full_batch(node))
            assert len(batch) == wire.FRAME_HEADER.sizeof() + wire.MAX_REQUEST_BYTES
            raw.send(batch)
            reply, _ = raw.until(ServiceKind.REVISION, ServiceKind.ERROR, ServiceKind.CAS_ERROR)
            if reply is None or reply.kind is not ServiceKind.REVISION:
                problems.append(f"a full batch of exactly MAX_REQUEST_BYTES was answered "
                                f"{'nothing' if reply is None else (reply.kind.name, reply.payload)}")
            else:
                raw.send(wire.FRAME_HEADER.build(wire.MAX_REQUEST_BYTES + 1))
                problems += [f"a node's frame of MAX_REQUEST_BYTES + 1: {p}"
                             for p in _refusal_after_events(raw, FrameTooLarge)]
        return verdict("frames of exactly MAX_HELLO_BYTES (before HELLO) and MAX_REQUEST_BYTES (after) are served; "
                       "one byte more is refused with FRAME_TOO_LARGE from the length alone", problems)


def _refusal_after_events(raw: RawConnection, error: type[FrameTooLarge]) -> list[str]:
    """Like :func:`refusal` on a node's connection, where events (request id 0) may come first."""
    refused, _ = raw.until(ServiceKind.ERROR)
    if refused is None:
        return [f"closed without the {error.__name__} line"]
    if refused.payload["code"] != error.code or refused.request_id != 0:
        return [f"answered {refused.payload} instead of {error.__name__}"]
    rest, _ = raw.until(ServiceKind.ERROR, ServiceKind.REVISION, ServiceKind.OK)
    return [] if rest is None else [f"kept the connection open after the refusal ({rest.kind.name})"]


def resume_repeats_nothing(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """HELLO with ``resume`` after revision R: the catch-up holds nothing at or below R, and everything
    the node is owed above it. R is the revision that moved the node into its shard (the log and SHARD
    gossip written before were delivered on the move), then, in turn, the revision of a shard-log batch,
    of a GLOBAL gossip batch and of a SHARD gossip batch, each written after the move."""
    address = _address(target)
    with session(target, ctx) as s:
        b = s.node("b")
        assert b.shard is not None
        b.provider.update_shard_log([op("k1", b"1")])
        b.provider.update_gossip([op(f"{b.shard}:g", b"1")], Scope.SHARD)
        a = s.node("a")
        a.provider.join_shard(b.shard)
        a.core.wait(ctx, "a notified of k1", lambda: "k1" in a.core.latest("log"))
        moved = min(snap.epoch for _, snap in a.core.snapshots if snap.shard_of(a.id) == b.shard)
        written = [("k2", b.provider.update_shard_log([op("k2", b"2")])),
                   (f"{s.tag}:global", b.provider.update_gossip([op(f"{s.tag}:global", b"1")], Scope.GLOBAL)),
                   (f"{b.shard}:shard", b.provider.update_gossip([op(f"{b.shard}:shard", b"1")], Scope.SHARD))]
        problems: list[str] = []
        token = a.provider.takeover_token
        for after in [moved] + [revision for _, revision in written]:
            owed = {key for key, revision in written if revision > after}
            more, token = _resumed(address, a.id, token, after, owed)
            problems += more
        return verdict("a resumed HELLO's catch-up notifies nothing at or below the revision it resumes after, and "
                       "every shard-log and gossip batch above it (after the node's move into its shard, a shard-log "
                       "batch, a GLOBAL and a SHARD gossip batch)", problems)


def _resumed(address: ServiceAddress, node: str, token: str, after: int, owed: set[str]) -> tuple[list[str], str]:
    with RawConnection(address) as raw:
        raw.send(raw.hello(node, takeover=token, resume_after=after))
        welcome, caught_up = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)
        if welcome is None or welcome.kind is not ServiceKind.WELCOME:
            return [f"HELLO resuming after {after} was answered {welcome}"], token
        entries = [(m.kind.name, e.key, e.revision) for m in caught_up
                   if m.kind in (ServiceKind.SHARD_LOG_UPDATE, ServiceKind.GOSSIP_UPDATE) for e in m.payload["entries"]]
        problems = [f"resuming after {after} repeated {[e for e in entries if e[2] <= after]}"] \
            if any(e[2] <= after for e in entries) else []
        missed = owed - {key for _, key, _ in entries}
        if missed:
            problems.append(f"resuming after {after} did not deliver {sorted(missed)}")
        return problems, welcome.payload["session"]


def node_id_rules(tag: str) -> list[tuple[str, str]]:
    """HELLO's node id rule (``spec.cluster.types.check_id``: 1..MAX_ID_BYTES bytes of ``[A-Za-z0-9._:-]``),
    each with its smallest violating id: empty, one byte over, a byte outside the set at the start, in the
    middle and at the end (an id checked by a prefix match passes the last), a two-byte character."""
    body = f"{tag}-"
    longest = body + "k" * (MAX_ID_BYTES + 1 - len(body))
    return [("an empty id", ""), (f"{MAX_ID_BYTES + 1} bytes", longest), ("'/' first", f"/{tag}"),
            ("' ' in the middle", f"{tag} x"), ("'/' last", f"{tag}/"), ("a two-byte character", f"{tag}\u00e9")]


def hello_node_id_rules(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Each rule of HELLO's node id at its smallest violating input, on a fresh connection: answered
    INVALID_IDENTIFIER and closed; an id of exactly MAX_ID_BYTES bytes is welcomed."""
    address = _address(target)
    problems = []
    with session(target, ctx) as s:
        tag = s.id_of("ids")
        for what, node_id in node_id_rules(tag):
            with RawConnection(address) as raw:
                raw.send(raw.hello(node_id))
                reply = raw.read()
                if reply is None or reply.kind is not ServiceKind.ERROR or reply.payload["code"] != InvalidIdentifier.code:
                    problems.append(f"{what} ({node_id[:20]!r}): answered {reply and reply.kind.name} "
                                    f"{reply and reply.payload}, not INVALID_IDENTIFIER")
                elif raw.read() is not None:
                    problems.append(f"{what}: the connection stayed open after the refusal")
        longest = tag + "-" + "k" * (MAX_ID_BYTES - len(tag) - 1)
        for what, node_id in ((f"an id of {MAX_ID_BYTES} bytes", longest),
                              ("an id of every character class", f"{tag}.AZ_az:09-")):
            with RawConnection(address) as raw:
                welcome = _welcomed(raw, node_id)
                if isinstance(welcome, str):
                    problems.append(f"{what}: {welcome}")
    return verdict(f"{len(node_id_rules(''))} node ids each breaking one rule: INVALID_IDENTIFIER and closed; one "
                   f"of {MAX_ID_BYTES} bytes and one holding each allowed character class ([A-Za-z0-9._:-]): "
                   "WELCOME", problems[:4])


def _welcomed(raw: RawConnection, node_id: str) -> ServiceMessage | str:
    """HELLO for ``node_id``: the WELCOME, or what came instead."""
    raw.send(raw.hello(node_id))
    reply, _ = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)
    if reply is None or reply.kind is not ServiceKind.WELCOME:
        return f"a good HELLO was answered {reply and (reply.kind.name, reply.payload)}"
    return reply


def silence_at_its_deadline(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """On a stopped clock two nodes say HELLO (their last frame at the same instant) and then nothing:
    with the clock moved to exactly fail_bound later (as WELCOME declares it) both sessions stay open;
    then one sends a RENEW and the clock moves 1 ms on: the silent one is closed, the other stays open
    (a frame moves the deadline) until 1 ms before fail_bound after its RENEW, and is closed 1 ms past it.
    (The exact instant is judged after HELLO only, at the stopped clock's whole second: there the
    deadline and the clock's time are the same sum; after the RENEW they are two sums of decimal
    milliseconds, which floating point need not make equal.)"""
    address = _address(target)
    problems: list[str] = []
    with session(target, ctx) as s, stopped_clock(target, s) as (_, advance):
        with RawConnection(address) as quiet, RawConnection(address) as renewing:
            welcomes = [_welcomed(quiet, s.id_of("quiet")), _welcomed(renewing, s.id_of("renewing"))]
            for welcome in welcomes:
                if isinstance(welcome, str):
                    return verdict("", [welcome])
            bound = cast(ServiceMessage, welcomes[0]).payload["fail_bound_ms"]
            advance(bound)
            if quiet.closed_within(0.1) or renewing.closed_within(0.0):
                problems.append(f"a session was closed exactly fail_bound ({bound} ms) after its last frame")
            renewing.request(ServiceKind.RENEW, 2)
            renewed, _ = renewing.until(ServiceKind.RENEWED, ServiceKind.ERROR)
            if renewed is None or renewed.kind is not ServiceKind.RENEWED:
                return verdict("", problems + [f"RENEW at fail_bound was answered {renewed}"])
            advance(1)
            if not quiet.closed_within(5.0):
                problems.append(f"a session silent for fail_bound + 1 ms ({bound + 1} ms) was not closed")
            if renewing.closed_within(0.1):
                problems.append("a session that sent a RENEW 1 ms before was closed (its frame did not move "
                                "the deadline)")
            advance(bound - 2)
            if renewing.closed_within(0.1):
                problems.append(f"a session was closed fail_bound - 1 ms ({bound - 1} ms) after its RENEW")
            advance(2)
            if not renewing.closed_within(5.0):
                problems.append(f"a session silent for fail_bound + 1 ms after its RENEW was not closed")
    return verdict("a session silent for exactly fail_bound is open, 1 ms more and it is closed; a frame "
                   "moves its deadline to fail_bound after it", problems)


def sessions_at_their_bound(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """HELLOs on fresh connections until one is refused: exactly as many nodes as the target declares
    it serves are welcomed (the first one past is PROVIDER_UNAVAILABLE and closed; a refusal while some
    sessions of earlier cases may still be ending is tried again), and once one of them ends a new HELLO
    is welcomed again."""
    assert target.sessions is not None
    address = _address(target)
    bound = target.sessions()
    problems: list[str] = []
    held: list[RawConnection] = []
    with session(target, ctx) as s:
        end = time.monotonic() + min(10.0, ctx.remaining())
        try:
            while not problems:
                raw = RawConnection(address, timeout=max(1.0, ctx.remaining()))
                raw.send(raw.hello(s.id_of(f"seat-{len(held)}")))
                reply, _ = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)  # events may come first
                if reply is not None and reply.kind is ServiceKind.WELCOME:
                    held.append(raw)
                    if len(held) > bound:
                        problems.append(f"a HELLO was welcomed with {bound} nodes served (the bound declared)")
                    continue
                raw.close()
                if reply is None or reply.kind is not ServiceKind.ERROR or reply.payload["code"] != ProviderUnavailable.code:
                    problems.append(f"HELLO with {len(held)} of this case's nodes served was answered "
                                    f"{reply and (reply.kind.name, reply.payload)}, not WELCOME or PROVIDER_UNAVAILABLE")
                elif len(held) == bound:
                    break
                elif time.monotonic() > end:
                    problems.append(f"HELLO refused with only {len(held)} of {bound} nodes served by this case")
                else:
                    time.sleep(0.05)  # sessions of an earlier case may still be ending
            if not problems:
                held.pop().close()
                end = time.monotonic() + min(10.0, ctx.remaining())
                while True:
                    with RawConnection(address, timeout=max(1.0, ctx.remaining())) as raw:
                        if not isinstance(_welcomed(raw, s.id_of("again")), str):
                            break
                    if time.monotonic() > end:
                        problems.append("no HELLO was welcomed after one of the nodes at the bound ended")
                        break
                    time.sleep(0.05)
        finally:
            for raw in held:
                raw.close()
    return verdict(f"the service welcomes exactly its declared bound of nodes ({bound}); the next HELLO is "
                   "PROVIDER_UNAVAILABLE, and a slot is free again once a session ends", problems)


def takeover_closes_the_old_session(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """A node's HELLO on a second connection with the first session's takeover token: the second is
    welcomed, the first is told PROVIDER_CLOSED as an event (request id 0) and closed."""
    address = _address(target)
    with session(target, ctx) as s, RawConnection(address) as first, RawConnection(address) as second:
        node = s.id_of("taken")
        welcome = _welcomed(first, node)
        if isinstance(welcome, str):
            return verdict("", [welcome])
        second.send(second.hello(node, takeover=welcome.payload["session"]))
        successor, _ = second.until(ServiceKind.WELCOME, ServiceKind.ERROR)
        problems = [] if successor is not None and successor.kind is ServiceKind.WELCOME else \
            [f"the HELLO with the takeover token was answered {successor}"]
        told, _ = first.until(ServiceKind.ERROR)
        if told is None or told.payload["code"] != ProviderClosed.code or told.request_id != 0:
            problems.append(f"the old session was told {told and (told.request_id, told.payload)}, not PROVIDER_CLOSED "
                            "with request id 0")
        elif first.read() is not None:
            problems.append("the old session's connection stayed open")
    return verdict("a takeover welcomes the successor, tells the old session PROVIDER_CLOSED (request id 0) and "
                   "closes it", problems)


def _frame_kinds(node: str, shard: str) -> list[tuple[str, bytes]]:
    """One frame of every kind a node may send after HELLO (each request, one refused by the cluster, one
    that breaks a batch rule) and of the kinds answered MALFORMED_MESSAGE on a session that goes on
    (HELLO twice, a reply kind): every one of them is a sign of life."""
    insert = [{"key": f"{node}:k", "value": b"", "expected": 0}]
    return [
        ("RENEW", wire.encode(ServiceKind.RENEW, 3)),
        ("JOIN_CLUSTER again", wire.encode(ServiceKind.JOIN_CLUSTER, 3, address="127.0.0.1:7001")),
        ("JOIN_SHARD into its own shard", wire.encode(ServiceKind.JOIN_SHARD, 3, shard_id=shard)),
        ("REMOVE_FROM_SHARD of itself", wire.encode(ServiceKind.REMOVE_FROM_SHARD, 3, node_id=node)),
        ("UPDATE_GOSSIP", wire.encode(ServiceKind.UPDATE_GOSSIP, 3, scope=Scope.SHARD.value, ops=insert)),
        ("UPDATE_SHARD_LOG", wire.encode(ServiceKind.UPDATE_SHARD_LOG, 3, ops=insert)),
        ("UPDATE_SHARD_LOG refused by CAS", wire.encode(ServiceKind.UPDATE_SHARD_LOG, 3,
                                                        ops=[{**insert[0], "expected": 7}])),
        ("UPDATE_GOSSIP refused as INVALID_BATCH", wire.encode(ServiceKind.UPDATE_GOSSIP, 3, scope=Scope.GLOBAL.value,
                                                               ops=[]),),
        ("REMOVE_FROM_CLUSTER of itself", wire.encode(ServiceKind.REMOVE_FROM_CLUSTER, 3, node_id=node)),
        ("HELLO twice", wire.encode(ServiceKind.HELLO, 3, node_id=node, secret="", takeover="", resume=False,
                                    resume_after=0)),
        ("a reply kind (OK)", wire.encode(ServiceKind.OK, 3)),
    ]


REPLIES = (ServiceKind.OK, ServiceKind.SHARD, ServiceKind.REVISION, ServiceKind.RENEWED, ServiceKind.ERROR,
           ServiceKind.CAS_ERROR)


def every_frame_moves_the_silence_deadline(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """On a stopped clock, nodes say HELLO and JOIN_CLUSTER at one instant; ``d`` ms later each sends one
    frame of another kind (every request, refused ones, HELLO twice, a reply kind), and one sends
    nothing. 1 ms past fail_bound after the first instant the silent one is closed and every other is
    open; 1 ms before fail_bound after its frame it is still open, 1 ms past it closed."""
    address = _address(target)
    problems: list[str] = []
    step = 100
    with session(target, ctx) as s, stopped_clock(target, s) as (_, advance):
        silent = RawConnection(address)
        kinds = _frame_kinds(s.id_of("frame-0"), "")
        sessions = [RawConnection(address) for _ in kinds]
        shards: list[str] = []
        try:
            bound = 0
            for i, raw in enumerate([silent, *sessions]):
                node = s.id_of(f"frame-{i}")
                raw.send(raw.hello(node))
                welcome, _ = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)
                if welcome is None or welcome.kind is not ServiceKind.WELCOME:
                    return verdict("", [f"a good HELLO was answered {welcome}"])
                bound = welcome.payload["fail_bound_ms"]
                raw.request(ServiceKind.JOIN_CLUSTER, 2, address="127.0.0.1:7000")
                joined, _ = raw.until(*REPLIES)
                if joined is None or joined.kind is not ServiceKind.SHARD:
                    return verdict("", [f"JOIN_CLUSTER was answered {joined}"])
                shards.append(joined.payload["shard_id"])
            advance(step)
            for i, raw in enumerate(sessions, start=1):
                label, frame = _frame_kinds(s.id_of(f"frame-{i}"), shards[i])[i - 1]
                raw.send(frame)
                reply, _ = raw.until(*REPLIES)
                if reply is None:
                    problems.append(f"{label} was answered by a close")
            advance(bound - step + 1)
            if not silent.closed_within(5.0):
                problems.append(f"a session silent for fail_bound + 1 ms ({bound + 1} ms) was not closed")
            problems += [f"a session whose last frame, {label}, was {bound - step + 1} ms old was closed"
                         for (label, _), raw in zip(kinds, sessions) if raw.closed_within(0.05)]
            advance(step - 2)
            problems += [f"a session was closed fail_bound - 1 ms after its last frame, {label}"
                         for (label, _), raw in zip(kinds, sessions) if raw.closed_within(0.05)]
            advance(2)
            problems += [f"a session silent for fail_bound + 1 ms after its last frame, {label}, was not closed"
                         for (label, _), raw in zip(kinds, sessions) if not raw.closed_within(2.0)]
        finally:
            for raw in [silent, *sessions]:
                raw.close()
    return verdict(f"every frame a node sends ({', '.join(label for label, _ in kinds)}) moves its session's "
                   "silence deadline to fail_bound after it (open 1 ms before, closed 1 ms past)", problems[:4])
