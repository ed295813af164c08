"""The inputs role of the cluster target harness (capability ``inputs``): the cluster's pure functions called
directly on one input each, answered in plain JSON. Through a service a case cannot reach them at their bounds (an
update event past MAX_FRAME_BYTES needs a 16 MiB catch-up, a frame reader's held partial frame is never shown, ids,
keys and values at their byte bounds are prefixed by the replay), so a harness offering this role runs its own
functions on the runner's input: no socket, no clock.

The control line ``INPUTS <json>`` (conformance/cluster/controls.py) carries one call: ``{"call": name, ...}``.
Bytes are hex, or ``{"repeat": hex, "times": n}``, or a list of those joined; text is a string or
``{"repeat": text, "times": n}`` (so a 16 MiB input is a short line; conformance/compact_bytes.py). The calls:

- ``encode`` ``{kind, id, payload}``: the frame of one message (payload fields as the wire names them).
- ``decode`` ``{body}``: one frame body parsed.
- ``updateFrames`` ``{kind, entries, limit?, fields?}``: the frames of one update event, split at ``limit``
  (MAX_FRAME_BYTES when absent).
- ``feed`` ``{bound, chunks}``: a frame reader of that bound fed the chunks in turn.
- ``updateSplit``: ``updateFrames``'s call, answered as each frame's size in bytes, kind, request id and its
  entries' ``key@revision`` in order.
- ``errorFrom`` ``{body}``: one ERROR or CAS_ERROR frame body decoded to the typed error a client raises: its class,
  condition, code and message (a CAS failure's key, expected revision and entry too).
- ``checkBatch`` ``{ops}``, ``checkId`` ``{kind, text}``, ``checkAddress`` ``{address}``.
- ``updateRequest`` ``{id, ops}``: the frame of a client's UPDATE_SHARD_LOG request of those ops (``expected`` null:
  an insert), as a client builds it from typed ops.
- ``checkMembership`` ``{shards: [[shard, [node...]]...]}``: a snapshot of those shards (each member OK) judged well
  formed: its member count.
- ``strangers`` ``{maxPending, bindTimeoutS, steps}`` and ``departures`` ``{maxBytes, lingerS, steps}``: the
  bounds the service's reactor holds connections to (spec/admission.py, spec/departure.py), each step
  ``[method, args...]`` answered in order as the shuffle corpus's connection-bound requests are
  (conformance/connection_policies.py); bounds the policy refuses are refused.
- ``configuredSecret`` ``{secret, setting}``: the secret a service given ``secret`` (null: none) as its ``setting``
  requires of every HELLO (``{"secret": ...}``), or why it refuses to start (``EMPTY_SECRET``: the error's JSON).
- ``policy`` ``{heartbeatS, failAfterS}``: a failure policy built (seconds, fractional and sub-ms too; ``"nan"``
  and ``"inf"`` as strings) and what it derives, with its timing as WELCOME carries it.
- ``detector`` ``{heartbeatS, failAfterS, renewals: {node: s}, ticks: [{now, members, unreadFor}]}``: a detector
  of that policy given the renewals, then each tick's verdicts.
- ``view`` ``{snapshot: {epoch, shards: {shard: [[node, address, state]]}} | null, changes: [{epoch, node, record:
  [shard, address, state] | null}], owed: [node, [changed...]]}``: a membership view started from a snapshot (or
  empty), the changes applied; its snapshot (``{epoch, shards: [[shard, [[node, address, state]...]]...]}``: shards
  and members in the snapshot's order, by id), and whether the changes are owed to that node.
- ``serviceSession`` ``{secret, maxSessions, failBoundS, steps}``: the service's end of one connection (secret
  null: none; ``failBoundS`` fractional and sub-ms too), each step one of ``{at, data, served}`` (bytes received at
  ``at`` s while the service serves ``served`` nodes: what they ask), ``{welcome: [token, heartbeatS, ttlS,
  failBoundS]}`` (the last HELLO welcomed with that timing) or ``{silent: s, heldSince?: s}`` (whether the node is
  silent when everything up to then was read, its reads held since ``heldSince``); each step's answer with the
  session's deadline after it.
- ``model`` ``{revision, members: {node: [address, shard, state, shardSince]}, gossip: [[key, hex, revision, scope,
  origin]], filler?: n, op: {kind, ...}, after}``: a
  model built with those members and their shards' logs empty (a backend reloading its journal holds such a
  model; ``filler`` more members ``f0``, ``f1``... each alone in a shard) and one operation applied (its fields as the model's operation names them, ops'
  values in hex); the revision, who is told what, every shard's members, the member count, and what the op's node
  needs to catch up after revision ``after``.

The answer: ``{"value": ...}``, or ``{"raised": class}`` (a ClusterError's class name), or ``{"refused": true}``
when the value is outside the function's domain (ValueError: an integer past its wire field, a policy's rule). Bytes in an answer are hex up to 64
bytes, else ``{"bytes": length, "sha256": first 16 hex digits}``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

import construct as c

from conformance.compact_bytes import expand_bytes, expand_text
from conformance.connection_policies import answer_policy

from spec.cluster import wire
from spec.cluster.errors import ClusterError, RevisionMismatch
from spec.cluster.detector import FailureDetector, FailurePolicy
from spec.cluster.interface import FailureTiming
from spec.cluster.session import Answer, Hello, Request, ServiceSession, error_from
from spec.cluster import model
from spec.cluster.model import (ClusterModel, GossipRecord, GossipUpdate, Member, MemberRecord, MembershipChange,
                                MembershipView)
from spec.cluster.types import (Entry, Membership, MetadataOp, NodeId, NodeInfo, NodeState, Revision, Scope,
                                ShardId, check_address, check_batch, check_id)
from spec.cluster.wire import ServiceKind
from spec.shared_secret import EmptySecret, configured_secret

Json = dict[str, Any]


def shown(value: Any) -> Any:
    """A value as plain JSON, bytes short (hex) or long (length and digest)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return data.hex() if len(data) <= 64 else {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()[:16]}
    if isinstance(value, str) and len(value) > 64:
        return {"chars": len(value), "sha256": hashlib.sha256(value.encode()).hexdigest()[:16]}
    if isinstance(value, dict):
        return {str(k): shown(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [shown(v) for v in value]
    if hasattr(value, "items"):  # a parsed construct container
        return shown(dict(value.items()))
    return value if isinstance(value, (int, bool)) or value is None else str(value)


def _record(item: Json) -> Json:
    out = dict(item)
    if "key" in out:
        out["key"] = expand_text(out["key"])
    if "value" in out:
        out["value"] = expand_bytes(out["value"])
    return out


def wire_fields(payload: Json) -> Json:
    """A payload's fields from their JSON form (text and bytes compact) as the wire's layouts take them."""
    out: Json = {k: (expand_text(v) if isinstance(v, (str, dict)) and k != "actual" else v) for k, v in payload.items()}
    for name in ("ops", "entries"):
        if name in out:
            out[name] = [_record(item) for item in out[name]]
    if out.get("actual"):
        out["actual"] = _record(out["actual"])
    return out


def _encode(call: Json) -> Any:
    return wire.encode(ServiceKind[call["kind"]], call["id"], **wire_fields(call.get("payload", {})))


def _decode(call: Json) -> Any:
    message = wire.decode(expand_bytes(call["body"]))
    return {"kind": message.kind.name, "id": message.request_id, "payload": message.payload}


def _update_frames(call: Json) -> Any:
    entries = [Entry(key=expand_text(e["key"]), value=expand_bytes(e["value"]), revision=Revision(e["revision"]))
               for e in call["entries"]]
    limit = call.get("limit", wire.MAX_FRAME_BYTES)
    return wire.update_frames(ServiceKind[call["kind"]], entries, limit, **wire_fields(call.get("fields", {})))


def _update_split(call: Json) -> Any:
    """The frames of one update event by size and entries, in order."""
    out = []
    kind = ServiceKind[call["kind"]]
    for frame in _update_frames(call):
        body = frame[wire.FRAME_HEADER.sizeof():]
        entries = wire.PAYLOADS[kind].parse(body[wire.Header.sizeof():]).entries
        out.append({"bytes": len(frame), "kind": body[0], "id": wire.Header.parse(body).request_id,
                    "entries": [f"{e.key}@{e.revision}" for e in entries]})
    return out


def _error_from(call: Json) -> Any:
    error = error_from(wire.decode(expand_bytes(call["body"])))
    fields = {"key": error.key, "expected": error.expected, "actual": None if error.actual is None else
              [error.actual.key, error.actual.value, error.actual.revision]} if isinstance(error, RevisionMismatch) else {}
    return {"class": type(error).__name__, "condition": error.condition, "code": error.code,
            "message": error.message} | fields


def _policy_steps(call: Json) -> Any:
    """A connection-bound policy's steps (``strangers`` or ``departures``); its bounds refused: ValueError."""
    answer = answer_policy({**call, "function": call["call"]})
    if "error" in answer:
        raise ValueError(f"{call['call']} refuses its bounds")
    return answer["value"]


def _configured_secret(call: Json) -> Any:
    try:
        return {"secret": configured_secret(call["secret"], call["setting"])}
    except EmptySecret as refused:
        return refused.to_json()


def _feed(call: Json) -> Any:
    reader = wire.FrameReader(call["bound"])
    out: list[Json] = []
    for chunk in call["chunks"]:
        try:
            bodies = list(reader.feed(expand_bytes(chunk)))
        except ClusterError as raised:
            out.append({"raised": type(raised).__name__})
            break
        out.append({"bodies": bodies, "held": reader.held_bytes, "wanted": reader.wanted})
    return out


def _ops(call: Json) -> list[MetadataOp]:
    return [MetadataOp(key=expand_text(o["key"]), value=expand_bytes(o["value"]), expected=o.get("expected"))
            for o in call["ops"]]


def _check_batch(call: Json) -> Any:
    return len(check_batch(_ops(call)))


def _update_request(call: Json) -> Any:
    """A client's UPDATE_SHARD_LOG request of typed ops, as its frame (``wire.ops_to_wire``: what only a client runs)."""
    return wire.encode(ServiceKind.UPDATE_SHARD_LOG, call["id"], ops=wire.ops_to_wire(_ops(call)))


def _check_membership(call: Json) -> Any:
    snapshot = Membership(epoch=1, shards={
        ShardId(expand_text(shard)): tuple(NodeInfo(node_id=NodeId(expand_text(n)), address="a", state=NodeState.OK)
                                           for n in nodes) for shard, nodes in call["shards"]})
    snapshot.check_well_formed()
    return len(snapshot.nodes())


def _policy_of(call: Json) -> FailurePolicy:
    return FailurePolicy(heartbeat_interval=float(call["heartbeatS"]), fail_after=float(call["failAfterS"]))


def _policy(call: Json) -> Any:
    policy = _policy_of(call)
    return {"pfailAfter": policy.pfail_after, "checkInterval": policy.check_interval, "failBound": policy.fail_bound,
            "welcome": wire.timing_to_wire(policy.timing())}


def _detector(call: Json) -> Any:
    detector = FailureDetector(_policy_of(call))
    for node, at in call["renewals"].items():
        detector.renew(NodeId(node), at)
    return [{n: s.value for n, s in sorted(detector.tick(t["now"], set(t["members"]), t.get("unreadFor", 0.0)).items())}
            for t in call["ticks"]]


def _view(call: Json) -> Any:
    snap = call["snapshot"]
    view = MembershipView(None if snap is None else Membership(epoch=snap["epoch"], shards={
        ShardId(shard): tuple(NodeInfo(node_id=NodeId(n), address=a, state=NodeState(st)) for n, a, st in nodes)
        for shard, nodes in snap["shards"].items()}))
    for change in call["changes"]:
        record = change["record"]
        view.apply(MembershipChange(epoch=change["epoch"], node_id=NodeId(change["node"]), record=None if record is None
                                    else MemberRecord(ShardId(record[0]), record[1], NodeState(record[2]))))
    out = view.snapshot()
    node, changed = call["owed"]
    return {"epoch": out.epoch, "shards": [[s, [[n.node_id, n.address, n.state.value] for n in nodes]]
                                           for s, nodes in out.shards.items()],  # a list: the order is a rule
            "owed": view.owed(NodeId(node), set(changed))}


def _operation(op: Json) -> Any:
    fields = {k: v for k, v in op.items() if k != "kind"}
    if "ops" in fields:
        fields["ops"] = tuple(MetadataOp(key=expand_text(o["key"]), value=expand_bytes(o["value"]), expected=o.get("expected"))
                              for o in fields["ops"])
    if "state" in fields:
        fields["state"] = NodeState(fields["state"])
    if "scope" in fields:
        fields["scope"] = Scope(fields["scope"])
    return getattr(model, op["kind"])(**fields)


def _model(call: Json) -> Any:
    members = {NodeId(n): Member(a, ShardId(s), NodeState(st), since) for n, (a, s, st, since) in call["members"].items()}
    members |= {NodeId(f"f{i}"): Member("a:1", ShardId(f"fs{i}")) for i in range(call.get("filler", 0))}
    gossip = {key: GossipRecord(Entry(key=key, value=expand_bytes(value), revision=Revision(rev)), Scope(scope), ShardId(origin))
              for key, value, rev, scope, origin in call.get("gossip", [])}
    cluster = ClusterModel(revision=call["revision"], members=members, gossip=gossip,
                           shard_logs={m.shard: {} for m in members.values()})  # each shard's log, empty
    revision, owed = cluster.apply(_operation(call["op"]))
    node = NodeId(call["op"]["node_id"])
    told = [f"{n}:{shown}" for n, note in cluster.told(owed) if (shown := _note(note, _owed_to(cluster, n)))]
    shards = ";".join(f"{s}={' '.join(cluster.shard_members(s))}" for s in sorted(cluster.shard_index))
    catch_up = (_note(note, _owed_to(cluster, node)) for note in cluster.catch_up(node, call.get("after", 0)))
    return {"revision": revision, "told": ",".join(told), "shards": shards, "members": len(cluster.members),
            "catchUp": [shown for shown in catch_up if shown]}


def _owed_to(cluster: ClusterModel, node: str) -> Callable[[Any], bool]:
    """Whether the RFC requires ``node`` to be told an entry: SHARD-scoped gossip is a minimum, which a provider may
    exceed by telling other shards too (flag WiderGossip), so gossip of another shard is left out of the answers."""
    member = cluster.members.get(NodeId(node))

    def owed(entry: Any) -> bool:
        record = cluster.gossip.get(entry.key)
        return member is None or record is None or record.scope is not Scope.SHARD or record.origin == member.shard
    return owed


def _note(note: Any, owed: Callable[[Any], bool]) -> str:
    """A notification, short: its type and, for an update, its owed entries' keys and revisions ('' if none is owed)."""
    entries = getattr(note, "entries", None)
    if entries is None:
        return type(note).__name__
    if isinstance(note, GossipUpdate):
        entries = [e for e in entries if owed(e)]
        if not entries:
            return ""
    return type(note).__name__ + "(" + " ".join(f"{e.key}@{e.revision}" for e in entries) + ")"


def _service_input(item: Any) -> Any:
    if isinstance(item, Hello):
        return {"hello": [item.request_id, item.node_id, item.takeover, item.resume_after]}
    if isinstance(item, Request):
        return {"request": item.message.kind.name, "id": item.message.request_id}
    assert isinstance(item, Answer)
    return {"answer": item.frame, "close": item.close}


def _service_step(session: ServiceSession, step: Json, hellos: list[Hello]) -> Json:
    out: Json = {}
    try:
        if "welcome" in step:
            token, heartbeat, ttl, bound = step["welcome"]
            out["sent"] = session.welcome(hellos[-1], token, FailureTiming(heartbeat_interval=heartbeat, ttl=ttl,
                                                                           fail_bound=bound))
        elif "silent" in step:
            out["silent"] = session.silent(step["silent"], step.get("heldSince"))
        else:
            inputs = []
            for item in session.receive(expand_bytes(step["data"]), step["at"], step["served"]):
                hellos += [item] if isinstance(item, Hello) else []
                inputs.append(_service_input(item))
            out["inputs"] = inputs
    except ClusterError as raised:
        out["raised"] = type(raised).__name__
    return out | {"deadline": session.deadline}


def _service_session(call: Json) -> Any:
    session = ServiceSession(secret=call["secret"], max_sessions=call["maxSessions"], fail_bound=call["failBoundS"])
    hellos: list[Hello] = []
    return [_service_step(session, step, hellos) for step in call["steps"]]


CALLS: dict[str, Callable[[Json], Any]] = {
    "serviceSession": _service_session,
    "model": _model,
    "policy": _policy,
    "detector": _detector,
    "view": _view,
    "encode": _encode,
    "decode": _decode,
    "updateFrames": _update_frames,
    "updateSplit": _update_split,
    "errorFrom": _error_from,
    "strangers": _policy_steps,
    "departures": _policy_steps,
    "configuredSecret": _configured_secret,
    "feed": _feed,
    "checkBatch": _check_batch,
    "updateRequest": _update_request,
    "checkId": lambda call: check_id(call["kind"], expand_text(call["text"])),
    "checkAddress": lambda call: check_address(expand_text(call["address"])),
    "checkMembership": _check_membership,
}


def run(call: Json) -> Json:
    """One call's answer."""
    try:
        return {"value": shown(CALLS[call["call"]](call))}
    except ClusterError as raised:
        return {"raised": type(raised).__name__}
    except (c.ConstructError, ValueError, OverflowError):  # a value past its field, which no frame can carry
        return {"refused": True}
