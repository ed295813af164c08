"""Conformance cases for cluster providers (Valkey Modular Clustering), judged through the
provider interface against the semantic model's rules (docs/cluster.md)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Final

from conformance.cluster import batch_rules, linearizability, message_rules, model_cases, settings_cases, timeout_edges, wire_cases
from conformance.cluster.harness import (
    CAS,
    CLIENT,
    CLOCK,
    CONFIGURE,
    DURABLE,
    HELD,
    INPUTS,
    PAUSE,
    RESTART,
    SERVICE,
    SESSIONS,
    TARGET_HELP,
    ClusterTarget,
    Node,
    Session,
    op,
    open_target,
    raises,
    session,
    stopped_clock,
    verdict,
)
from conformance.cluster.vector_suite import replay_trace
from conformance.cluster.walks import WALKS_FILE, replay_cas_walk, run_cas_walk, replay_policy_walk, replay_session_walk
from conformance.cluster import client_walks, input_edges, inputs, wire_walks
from conformance.framework import Case, CaseContext, CaseTimeout, Level, Suite, Verdict
from spec.cluster.cas import CAS_ATTEMPTS
from spec.cluster.errors import (
    ClusterError,
    InvalidAddress,
    InvalidBatch,
    NodeIdInUse,
    NotAMember,
    ProviderClosed,
    ProviderUnavailable,
    RevisionMismatch,
    UnknownNode,
    UnknownShard,
)
from spec.cluster.types import MAX_ADDRESS_BYTES, NodeId, NodeState, Scope, ShardId

ROLE = "provider"
Check = Callable[[ClusterTarget, CaseContext], Verdict]


def wait_value(s: Session, nodes: list[Node], table: str, key: str, revision: int) -> None:
    for node in nodes:
        core = node.core
        core.wait(s.ctx, f"{node.id} notified of {table} {key}@{revision}",
                  lambda: key in core.latest(table) and core.latest(table)[key].revision >= revision)


def wait_state(s: Session, observer: Node, node: Node, state: NodeState, limit: float | None = None) -> None:
    observer.core.wait(s.ctx, f"{observer.id} sees {node.id} {state.value}",
                       lambda: observer.core.state_of(node.id) is state, limit)


def per_key_revisions_increase(nodes: list[Node], table: str) -> list[str]:
    problems = []
    for node in nodes:
        batches = [e for _, e in node.core.shard_log] if table == "log" else list(node.core.gossip)
        last: dict[str, int] = {}
        for batch in batches:
            for entry in batch:
                if entry.revision < last.get(entry.key, 0):
                    problems.append(f"{node.id} notified {entry.key}@{entry.revision} after @{last[entry.key]}")
                last[entry.key] = max(last.get(entry.key, 0), entry.revision)
    return problems


# -- membership -----------------------------------------------------------------------------

def join_snapshot(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a")
        a.core.wait(ctx, "a snapshot", lambda: a.core.state_of(a.id) is not None)
        snap = a.core.last_snapshot()
        assert snap is not None
        ok = a.core.state_of(a.id) is NodeState.OK and snap.shard_of(a.id) == a.shard
        return verdict("the joiner is pushed a snapshot with itself OK in the shard JoinCluster returned",
                       [] if ok else [f"snapshot {snap} for shard {a.shard}"])


def well_formed_through_moves(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b, c = s.shard_of(3, "a", "b", "c")
        moved = b.provider.remove_from_shard(c.id)
        a.core.wait(ctx, "c in its new shard",
                    lambda: (snap := a.core.last_snapshot()) is not None and snap.shard_of(c.id) == moved)
        a.provider.remove_from_cluster(b.id)
        a.core.wait(ctx, "b gone", lambda: (snap := a.core.last_snapshot()) is not None and b.id not in snap.nodes())
        problems = []
        for node in (a, b, c):
            epochs = [snap.epoch for _, snap in node.core.snapshots]
            if epochs != sorted(epochs):
                problems.append(f"{node.id} saw epochs go back: {epochs}")
            for _, snap in node.core.snapshots:
                try:
                    snap.check_well_formed()
                except ClusterError as exc:
                    problems.append(f"{node.id}: {exc}")
        final = a.core.last_snapshot()
        assert final is not None
        mine = {n for n in final.nodes() if n.startswith(s.tag)}
        if mine != {a.id, c.id} or final.shard_of(a.id) == final.shard_of(c.id):
            problems.append(f"final topology wrong: {final}")
        return verdict("every snapshot well formed, epochs non-decreasing, moves and removal as asked", problems)


def graceful_leave(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b = s.shard_of(2, "a", "b")
        b.provider.remove_from_cluster(b.id)
        a.core.wait(ctx, "b gone", lambda: (snap := a.core.last_snapshot()) is not None and b.id not in snap.nodes())
        b.core.wait(ctx, "b told it is gone",
                    lambda: (snap := b.core.last_snapshot()) is not None and b.id not in snap.nodes(), 5.0)
        time.sleep(min(a.provider.timing.fail_bound, ctx.remaining() / 4))
        failed = [snap.epoch for _, snap in a.core.snapshots
                  if (i := snap.nodes().get(b.id)) is not None and i.state is NodeState.FAIL]
        return verdict("a node removing itself is told (its last snapshot lacks it) and leaves the others' "
                       "snapshots without ever being FAIL",
                       [f"{b.id} reported FAIL at epochs {failed}"] if failed else [])


def address_bound(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Every snapshot carries every member's address: one longer than the bound is refused at join."""
    with session(target, ctx) as s:
        a, b = s.node("a", join=False), s.node("b", join=False)
        longest = "h" * (MAX_ADDRESS_BYTES - 6) + ":65535"
        problems = [f"a {MAX_ADDRESS_BYTES + 1}-byte address: {p}"
                    for p in raises(InvalidAddress, lambda: b.provider.join_cluster(longest + "5"))]
        wide = "\u00e9" * (MAX_ADDRESS_BYTES // 2 - 2) + ":6553"  # one byte over, in fewer characters
        problems += [f"an address of {MAX_ADDRESS_BYTES + 1} bytes in {len(wide)} characters: {p}"
                     for p in raises(InvalidAddress, lambda: b.provider.join_cluster(wide))]
        a.shard = a.provider.join_cluster(longest)
        a.core.wait(ctx, "a snapshot with a", lambda: (snap := a.core.last_snapshot()) is not None
                    and a.id in snap.nodes())
        snap = a.core.last_snapshot()
        assert snap is not None
        if snap.nodes()[a.id].address != longest:
            problems.append(f"the {MAX_ADDRESS_BYTES}-byte address is reported as {snap.nodes()[a.id].address[:40]!r}...")
        if b.id in snap.nodes():
            problems.append("the node refused INVALID_ADDRESS is a member")
        return verdict(f"an address of {MAX_ADDRESS_BYTES} bytes joins and is reported whole; one byte more "
                       "raises INVALID_ADDRESS and the node is not a member", problems)


def join_unknown_shard(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a")
        return verdict("JoinShard into a shard that does not exist raises UNKNOWN_SHARD",
                       raises(UnknownShard, lambda: a.provider.join_shard(ShardId("no-such-shard"))))


def not_a_member(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a", join=False)
        problems = [f"UpdateShardLog: {p}" for p in raises(NotAMember, lambda: a.provider.update_shard_log(
            [op("k", b"v")]))]
        problems += [f"UpdateGossip: {p}" for p in raises(NotAMember, lambda: a.provider.update_gossip(
            [op(f"{a.id}:k", b"v")], Scope.GLOBAL))]
        return verdict("UpdateShardLog and UpdateGossip by a node that never joined raise NOT_A_MEMBER", problems)


@dataclass(frozen=True, slots=True)
class Cast:
    """Who a precondition is tried on: ``member`` and ``other`` are members of two shards, ``stranger``
    opened a session and never joined, ``removed`` was removed from the cluster (by ``member``)."""

    member: Node
    other: Node
    stranger: Node
    removed: Node


def _shard(node: Node) -> ShardId:
    assert node.shard is not None
    return node.shard


PRECONDITIONS: Final[tuple[tuple[str, type[ClusterError], Callable[[Cast], object]], ...]] = (
    ("JoinShard by a node that never joined", NotAMember, lambda c: c.stranger.provider.join_shard(_shard(c.member))),
    ("JoinShard by a removed node", NotAMember, lambda c: c.removed.provider.join_shard(_shard(c.member))),
    ("JoinShard into a prefix of a shard's id", UnknownShard,
     lambda c: c.member.provider.join_shard(ShardId(_shard(c.other)[:-1]))),
    ("JoinShard into a shard's id and one more character", UnknownShard,
     lambda c: c.member.provider.join_shard(ShardId(_shard(c.other) + "0"))),
    ("RemoveFromCluster by a node that never joined", NotAMember,
     lambda c: c.stranger.provider.remove_from_cluster(c.member.id)),
    ("RemoveFromCluster of a node that never joined", UnknownNode,
     lambda c: c.member.provider.remove_from_cluster(c.stranger.id)),
    ("RemoveFromCluster of a removed node", UnknownNode, lambda c: c.member.provider.remove_from_cluster(c.removed.id)),
    ("RemoveFromCluster of a prefix of a member's id", UnknownNode,
     lambda c: c.member.provider.remove_from_cluster(NodeId(c.other.id[:-1]))),
    ("RemoveFromShard by a node that never joined", NotAMember,
     lambda c: c.stranger.provider.remove_from_shard(c.member.id)),
    ("RemoveFromShard by a removed node", NotAMember, lambda c: c.removed.provider.remove_from_shard(c.member.id)),
    ("RemoveFromShard of a node that never joined", UnknownNode,
     lambda c: c.member.provider.remove_from_shard(c.stranger.id)),
    ("RemoveFromShard of a prefix of a member's id", UnknownNode,
     lambda c: c.member.provider.remove_from_shard(NodeId(c.other.id[:-1]))),
    ("UpdateShardLog by a removed node", NotAMember, lambda c: c.removed.provider.update_shard_log([op("k", b"v")])),
    ("UpdateGossip by a removed node", NotAMember,
     lambda c: c.removed.provider.update_gossip([op(f"{c.removed.id}:k", b"v")], Scope.GLOBAL)),
)
"""Each precondition of a membership or metadata operation (spec/cluster/model.py) at its smallest
violating input: who asks is not a member (never was, or was removed), whom it names is not (an id one
character short of a member's: ids match exactly, not by prefix), the shard does not exist (one
character short of one, or one more)."""


def every_precondition(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Each of :data:`PRECONDITIONS`: its error, and nothing committed (no member is notified a
    membership that repeats the one before it, and the refused ones moved nobody)."""
    with session(target, ctx) as s:
        member, other = s.node("member"), s.node("other")
        removed, stranger = s.node("removed"), s.node("stranger", join=False)
        member.provider.remove_from_cluster(removed.id)
        member.core.wait(ctx, "removed gone", lambda: (snap := member.core.last_snapshot()) is not None
                         and removed.id not in snap.nodes())
        since = len(member.core.snapshots)
        cast = Cast(member, other, stranger, removed)
        problems = [f"{what}: {p}" for what, error, action in PRECONDITIONS for p in raises(error, lambda: action(cast))]
        barrier(s, member)
        problems += repeated_snapshots(member, since)
        final = member.core.last_snapshot()
        assert final is not None
        mine = {n: final.shard_of(n) for n in final.nodes() if n.startswith(s.tag)}
        if mine != {member.id: member.shard, other.id: other.shard}:
            problems.append(f"after the refused operations the members are {mine}")
        return verdict(f"{len(PRECONDITIONS)} operations each breaking one precondition raise its error "
                       "(NOT_A_MEMBER, UNKNOWN_NODE, UNKNOWN_SHARD) and commit nothing", problems[:4])


def rejoin(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Churn with the same ids: a member that joins again, and a node removed from the cluster that joins
    again, each get a shard other than their old one and are OK members in it as the others see them; the
    removed one, a joiner again, is shown the GLOBAL gossip written before (a member joining again knows it
    already: the model shows it again, the etcd backend does not, and neither is wrong)."""
    with session(target, ctx) as s:
        watcher, again, removed = s.node("watcher"), s.node("again"), s.node("removed")
        key = f"{s.tag}:rejoin"
        revision = watcher.provider.update_gossip([op(key, b"g")], Scope.GLOBAL)
        wait_value(s, [again, removed], "gossip", key, revision)
        watcher.provider.remove_from_cluster(removed.id)
        removed.core.wait(ctx, "removed told", lambda: (snap := removed.core.last_snapshot()) is not None
                          and removed.id not in snap.nodes())
        problems = []
        for node in (again, removed):
            old, told = node.shard, len(node.core.gossip)
            node.shard = node.provider.join_cluster("127.0.0.1:7999")
            if node.shard == old:
                problems.append(f"{node.id} joined again into its old shard {old}")
            try:
                if node is removed:
                    node.core.wait(ctx, f"{node.id} shown the GLOBAL gossip again", lambda: any(
                        e.key == key for batch in node.core.gossip[told:] for e in batch), 5.0)
            except CaseTimeout:
                problems.append(f"{node.id}, removed, was not shown the GLOBAL gossip when it joined again")
            try:
                watcher.core.wait(ctx, f"{node.id} OK in its new shard", lambda: (snap := watcher.core.last_snapshot())
                                  is not None and snap.shard_of(node.id) == node.shard
                                  and snap.nodes()[node.id].state is NodeState.OK, 5.0)
            except CaseTimeout:
                problems.append(f"{watcher.id} does not see {node.id} OK in its new shard {node.shard}")
        return verdict("a member joining again and a removed node joining again each get a new shard and are OK in "
                       "it as the others see them; the removed one is shown the GLOBAL gossip again", problems)


def join_own_shard(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a")
        assert a.shard is not None
        r = a.provider.update_shard_log([op("k", b"1")])
        problems = []
        barrier(s, a)
        since = len(a.core.snapshots)
        try:
            a.provider.join_shard(a.shard)
            a.provider.update_shard_log([op("k", b"2", r)])
        except ClusterError as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
        barrier(s, a)
        problems += repeated_snapshots(a, since)
        return verdict("JoinShard into the shard a node is already in changes nothing: the shard and its log "
                       "stay (its only member's CAS at the key's revision succeeds) and no membership is "
                       "committed", problems)


def identity_claimed_once(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """A live node id cannot be opened again; its takeover token hands it on; a closed session
    frees it within the failure bound."""
    with session(target, ctx) as s:
        a = s.node("a")
        problems = [f"impostor: {p}" for p in raises(NodeIdInUse, lambda: s.node("a", join=False))]
        try:
            a.provider.update_shard_log([op("still-mine", b"1")])
        except ClusterError as exc:
            problems.append(f"the holder was disturbed by the refused impostor: {exc}")
        wrong = "0" * len(a.provider.takeover_token)
        problems += [f"a wrong takeover token: {p}" for p in raises(
            NodeIdInUse, lambda: s.node("a", join=False, takeover=wrong))]
        successor = s.node("a", join=False, takeover=a.provider.takeover_token)
        problems += [f"displaced holder: {p}" for p in eventually_raises(
            ProviderClosed, lambda: a.provider.update_shard_log([op("k", b"2")]), ctx)]
        problems += [f"an impostor while the successor lives: {p}" for p in raises(
            NodeIdInUse, lambda: s.node("a", join=False))]
        try:
            successor.provider.update_shard_log([op("by-successor", b"1")])
        except ClusterError as exc:
            problems.append(f"the successor cannot write as {a.id}: {exc}")
        successor.provider.close()
        bound = successor.provider.timing.fail_bound
        end = time.monotonic() + min(bound + allowance(bound), ctx.remaining())
        while True:
            try:
                s.node("a", join=False)
                break
            except NodeIdInUse:
                if time.monotonic() > end:
                    problems.append(f"the id is still held {bound + allowance(bound):.1f} s after its session ended")
                    break
                time.sleep(0.05)
        return verdict("opening a live node id raises NODE_ID_IN_USE and leaves the holder alone; the "
                       "holder's takeover token (no other) hands the id on (the holder then raises "
                       "PROVIDER_CLOSED, and its end does not free its successor's claim); a closed session "
                       "frees the id within the failure bound", problems)


def eventually_raises(error: type[ClusterError], action: Callable[[], object], ctx: CaseContext,
                      limit: float = 5.0) -> list[str]:
    """Like :func:`raises`, allowing PROVIDER_UNAVAILABLE meanwhile (a remote client learning of
    the change over its connection)."""
    end = time.monotonic() + min(limit, ctx.remaining())
    while True:
        try:
            result = action()
        except error:
            return []
        except ProviderUnavailable as exc:
            if time.monotonic() > end:
                return [f"still {exc} after {limit} s"]
            time.sleep(0.05)
            continue
        except ClusterError as exc:
            return [f"raised {type(exc).__name__}: {exc}"]
        return [f"returned {result!r}"]


# -- shard log ------------------------------------------------------------------------------

def insert_then_cas(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b = s.shard_of(2, "a", "b")
        r1 = a.provider.update_shard_log([op("k", b"1")])
        problems = []
        try:
            b.provider.update_shard_log([op("k", b"2")])
            problems.append("second insert of k succeeded")
        except RevisionMismatch as exc:
            if exc.actual is None or (exc.actual.value, exc.actual.revision) != (b"1", r1):
                problems.append(f"mismatch reported actual {exc.actual}, committed was 1@{r1}")
            if exc.expected is not None:
                problems.append(f"a failed insert reported it expected revision {exc.expected}, not none")
        r2 = b.provider.update_shard_log([op("k", b"2", r1)])
        if not r2 > r1:
            problems.append(f"CAS at {r1} returned revision {r2}, not greater")
        try:
            a.provider.update_shard_log([op("k", b"3", r1)])
            problems.append(f"a CAS at the stale revision {r1} succeeded")
        except RevisionMismatch as exc:
            if exc.expected != r1:
                problems.append(f"a failed CAS at {r1} reported it expected {exc.expected}")
        problems += raises(RevisionMismatch, lambda: a.provider.update_shard_log([op("k", b"3", r2 + 1)]))
        wait_value(s, [a, b], "log", "k", r2)
        for node in (a, b):
            if node.core.latest("log")["k"].value != b"2":
                problems.append(f"{node.id} ends with {node.core.latest('log')['k']}")
        return verdict("insert needs an absent key, CAS the current revision; a stale or future revision "
                       "fails and reports the current entry; revisions grow", problems)


def linearizable_cas_chains(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Several threads on two nodes race CAS chains on two keys; each key's history must linearize."""
    with session(target, ctx) as s:
        nodes = s.shard_of(2, "a", "b")
        keys = ("x", "y")
        histories: dict[str, list[linearizability.CasOp]] = {k: [] for k in keys}
        lock = threading.Lock()
        errors: list[str] = []

        def worker(index: int) -> None:
            node, key = nodes[index % 2], keys[index // 2 % 2]
            known: int | None = None
            for step in range(6):
                value = f"t{index}-{step}".encode()
                invoked = time.monotonic()
                try:
                    revision = node.provider.update_shard_log([op(key, value, known)])
                    record = linearizability.CasOp(invoked, time.monotonic(), known, value, True, revision)
                    known = revision
                except RevisionMismatch as exc:
                    actual = None if exc.actual is None else (exc.actual.value, exc.actual.revision)
                    record = linearizability.CasOp(invoked, time.monotonic(), known, value, False, actual=actual)
                    known = None if exc.actual is None else exc.actual.revision
                except ClusterError as exc:
                    errors.append(f"thread {index}: {exc}")
                    return
                with lock:
                    histories[key].append(record)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(ctx.remaining())
        problems = list(errors)
        for key, history in histories.items():
            wins = sum(o.succeeded for o in history)
            if not linearizability.check(history):
                problems.append(f"history of {key} ({len(history)} ops, {wins} successful) is not linearizable")
            elif wins == 0:
                problems.append(f"no CAS on {key} succeeded")
        return verdict("per key, concurrent CAS results form one linearizable chain", problems)


def batch_atomic(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b = s.shard_of(2, "a", "b")
        r0 = a.provider.update_shard_log([op("taken", b"0")])
        problems = raises(RevisionMismatch, lambda: a.provider.update_shard_log(
            [op("p", b"1"), op("q", b"1"), op("taken", b"1")]))
        r1 = b.provider.update_shard_log([op("p", b"2"), op("q", b"2"), op("taken", b"2", r0)])
        wait_value(s, [a, b], "log", "taken", r1)
        for node in (a, b):
            seen = [(k.key, k.value) for _, batch in node.core.shard_log for k in batch if k.value == b"1"]
            if seen:
                problems.append(f"{node.id} was notified of writes of the failed batch: {seen}")
        return verdict("a batch with one stale op applies nothing (its other keys stay absent)", problems)


def one_batch_one_notification(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        nodes = s.shard_of(2, "a", "b")
        revision = nodes[0].provider.update_shard_log([op(k, b"v") for k in ("k1", "k2", "k3")])
        wait_value(s, nodes, "log", "k3", revision)
        problems = []
        for node in nodes:
            calls = [batch for _, batch in node.core.shard_log if any(e.revision == revision for e in batch)]
            shapes = [sorted((e.key, e.revision) for e in batch) for batch in calls]
            if shapes[:1] != [[("k1", revision), ("k2", revision), ("k3", revision)]]:
                problems.append(f"{node.id} got the batch as {shapes}")
        return verdict("one committed batch reaches each member as one notification, all at its revision",
                       problems)


def notifications_monotone(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        nodes = s.shard_of(3, "a", "b", "c")
        last: list[int] = []

        def chain(node: Node, key: str) -> None:
            known: int | None = None
            for i in range(10):
                try:
                    known = node.provider.update_shard_log([op(key, str(i).encode(), known)])
                except RevisionMismatch as exc:
                    known = None if exc.actual is None else exc.actual.revision
            last.append(known or 0)

        threads = [threading.Thread(target=chain, args=(n, "shared")) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(ctx.remaining())
        final = max(last)
        wait_value(s, nodes, "log", "shared", final)
        problems = per_key_revisions_increase(nodes, "log")
        return verdict("no member is ever notified of a key at a lower revision than before", problems)


def all_members_converge(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        nodes = s.shard_of(3, "a", "b", "c")
        revisions = {n.id: n.provider.update_shard_log([op(f"from-{n.id}", b"v")]) for n in nodes}
        for n in nodes:
            wait_value(s, nodes, "log", f"from-{n.id}", revisions[n.id])
        views = {n.id: {k: (e.value, e.revision) for k, e in n.core.latest("log").items()} for n in nodes}
        distinct = {tuple(sorted(v.items())) for v in views.values()}
        return verdict("every member is notified of every committed shard-log write",
                       [] if len(distinct) == 1 else [f"views differ: {views}"])


def shard_isolation(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a1, a2 = s.shard_of(2, "a1", "a2")
        b1 = s.node("b1")
        ra = a1.provider.update_shard_log([op("same", b"A")])
        rb = b1.provider.update_shard_log([op("same", b"B")])  # an insert: the key is absent in b's shard
        wait_value(s, [a1, a2], "log", "same", ra)
        wait_value(s, [b1], "log", "same", rb)
        problems = []
        for node, own, value in ((a1, a1.shard, b"A"), (a2, a1.shard, b"A"), (b1, b1.shard, b"B")):
            foreign = {sh for sh, _ in node.core.shard_log if sh != own}
            if foreign or node.core.latest("log")["same"].value != value:
                problems.append(f"{node.id} saw shards {foreign} / value {node.core.latest('log')['same']}")
        return verdict("shards have separate logs: same key inserted in both, nobody sees the other's", problems)


def catch_up_on_join(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a")
        r = a.provider.update_shard_log([op("k1", b"1"), op("k2", b"2")])
        assert a.shard is not None
        scoped = f"{a.shard}:g"
        rg = a.provider.update_gossip([op(scoped, b"g")], Scope.SHARD)
        b = s.node("b")
        b.provider.join_shard(a.shard)
        wait_value(s, [b], "log", "k2", r)
        got = {k: e.value for k, e in b.core.latest("log").items()}
        problems = [] if got == {"k1": b"1", "k2": b"2"} else [f"b learned {got}"]
        try:
            wait_value(s, [b], "gossip", scoped, rg)
        except CaseTimeout:
            problems.append(f"b was not told the shard's SHARD gossip {scoped}")
        return verdict("a node joining a shard is notified of its whole log and of the shard's SHARD gossip", problems)


def destroyed_with_last_member(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b = s.node("a"), s.node("b")
        old = a.shard
        assert old is not None and b.shard is not None
        a.provider.update_shard_log([op("k", b"v")])
        a.provider.join_shard(b.shard)
        problems = raises(UnknownShard, lambda: b.provider.join_shard(old))
        return verdict("JoinShard by a shard's last member destroys that shard and its log", problems)


MOVES: Final = ("JoinCluster again", "JoinShard into another shard", "RemoveFromShard by another member")
"""Every way a member leaves its shard (docs/spec/cluster.md#operations)."""


def _move(s: Session, node: Node, other: Node, how: str) -> None:
    """``node`` leaves its shard by ``how``; ``other`` is a member of another shard (JoinShard's destination)."""
    if how == MOVES[0]:
        node.shard = node.provider.join_cluster(f"127.0.0.1:{7100 + len(node.core.snapshots) % 100}")
    elif how == MOVES[1]:
        assert other.shard is not None
        node.provider.join_shard(other.shard)
        node.shard = other.shard
    else:
        node.shard = other.provider.remove_from_shard(node.id)


def every_move_leaves_the_old_shard(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """For each of :data:`MOVES`: a node that left a shard with a member left in it is not told that
    shard's later log writes (every commit before a write of its own reached it first); a node that left
    a shard as its last member destroyed it (JoinShard into it raises UNKNOWN_SHARD)."""
    problems: list[str] = []
    with session(target, ctx) as s:
        other = s.node("other")
        for i, how in enumerate(MOVES):
            a, b = s.shard_of(2, f"a{i}", f"b{i}")
            old = a.shard
            assert old is not None
            _move(s, a, other, how)
            b.provider.update_shard_log([op(f"after-{i}", b"v")])
            barrier(s, a)
            told = [e.key for sh, entries in a.core.shard_log if sh == old for e in entries if e.key == f"after-{i}"]
            if told:
                problems.append(f"after {how}, {a.id} was told its old shard's write {told}")
            alone = s.node(f"alone{i}")
            left = alone.shard
            assert left is not None
            alone.provider.update_shard_log([op("k", b"v")])
            _move(s, alone, other, how)
            problems += [f"{how} by a shard's last member: {p}"
                         for p in raises(UnknownShard, lambda: other.provider.join_shard(left))]
        return verdict(f"each of {len(MOVES)} moves: the node is not told its old shard's later writes; by the "
                       "last member, the old shard is destroyed", problems[:4])


def durable_across_restart(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    assert target.restart is not None
    with session(target, ctx) as s:
        a = s.node("a")
        r = a.provider.update_shard_log([op("durable", b"before")])
        target.restart(s.cluster)
        problems: list[str] = []
        end = time.monotonic() + min(10.0, ctx.remaining())
        while True:  # the backend may take a moment to serve again
            try:
                r2 = a.provider.update_shard_log([op("durable", b"after", r)])
                break
            except RevisionMismatch as exc:
                return verdict("", [f"after restart the acknowledged write is gone: {exc}"])
            except ClusterError as exc:
                if time.monotonic() > end:
                    return verdict("", [f"backend not serving after restart: {exc}"])
                time.sleep(0.1)
        target.restart(s.cluster)  # again: what was written after the first restart is durable too
        b = s.node("b")
        assert a.shard is not None
        b.provider.join_shard(a.shard)
        wait_value(s, [b], "log", "durable", r2)
        if b.core.latest("log")["durable"].value != b"after":
            problems.append(f"joiner learned {b.core.latest('log')['durable']}")
        return verdict("acknowledged shard-log writes and their revisions survive backend restarts", problems)


# -- namespaces and gossip ------------------------------------------------------------------

def namespaces_separate(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a")
        rl = a.provider.update_shard_log([op("both", b"log")])
        rg = a.provider.update_gossip([op("both", b"gossip")], Scope.GLOBAL)  # insert: absent in gossip
        wait_value(s, [a], "gossip", "both", rg)
        problems = []
        if a.core.latest("log")["both"].value != b"log" or a.core.latest("gossip")["both"].value != b"gossip":
            problems.append(f"log {a.core.latest('log')} gossip {a.core.latest('gossip')} (rev {rl}, {rg})")
        return verdict("gossip and shard log are separate namespaces", problems)


def gossip_cas(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b = s.node("a"), s.node("b")
        r = a.provider.update_gossip([op("g", b"1")], Scope.GLOBAL)
        problems = raises(RevisionMismatch, lambda: b.provider.update_gossip([op("g", b"2")], Scope.GLOBAL))
        b.provider.update_gossip([op("g", b"2", r)], Scope.GLOBAL)
        return verdict("gossip ops are compare-and-swap too", problems)


def gossip_convergence(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Members in different shards overwrite one key concurrently; all end on the same winner."""
    with session(target, ctx) as s:
        nodes = [s.node(n) for n in ("a", "b", "c")]
        wins: list[int] = []

        def writer(node: Node) -> None:
            known: int | None = None
            for i in range(8):
                try:
                    known = node.provider.update_gossip([op("g", f"{node.id}-{i}".encode(), known)], Scope.GLOBAL)
                    wins.append(known)
                except RevisionMismatch as exc:
                    known = None if exc.actual is None else exc.actual.revision

        threads = [threading.Thread(target=writer, args=(n,)) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(ctx.remaining())
        top = max(wins)
        wait_value(s, nodes, "gossip", "g", top)
        finals = {n.id: n.core.latest("gossip")["g"] for n in nodes}
        problems = [] if len(set(finals.values())) == 1 else [f"members disagree: {finals}"]
        problems += per_key_revisions_increase(nodes, "gossip")
        return verdict("after quiescence every member holds the same winning gossip value, notified in "
                       "increasing revision order", problems)


def gossip_no_silent_update(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b = s.node("a"), s.node("b")
        revisions = []
        known: int | None = None
        for i in range(5):
            known = (a if i % 2 else b).provider.update_gossip([op("ns", str(i).encode(), known)], Scope.GLOBAL)
            revisions.append(known)
        wait_value(s, [a, b], "gossip", "ns", revisions[-1])
        problems = []
        for node in (a, b):
            seen = {e.revision for batch in node.core.gossip for e in batch if e.key == "ns"}
            if revisions[-1] not in seen:
                problems.append(f"{node.id} never notified of the winner @{revisions[-1]}")
        return verdict("the winning value of a gossip key is notified to every member (no silent change)",
                       problems)


def gossip_shard_scope(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b = s.shard_of(2, "a", "b")
        r = a.provider.update_gossip([op(f"{a.shard}:role", b"x")], Scope.SHARD)
        wait_value(s, [a, b], "gossip", f"{a.shard}:role", r)
        return verdict("SHARD-scoped gossip reaches every member of the writer's shard", [])


def gossip_shard_scope_reach(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Recorded, not judged: the RFC makes scope a minimum guarantee, so SHARD gossip may reach other
    shards (the etcd backend delivers it everywhere, the in-process cluster only to the shard)."""
    with session(target, ctx) as s:
        a, b = s.node("a"), s.node("b")
        scoped = f"{a.shard}:scoped"
        a.provider.update_gossip([op(scoped, b"x")], Scope.SHARD)
        r = a.provider.update_gossip([op(f"{a.id}:after", b"x")], Scope.GLOBAL)
        wait_value(s, [b], "gossip", f"{a.id}:after", r)  # gossip reaches a node in revision order
        reached = scoped in b.core.latest("gossip")
        return Verdict(True, "SHARD gossip reaches at least the writer's shard (the RFC allows further)",
                       f"a member of another shard {'was' if reached else 'was not'} notified of a SHARD-scoped key")


def gossip_late_joiner(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a")
        r = a.provider.update_gossip([op("config", b"on")], Scope.GLOBAL)
        b = s.node("b")
        wait_value(s, [b], "gossip", "config", r)
        return verdict("a node joining later is notified of the GLOBAL gossip already there", [])


def invalid_batches(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a")
        problems = raises(InvalidBatch, lambda: a.provider.update_shard_log([]))
        problems += raises(InvalidBatch, lambda: a.provider.update_shard_log([op("d", b"1"), op("d", b"2")]))
        problems += raises(InvalidBatch, lambda: a.provider.update_gossip([op("", b"1")], Scope.GLOBAL))
        return verdict("empty batches, duplicate keys and empty keys raise INVALID_BATCH", problems)


# -- failure detection ----------------------------------------------------------------------

def allowance(bound: float) -> float:
    """Scheduling slack granted on top of a declared bound (loaded CI machines)."""
    return 0.5 + bound / 4


def heartbeats(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a = s.node("a")
        timing = a.provider.timing
        a.core.wait(ctx, "5 heartbeats", lambda: len(a.core.heartbeats) >= 5)
        times = [t for t, _ in a.core.heartbeats]
        gaps = [b - x for x, b in zip(times, times[1:])]
        problems = []
        if any(ttl <= 0 or ttl > timing.ttl for _, ttl in a.core.heartbeats):
            problems.append(f"TTLs {[ttl for _, ttl in a.core.heartbeats]} outside (0, {timing.ttl}]")
        if max(gaps) > timing.ttl:
            problems.append(f"a gap of {max(gaps):.3f} s between heartbeats exceeds the TTL {timing.ttl}")
        return verdict("ClusterHeartbeat arrives before the previous TTL runs out", problems)


def detect_within_bound(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    with session(target, ctx) as s:
        a, b, c = s.shard_of(3, "a", "b", "c")
        bound = c.provider.timing.fail_bound
        stopped = time.monotonic()
        c.provider.close()
        problems = []
        for observer in (a, b):
            wait_state(s, observer, c, NodeState.FAIL)
            seen = next(t for t, snap in observer.core.snapshots
                        if (i := snap.nodes().get(c.id)) is not None and i.state is NodeState.FAIL)
            if seen - stopped > bound + allowance(bound):
                problems.append(f"{observer.id} saw FAIL after {seen - stopped:.2f} s (bound {bound} s)")
        return verdict("a stopped node is FAIL at every member within the declared bound", problems)


def renewal_lapsed(node: Node, before: float) -> bool:
    """Whether ``node``'s renewals stopped long enough before ``before`` for a FAIL to be due: a gap
    between its heartbeat callbacks (or since the last one) of at least ``ttl - heartbeat_interval``.
    A renewal counts from when it was sent and is called back later, so a lease that expired leaves
    at least that gap; a node renewing on time leaves gaps of about one interval."""
    timing = node.provider.timing
    times = [t for t, _ in node.core.heartbeats if t < before] + [before]
    return any(b - a >= timing.ttl - timing.heartbeat_interval for a, b in zip(times, times[1:]))


def no_false_fail(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Three live members, watched for twice the failure bound: none is reported FAIL while it renews
    on time. A FAIL that follows a lapse in the node's own renewals (the machine stalled it, or the
    store) is due, not false; the verdict names how many there were."""
    with session(target, ctx) as s:
        nodes = s.shard_of(3, "a", "b", "c")
        by_id = {n.id: n for n in nodes}
        time.sleep(min(2 * nodes[0].provider.timing.fail_bound, ctx.remaining() / 2))
        fails = [(n, i.node_id, at, snap.epoch) for n in nodes for at, snap in n.core.snapshots
                 for i in snap.nodes().values() if i.state is NodeState.FAIL and i.node_id in by_id]
        problems = [f"{n.id} saw {failed} FAIL at epoch {epoch} while it renewed on time"
                    for n, failed, at, epoch in fails if not renewal_lapsed(by_id[failed], at)]
        due = len(fails) - len(problems)
        expected = "no FAIL of a member renewing on time" + (f" ({due} FAIL after a lapse in renewals)" if due else "")
        return verdict(expected, problems[:3])


def states_seen(observer: Node, node: Node) -> list[NodeState]:
    return [i.state for _, snap in observer.core.snapshots if (i := snap.nodes().get(node.id)) is not None]


def barrier(s: Session, node: Node) -> None:
    """Return once ``node`` was notified of a write made now: every change committed before reached
    it first (notifications reach a node in commit order)."""
    key = f"barrier-{len(node.core.shard_log)}-{time.monotonic_ns()}"
    wait_value(s, [node], "log", key, node.provider.update_shard_log([op(key, b"")]))


def seen_within(s: Session, observer: Node, node: Node, state: NodeState, limit: float = 5.0) -> list[str]:
    try:
        wait_state(s, observer, node, state, limit)
    except CaseTimeout:
        return [f"{observer.id} still sees {node.id} {observer.core.state_of(node.id)} (not {state.value}) "
                f"{limit} s after the tick that should have made it so"]
    return []


def verdicts_at_their_instants(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """With the detector's clock stopped, a node stops renewing; the clock is moved to exactly
    pfail_after and fail_after after its last renewal (no change yet) and 1 ms past each (the change)."""
    with session(target, ctx) as s:
        with stopped_clock(target, s) as (limits, advance):
            a, b = s.shard_of(2, "a", "b")
            a.provider.close()
            problems: list[str] = []
            at = 0
            for threshold, state in ((limits.pfail_after_ms, NodeState.PFAIL), (limits.fail_after_ms, NodeState.FAIL)):
                if not threshold:
                    continue  # never reports PFAIL
                advance(threshold - at)
                barrier(s, b)
                if state in states_seen(b, a):
                    problems.append(f"{a.id} was {state.value} exactly {threshold} ms after its last renewal")
                advance(1)
                at = threshold + 1
                problems += seen_within(s, b, a, state)
            if not limits.pfail_after_ms and NodeState.PFAIL in states_seen(b, a):
                problems.append(f"{a.id} was PFAIL, though the target declares it never reports PFAIL")
        return verdict("a silent node is OK at exactly pfail_after, PFAIL 1 ms later, PFAIL at exactly fail_after "
                       "and FAIL 1 ms later (thresholds as the target declares them; a target declaring no "
                       "pfail_after never reports PFAIL)", problems)


def declared_timing(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """What the detector's controls declare agrees with what a node is told (WELCOME's timing) and with
    the spec's failure policy (spec/cluster/detector.py FailurePolicy): fail_after is the TTL, PFAIL
    comes at half of it (or never), fail_after covers two heartbeats, and fail_bound is fail_after and
    one heartbeat (the decision, one more tick of half a heartbeat to commit it)."""
    with session(target, ctx) as s:
        with stopped_clock(target, s) as (limits, _):
            timing = s.node("a").provider.timing
    ttl_ms, heartbeat_ms, bound_ms = (round(x * 1000) for x in (timing.ttl, timing.heartbeat_interval, timing.fail_bound))
    problems = []
    if limits.fail_after_ms != ttl_ms:
        problems.append(f"the detector declares fail_after {limits.fail_after_ms} ms, nodes are told a TTL of {ttl_ms} ms")
    if limits.pfail_after_ms not in (0, limits.fail_after_ms / 2):
        problems.append(f"pfail_after {limits.pfail_after_ms} ms is not half of fail_after {limits.fail_after_ms} ms")
    if not 1 <= heartbeat_ms <= ttl_ms / 2:
        problems.append(f"a heartbeat of {heartbeat_ms} ms with fail_after {ttl_ms} ms (at least 1 ms, two per fail_after)")
    if bound_ms != ttl_ms + heartbeat_ms:
        problems.append(f"fail_bound {bound_ms} ms is not fail_after + one heartbeat ({ttl_ms} + {heartbeat_ms} ms)")
    return verdict("the declared thresholds and timing follow the failure policy: fail_after = TTL, pfail_after = "
                   "fail_after / 2 (or no PFAIL), 1 ms <= heartbeat <= fail_after / 2, fail_bound = fail_after + "
                   "heartbeat", problems)


def renewal_clears(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Both nodes are let go stale on a stopped clock; the next renewals must make them OK again."""
    with session(target, ctx) as s:
        with stopped_clock(target, s) as (limits, advance):
            a, b = s.shard_of(2, "a", "b")
            stale = NodeState.PFAIL if limits.pfail_after_ms else NodeState.FAIL
            advance((limits.pfail_after_ms or limits.fail_after_ms) + 1)
            problems = seen_within(s, b, a, stale)
            limit = max(5.0, 10 * a.provider.timing.heartbeat_interval)
            end = time.monotonic() + min(limit, ctx.remaining())
            while not problems and b.core.state_of(a.id) is not NodeState.OK:
                if time.monotonic() > end:
                    problems.append(f"{a.id} still {b.core.state_of(a.id)} {limit:.1f} s after it went {stale.value}, "
                                    f"while it renews (the detector ticking every 0.1 s)")
                    break
                time.sleep(0.1)
                advance(0)
        return verdict("a node that renews again after going stale is OK again at the next tick", problems)


def repeated_snapshots(observer: Node, since: int) -> list[str]:
    """The membership notifications from ``since`` on that repeat the one before them (a commit that
    changed nothing)."""
    seen = [snap for _, snap in observer.core.snapshots[max(0, since - 1):]]
    return [f"{observer.id} was notified of epoch {after.epoch}, the same membership as epoch {before.epoch}"
            for before, after in zip(seen, seen[1:]) if after.shards == before.shards]


def idle_commits_nothing(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """On a stopped clock, ticks that change no member's state (the clock not moved, then moved to
    exactly pfail_after after a silent node's last renewal) commit nothing; 1 ms later its change is
    one notification. Judged as: no membership notification repeats the one before it (other nodes of
    the target may change state meanwhile, and are notified, each change once)."""
    with session(target, ctx) as s:
        with stopped_clock(target, s) as (limits, advance):
            a, b = s.shard_of(2, "a", "b")
            a.provider.close()
            barrier(s, b)
            since = len(b.core.snapshots)
            threshold = limits.pfail_after_ms or limits.fail_after_ms
            for ms in (0, 0, threshold):
                advance(ms)
            barrier(s, b)
            problems = repeated_snapshots(b, since)
            changed = NodeState.PFAIL if limits.pfail_after_ms else NodeState.FAIL
            if changed in states_seen(b, a):
                problems.append(f"{a.id} was {changed.value} exactly {threshold} ms after its last renewal")
            advance(1)
            problems += seen_within(s, b, a, changed)
            advance(0)
            barrier(s, b)
            problems += repeated_snapshots(b, since)
        return verdict("a tick that changes no member's state commits nothing (no membership notification "
                       "repeats the one before it); the change 1 ms past the threshold is notified",
                       sorted(set(problems))[:3])


def no_op_writes_nothing(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """On a stopped clock, what commits nothing (ticks that change no member's state, the clock not
    moved and then moved to exactly pfail_after after a silent node's last renewal; JoinShard into the
    node's own shard) must make nothing durable; the change 1 ms later is one durable write. Judged
    between two barrier writes: the target's durable count moves exactly as the revision does."""
    durable = target.durable
    assert durable is not None
    with session(target, ctx) as s:
        with stopped_clock(target, s) as (limits, advance):
            a, b = s.shard_of(2, "a", "b")
            a.provider.close()
            shard = b.shard
            assert shard is not None

            def mark() -> tuple[int, int]:
                key = f"mark-{time.monotonic_ns()}"
                revision = b.provider.update_shard_log([op(key, b"")])
                return revision, durable(s.cluster)

            problems: list[str] = []
            threshold = limits.pfail_after_ms or limits.fail_after_ms
            steps: list[tuple[str, Callable[[], object]]] = [
                ("two ticks with the clock not moved", lambda: (advance(0), advance(0))),
                (f"a tick at exactly {threshold} ms after the silent node's last renewal", lambda: advance(threshold)),
                ("JoinShard into the own shard", lambda: b.provider.join_shard(shard)),
                ("the tick 1 ms later that changes the silent node's state", lambda: advance(1)),
            ]
            for what, step in steps:
                revision, writes = mark()
                step()
                after_revision, after_writes = mark()
                if after_writes - writes != after_revision - revision:
                    problems.append(f"{what}: {after_writes - writes} durable writes for "
                                    f"{after_revision - revision} revisions (the second mark's write included)")
        return verdict("a change that commits nothing makes nothing durable: the durable count moves exactly as "
                       "the revision does (idle ticks, a tick at a threshold's instant, JoinShard into the own "
                       "shard)", problems)


def forgets_departed(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """On a stopped clock, one node leaves and another is removed: before the next tick the target
    may still hold their liveness state (not more than before), once it has run it holds nothing for
    them (two fewer nodes judged) and no more nodes than members (a service that remembered every node
    that ever joined would grow with churn, unbounded)."""
    held = target.held
    assert held is not None
    with session(target, ctx) as s:
        with stopped_clock(target, s) as (_limits, advance):
            a, b, c = s.shard_of(3, "a", "b", "c")
            advance(0)
            before = held(s.cluster)
            b.provider.remove_from_cluster(b.id)
            a.provider.remove_from_cluster(c.id)
            barrier(s, a)
            problems: list[str] = []
            if (pending := held(s.cluster)) > before:
                problems.append(f"holds liveness state for {pending} nodes after two left, {before} before")
            advance(0)
            after = held(s.cluster)
            snapshot = a.core.last_snapshot()
            assert snapshot is not None
            if after != before - 2:
                problems.append(f"after the tick holds liveness state for {after} nodes, {before} before "
                                f"{b.id} left and {c.id} was removed (expected {before - 2})")
            if after > len(snapshot.nodes()):
                problems.append(f"after the tick holds liveness state for {after} nodes, more than the "
                                f"{len(snapshot.nodes())} members")
        return verdict("once a tick has run after a node left or was removed, the target holds no liveness "
                       "state for it (only for members)", problems)


def fail_survives_restart(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    assert target.restart is not None
    with session(target, ctx) as s:
        with stopped_clock(target, s) as (limits, advance):
            a, b = s.shard_of(2, "a", "b")
            a.provider.close()
            advance(limits.fail_after_ms + 1)
            problems = seen_within(s, b, a, NodeState.FAIL)
            if problems:
                return verdict("", problems)
            failed = len(b.core.snapshots)
            target.restart(s.cluster)
            advance(0)
            barrier(s, b)
            after = [i.state.value for _, snap in b.core.snapshots[failed:]
                     if (i := snap.nodes().get(a.id)) is not None and i.state is not NodeState.FAIL]
            problems = [f"after the restart {b.id} saw {a.id} {after}"] if after else []
            b.provider.remove_from_cluster(a.id)
            try:
                b.core.wait(ctx, f"{a.id} removed", lambda: (snap := b.core.last_snapshot()) is not None
                            and a.id not in snap.nodes(), 5.0)
            except CaseTimeout:
                problems.append(f"{b.id} was not told of a removal after the restart")
        return verdict("a FAIL node that never renewed stays FAIL across a backend restart; a member is told the "
                       "next membership change", problems)


def failover_race(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Replicas of a FAIL primary CAS primaryship at the same revision: one wins, all learn it."""
    with session(target, ctx) as s:
        primary, r1, r2 = s.shard_of(3, "p", "r1", "r2")
        rev = primary.provider.update_shard_log([op("primaryship", primary.id.encode())])
        wait_value(s, [r1, r2], "log", "primaryship", rev)
        primary.provider.close()
        for replica in (r1, r2):
            wait_state(s, replica, primary, NodeState.FAIL)
        start = threading.Barrier(2)
        outcomes: dict[str, object] = {}

        def take_over(replica: Node) -> None:
            start.wait(ctx.remaining())
            try:
                outcomes[replica.id] = replica.provider.update_shard_log([op("primaryship", replica.id.encode(), rev)])
            except ClusterError as exc:
                outcomes[replica.id] = exc

        threads = [threading.Thread(target=take_over, args=(r,)) for r in (r1, r2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(ctx.remaining())
        winners = [(n, r) for n, r in outcomes.items() if isinstance(r, int)]
        losers = [e for e in outcomes.values() if isinstance(e, RevisionMismatch)]
        if len(winners) != 1 or len(losers) != 1:
            return verdict("", [f"outcomes {outcomes}"])
        winner, win_rev = winners[0]
        problems = []
        actual = losers[0].actual
        if actual is None or actual.value != winner.encode():
            problems.append(f"the loser was told {actual}")
        wait_value(s, [r1, r2], "log", "primaryship", int(str(win_rev)))
        for replica in (r1, r2):
            if replica.core.latest("log")["primaryship"].value != winner.encode():
                problems.append(f"{replica.id} believes {replica.core.latest('log')['primaryship']}")
        return verdict("exactly one replica wins the primaryship CAS and every member learns the winner",
                       problems)


def cas_writer_retries(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """The runtime's compare-and-swap writer (spec/cluster/cas.py ``CasWrite``) through every outcome a write can
    meet, each followed through the retry: the key as expected, at another revision (another node writes it just
    before each of the writer's first ``c`` sends), absent (the writer starts from an entry the key no longer holds:
    it must retry as an insert), absent then written by another; each at 0, 1 and enough conflicts that the write
    commits on its last attempt, and one more (it gives up after exactly CAS_ATTEMPTS sends). What each owes is what
    the spec's writer does against the spec's model (conformance/cluster/walks.py ``run_cas_walk``)."""
    assert target.cas_write is not None
    problems: list[str] = []
    with session(target, ctx) as s:
        for stale in (False, True):
            last = CAS_ATTEMPTS - (2 if stale else 1)
            for conflicts in (0, 1, last, last + 1):
                sends, value = target.cas_write(s.cluster, conflicts, stale)
                got = {"sends": sends, "value": None if value is None else value.hex()}
                wanted = run_cas_walk({"conflicts": conflicts, "stale": stale})
                if got != wanted:
                    problems.append(f"with {conflicts} conflicts{' from an entry gone' if stale else ''}: {got}, "
                                    f"not {wanted}")
    return verdict(f"the compare-and-swap writer retries on the entry it found (an insert when it found none) and "
                   f"decides its value from it, committing on its last attempt at the bound and giving up after "
                   f"exactly {CAS_ATTEMPTS} sends", problems)


def _every_walk_of(group: str, replay: Callable[[dict[str, Any]], list[str]], told: str,
                   corpus: Path = WALKS_FILE) -> Verdict:
    """Each walk of one group of a walk corpus (conformance/cluster/vectors/walks.json, derived by
    conformance/cluster/walks.py, or wire_walks.json by wire_walks.py) replayed; the first that differs named
    with what was expected and what came."""
    tests = next(g["tests"] for g in json.loads(corpus.read_text())["testGroups"] if g["type"] == group)
    for test in tests:
        problems = replay(test)
        if problems:
            return verdict("", problems[:3])
    return verdict(f"all {len(tests)} {told}", [])


def every_walk(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Model walks, replayed through the target as traces.json's traces are: results and what each node
    is owed."""
    def replay(test: dict[str, Any]) -> list[str]:
        result = replay_trace(target, ctx.options, test)
        return [] if result.passed else [f"{result.name}: {result.detail}"]

    return _every_walk_of("ModelTrace", replay, "model walks give the spec's results and notifications")


def every_session_walk(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Session walks (``SessionWalk``): members on raw sessions of the service, the clock stopped and moved
    to each health threshold, sessions resumed, taken over and intruded on; each walk's results and owed
    notifications against the recorded ones, then every member's notifications in delivery order against
    the model."""
    return _every_walk_of("SessionWalk", lambda test: replay_session_walk(target, ctx, test),
                          "session walks give the spec's results and notifications")


def every_policy_walk(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Policy walks: a service started (``SERVE``) with each heartbeat and fail_after at the edges of the
    policy's domain refuses what the spec refuses and tells in WELCOME the timing the spec derives."""
    return _every_walk_of("PolicyWalk", lambda test: replay_policy_walk(target, test),
                          "policy walks refused or told as the spec says")


def every_cas_walk(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """CAS walks: the runtime's compare-and-swap writer met by each number of conflicts the corpus keeps
    sends as many ops and writes the value the spec's writer does, or gives up as it does."""
    return _every_walk_of("CasWalk", lambda test: replay_cas_walk(target, ctx, test),
                          "CAS walks sent and wrote as the spec's writer does")


def every_wire_walk(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Wire walks: frames sent to the service on raw connections (HELLOs at their edges, refused HELLOs
    followed by more frames, frames cut short, grown, unknown or past a bound, second sessions for an id,
    the clock at a session's silence deadline, writes and failed CAS, a resumed session's catch-up, services
    started with a secret, a session bound and timings not whole in binary seconds); every reply, in order,
    and each close as recorded."""
    return _every_walk_of("WireWalk", lambda test: wire_walks.replay_through(target, ctx, test),
                          "wire walks answered and closed as the spec's session does", wire_walks.WALKS_FILE)


def every_client_walk(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Client walks: inputs for the target's own client session machine (capability ``client``: HELLO's token
    and resume point, WELCOME and refusals of every code, replies to pending, unknown and late ids, events,
    garbage, timers at each deadline and 1 ms either side, lost connections and the backoff); every step's
    frames sent, notifications, failures, raised errors and deadline as recorded."""
    return _every_walk_of("ClientWalk", lambda test: client_walks.replay_through(target, test),
                          "client walks produced what the spec's client session does", client_walks.WALKS_FILE)


def client_timers_at_inexact_instants(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """The client session's timers (HELLO timeout, a request's patience, the reconnect delay) started at whole-ms
    instants where float seconds would sum past the timer's instant (client_walks.inexact_timer_walks), ticked one
    ms before and at it: every step as the spec's client session answers it."""
    run = target.client
    assert run is not None, "run only with the client capability"
    problems = []
    for label, walk in client_walks.inexact_timer_walks():
        owed, got = client_walks.run_walk(walk), client_walks.answers_of(run, walk)
        at = next((i for i, (o, g) in enumerate(zip(owed, got)) if o != g), None if len(owed) == len(got) else 0)
        if at is not None:
            problems.append(f"{label}: step {at + 1} answered {str(got[at:at + 1])[:200]}, "
                            f"expected {str(owed[at])[:200]}")
    return Verdict(not problems, "each timer quiet a ms before its instant and due at it, as the spec's",
                   "; ".join(problems) or "as the spec's")


def every_input(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Inputs: the target's own cluster pure functions called directly (capability ``inputs``: frames of every
    kind encoded and decoded, an update split at MAX_FRAME_BYTES and one either side, a frame reader's partial
    frames, ids, addresses, keys, values, expected revisions and batches at their byte bounds and one past);
    every answer as recorded."""
    return _every_walk_of("InputCall", lambda test: inputs.replay_through(target, test),
                          "inputs answered as the spec's functions do", inputs.INPUTS_FILE)


def every_input_edge(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Edges: the target's own cluster pure functions (capability ``inputs``) at every edge derived from the spec's
    tables (conformance/cluster/input_edges.py): every error code off the wire, every split of an update event,
    every frame bound, the reactor's connection bounds, the detector's and the session's deadlines; each answer as
    the spec gives it."""
    assert target.inputs is not None
    edges = input_edges.every_edge()
    return verdict(f"all {len(edges)} edges answered as the spec's functions do",
                   input_edges.differences(target.inputs, edges)[:4])


def case(id: str, requirement: str, check: Check, requires: frozenset[str] = frozenset(),
         level: Level = Level.MUST) -> Case:
    return Case(id, level, ROLE, requirement, check, requires)


CASES = [
    case("membership/join-snapshot", "JoinCluster pushes a snapshot holding the node OK in its new shard", join_snapshot),
    case("membership/well-formed", "snapshots are well formed through join, shard moves and removal", well_formed_through_moves),
    case("membership/graceful-leave", "a node leaving gracefully is told and never reported FAIL", graceful_leave),
    case("membership/address-bound", "an address longer than MAX_ADDRESS_BYTES is refused at join with "
         "INVALID_ADDRESS", address_bound),
    case("membership/unknown-shard", "JoinShard into a missing shard raises UNKNOWN_SHARD", join_unknown_shard),
    case("membership/id-claimed-once", "a live node id is claimed once: NODE_ID_IN_USE, takeover by token, "
         "free again when its session ends", identity_claimed_once),
    case("membership/not-a-member", "metadata writes by a non-member raise NOT_A_MEMBER", not_a_member),
    case("membership/derived-every-precondition", "each precondition of a membership or metadata operation at "
         "its smallest violating input raises its error and commits nothing", every_precondition),
    case("membership/derived-rejoin", "a member joining again and a removed node joining again get a new shard "
         "and are OK in it; the removed one is shown the GLOBAL gossip again", rejoin),
    case("membership/join-own-shard", "JoinShard into the node's own shard is a no-op", join_own_shard),
    case("shardlog/cas", "insert and CAS semantics with revisions that grow", insert_then_cas),
    case("shardlog/derived-cas-writer-retries", "the runtime's compare-and-swap writer retries on the entry it "
         "found (an insert when it found none) and decides its value from it; it gives up after exactly "
         "CAS_ATTEMPTS conflicts",
         cas_writer_retries, frozenset({CAS})),
    case("shardlog/linearizable", "concurrent per-key CAS chains are linearizable", linearizable_cas_chains),
    case("shardlog/batch-atomic", "a batch is all-or-nothing", batch_atomic),
    case("shardlog/one-batch-one-notify", "one committed batch is one notification per member", one_batch_one_notification),
    case("shardlog/monotone-notify", "notifications never go back in revision", notifications_monotone),
    case("shardlog/convergence", "every member sees every committed write", all_members_converge),
    case("shardlog/shard-isolation", "shards never see each other's keys", shard_isolation),
    case("shardlog/catch-up", "a node joining a shard catches up with its log", catch_up_on_join),
    case("shardlog/destroyed", "a shard and its log are destroyed with their last member", destroyed_with_last_member),
    case("shardlog/durable", "acknowledged writes survive a backend restart", durable_across_restart,
         frozenset({RESTART})),
    case("namespace/separate", "gossip and shard-log namespaces are separate", namespaces_separate),
    case("membership/derived-every-move-leaves-the-old-shard", "every way of leaving a shard (JoinCluster "
         "again, JoinShard, RemoveFromShard) stops the old shard's notifications; by its last member it destroys "
         "the shard", every_move_leaves_the_old_shard),
    case("gossip/cas", "gossip writes are compare-and-swap", gossip_cas),
    case("gossip/convergence", "members converge on the same winning gossip value", gossip_convergence),
    case("gossip/no-silent-update", "the winning gossip value is always notified", gossip_no_silent_update),
    case("gossip/shard-scope", "SHARD-scoped gossip reaches the writer's shard", gossip_shard_scope),
    case("gossip/shard-scope-reach", "whether SHARD gossip goes beyond the writer's shard (recorded)",
         gossip_shard_scope_reach, level=Level.INFO),
    case("gossip/late-joiner", "a joiner learns the existing GLOBAL gossip", gossip_late_joiner),
    case("batch/invalid", "malformed batches are rejected with INVALID_BATCH", invalid_batches),
    case("batch/every-rule-at-its-bound", "each batch rule, on the wire, for each batch operation: the smallest "
         "violating batch is INVALID_BATCH and writes nothing, the largest valid one is served",
         batch_rules.batch_rules, frozenset({SERVICE})),
    case("failure/heartbeat", "ClusterHeartbeat keeps the Core's TTL running", heartbeats),
    case("failure/detect-within-bound", "a stopped node is FAIL everywhere within the declared bound", detect_within_bound),
    case("failure/no-false-fail", "no FAIL in a fault-free run", no_false_fail),
    case("failure/at-their-instants", "PFAIL and FAIL are decided at their exact thresholds, not a tick early",
         verdicts_at_their_instants, frozenset({CLOCK})),
    case("failure/derived-verdicts-per-node-at-their-instants", "two members silent since different instants are "
         "each PFAIL and FAIL by their own last renewal, exactly at each threshold unchanged, 1 ms past changed",
         model_cases.verdicts_per_node_at_their_instants, frozenset({SERVICE, CLOCK})),
    case("failure/derived-every-timeout-at-its-edge", "a silent node is OK, PFAIL, FAIL and its session open "
         "exactly as each timeout of the settings table (pfail_after, fail_after, fail_bound, ttl) says, 1 ms before "
         "it, at it and 1 ms past it", timeout_edges.every_timeout_at_its_edge, frozenset({SERVICE, CLOCK})),
    case("failure/derived-unread-is-not-silence", "a RENEW waiting unread while the service holds the node's reads "
         "is not silence: past every timeout the node stays OK and its session open; once read it renews the node "
         "then, and every timeout counts from that moment", timeout_edges.unread_is_not_silence,
         frozenset({SERVICE, CLOCK, PAUSE})),
    case("failure/derived-declared-timing", "the detector's declared thresholds and the timing told to nodes "
         "follow the failure policy (fail_after = TTL, PFAIL at half, fail_bound = fail_after + heartbeat)",
         declared_timing, frozenset({CLOCK})),
    case("failure/renewal-clears", "a renewal makes a stale node OK again", renewal_clears, frozenset({CLOCK})),
    case("failure/idle-commits-nothing", "a tick that changes no member's state commits and notifies nothing",
         idle_commits_nothing, frozenset({CLOCK}), Level.SHOULD),
    case("durability/no-op-writes-nothing", "what commits nothing makes nothing durable (an idle cluster writes "
         "nothing)", no_op_writes_nothing, frozenset({CLOCK, DURABLE}), Level.SHOULD),
    case("failure/forgets-departed", "once the next tick has run, a node that left or was removed holds "
         "nothing (churn leaves nothing behind)", forgets_departed, frozenset({CLOCK, HELD}), Level.SHOULD),
    case("failure/fail-survives-restart", "a FAIL node stays FAIL across a backend restart", fail_survives_restart,
         frozenset({CLOCK, RESTART})),
    case("wire/short-frames", "frames shorter than a message header are refused", wire_cases.short_frames,
         frozenset({SERVICE})),
    case("wire/one-byte-off", "messages one byte short or long are refused", wire_cases.one_byte_off,
         frozenset({SERVICE})),
    case("wire/size-bounds", "frames at the size bounds are served, one byte more is refused",
         wire_cases.size_bounds, frozenset({SERVICE})),
    case("wire/derived-hello-node-id-rules", "each rule of HELLO's node id, at its smallest violating input, is "
         "refused with INVALID_IDENTIFIER; the longest valid id is welcomed", wire_cases.hello_node_id_rules,
         frozenset({SERVICE})),
    case("wire/derived-silence-at-its-deadline", "a session silent for exactly fail_bound stays open, 1 ms more "
         "and it is closed; every frame moves the deadline", wire_cases.silence_at_its_deadline,
         frozenset({SERVICE, CLOCK})),
    case("wire/derived-every-frame-moves-the-silence-deadline", "every frame a node sends (each request kind, "
         "refused ones, HELLO twice, a reply kind) moves its session's silence deadline to fail_bound after it",
         wire_cases.every_frame_moves_the_silence_deadline, frozenset({SERVICE, CLOCK})),
    case("wire/derived-sessions-at-their-bound", "exactly the declared number of nodes is served; the next HELLO "
         "is PROVIDER_UNAVAILABLE, and an ended session frees its slot", wire_cases.sessions_at_their_bound,
         frozenset({SERVICE, SESSIONS})),
    case("wire/derived-every-message-rule", "each rule of the service's messages at its smallest violating input "
         "(every request kind one byte long and short, unknown kinds, a request before HELLO, HELLO twice, a reply "
         "kind, a key not UTF-8, an undefined scope) is refused with MALFORMED_MESSAGE",
         message_rules.message_rules, frozenset({SERVICE})),
    case("wire/derived-takeover-closes-the-old-session", "a takeover welcomes the successor and tells the old "
         "session PROVIDER_CLOSED (request id 0) before closing it", wire_cases.takeover_closes_the_old_session,
         frozenset({SERVICE})),
    case("membership/derived-every-operation-in-delivery-order", "every operation's notifications (joins, shard "
         "moves, log and gossip writes with stale revisions, a FAIL member joining again with a new address, removals, "
         "a restart, a resumed catch-up) reach every member, OK, PFAIL or FAIL, in the model's order",
         model_cases.every_operation_in_delivery_order, frozenset({SERVICE, CLOCK, RESTART})),
    case("wire/derived-every-setting-at-its-bound", "each service setting at the edge of its domain, both sides "
         "(heartbeat 1 ms and 0, fail_after exactly twice the heartbeat and 1 ms short, fail_bound at the wire's "
         "u32 and past it, one session, no secret, a blank one, a set one): served as configured or refused",
         settings_cases.every_setting_at_its_bound, frozenset({SERVICE, CONFIGURE})),
    case("wire/derived-admission-checks-in-order", "HELLOs breaking two or three admission rules at once (a wrong "
         "secret, the one session taken, an invalid or a served node id, a frame past MAX_HELLO_BYTES), with a slot "
         "free and at capacity: refused as the rule checked first (frame bound, secret, session bound, node id)",
         settings_cases.admission_checks_in_order, frozenset({SERVICE, CONFIGURE})),
    case("wire/resume-repeats-nothing", "a resumed session is not notified again of what it saw",
         wire_cases.resume_repeats_nothing, frozenset({SERVICE}), Level.SHOULD),
    case("failure/failover-race", "the failover race has exactly one winner that everyone learns", failover_race),
    case("walks/derived-every-model-walk", "every walk of the corpus kept by operator-mutant selection (joins, "
         "removals, shard moves, log and gossip batches with current, stale and absent revisions, by members and "
         "strangers) gives the spec's results and notifications", every_walk),
    case("walks/derived-every-session-walk", "every session walk of the corpus (members on the service's wire, "
         "the clock moved to each health threshold and 1 ms either side, renewals, resumed, taken-over and "
         "intruded sessions) gives the spec's results and each member the model's notifications in order",
         every_session_walk, frozenset({SERVICE, CLOCK})),
    case("walks/derived-every-policy-walk", "every policy walk of the corpus (a heartbeat and fail_after at each edge "
         "of the failure policy's domain, both sides) is refused, or served with the timing the spec derives",
         every_policy_walk, frozenset({SERVICE, CONFIGURE})),
    case("walks/derived-every-cas-walk", "every CAS walk of the corpus (the runtime's writer met by conflicts at "
         "the writer's attempt bound and around it) sends and writes as the spec's writer does",
         every_cas_walk, frozenset({CAS})),
    case("walks/derived-every-wire-walk", "every wire walk of the corpus (a stranger's frames at and past every "
         "bound, refused HELLOs followed by more frames, an identified node's bad frames, second sessions with and "
         "without the token, the clock at a session's silence deadline and 1 ms either side, failed CAS writes, a "
         "resumed session's catch-up after a revision at and around its writes, services started with a secret, a "
         "session bound of 1 or 2 and timings like 1001 ms, members moving, writing, removed and gone silent, every "
         "payload-less kind from a stranger and a welcomed node, a successor resuming around its node's move) is "
         "answered frame by frame and closed as the spec's session does, and each member is told, after WELCOME, "
         "the membership and the notifications the spec owes it (in its own order, wherever they fall among the "
         "replies)", every_wire_walk, frozenset({SERVICE, CLOCK, CONFIGURE})),
    case("walks/derived-every-client-walk", "every client walk of the corpus (one client session machine given "
         "WELCOME, refusals of every code, replies to pending, unknown and late request ids, events, garbage, timers "
         "at each deadline and 1 ms either side, lost connections, the reconnect backoff and the handle closed) sends, "
         "tells the Core, fails, raises and sets its deadline as the spec's client session does", every_client_walk,
         frozenset({CLIENT})),
    case("walks/derived-client-timers-at-inexact-instants", "the client session's HELLO timeout, a request's "
         "patience and the reconnect delay, each started at a whole-ms instant where float seconds sum past the "
         "timer's instant (0.3 s, 0.7 s, 0.1 s; the instants derived by search), fire exactly at their instant and "
         "not a ms before, as an implementation counting integer milliseconds decides",
         client_timers_at_inexact_instants, frozenset({CLIENT})),
    case("inputs/derived-every-input", "every call of the inputs corpus (the wire's encode and decode of every "
         "kind, an update event split at MAX_FRAME_BYTES and one either side, a frame reader fed partial frames at "
         "its bound, ids, addresses, keys, values, expected revisions and batches at their byte bounds and one past) "
         "answers, raises or refuses as the spec's pure functions do", every_input, frozenset({INPUTS})),
    case("inputs/derived-every-edge", "every edge derived from the spec's tables (each error code decoded off the "
         "wire and the codes next to them, an update event split at its limit with each frame's fixed part and one "
         "byte either side, every frame bound and one byte either side, the reactor's stranger and departure bounds "
         "and deadlines, the detector's and the session's deadlines at their instant and one tick either side, "
         "read late and held, and again at whole-ms instants whose float sum or difference falls on the wrong "
         "side, each refusal of a HELLO with its ERROR frame, a client's request of typed ops) answers "
         "as the spec's pure functions do",
         every_input_edge, frozenset({INPUTS})),
]

SUITE = Suite(name="cluster", cases=CASES, open_target=open_target, roles=(ROLE,), target_help=TARGET_HELP)
