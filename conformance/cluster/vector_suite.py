"""Golden vectors of the cluster provider (``python -m conformance vectors --suite cluster``).

Model traces are replayed against any backend the cluster suite can reach (``--target reference``
is the in-process backend; ``memory``, ``etcd``, ``etcd://...``, ``tcp://...`` and ``exec:CMD`` as
for ``run --suite cluster``): each trace gets a fresh cluster, its nodes are opened under a
session prefix, every step's result or error is compared, and each node's notifications are
awaited until they hold what the trace owes it (see the file's header for the rules). Shard ids
and revisions are bound to the trace's symbols on first appearance. Detector traces pin the
spec's failure detector (:mod:`spec.cluster.detector`) and are checked against it.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Sequence

from conformance.cluster.harness import Node, Recorder, Session, open_target, session
from conformance.framework import CaseContext, CaseTimeout, RunOptions, VectorResult
from conformance.cluster.vectorgen import MISSING_SHARD, TRACES_FILE
from conformance.cluster.walks import WALKS_FILE, run_detector_walk
from spec.cluster.errors import ClusterError
from spec.cluster.types import Entry, Membership, MetadataOp, Revision, Scope, ShardId

TRACE_DEADLINE_S: Final = 60.0
NOTIFY_WAIT_S: Final = 5.0
"""How long a node's owed notifications may take to arrive after the last step."""


class Mismatch(Exception):
    """The backend did something the trace does not allow; the message says what."""


@dataclass
class Binding:
    """Symbols ($S1, $R1) bound to a backend's shard ids and revisions, one to one."""

    values: dict[str, object] = field(default_factory=dict)
    last_revision: dict[str, int] = field(default_factory=dict)

    def bind(self, symbol: str, value: object) -> None:
        if symbol in self.values:
            if self.values[symbol] != value:
                raise Mismatch(f"{symbol} was {self.values[symbol]!r}, now {value!r}")
            return
        if value in self.values.values():
            raise Mismatch(f"{value!r} for {symbol} is already bound to another symbol")
        self.values[symbol] = value

    def advance(self, key: str, revision: int) -> None:
        """A committed write of ``key``: its revisions strictly increase."""
        if revision <= self.last_revision.get(key, 0):
            raise Mismatch(f"revision {revision} of {key!r} does not exceed its previous {self.last_revision[key]}")
        self.last_revision[key] = revision

    def symbol_of(self, value: object) -> str:
        return next((s for s, v in self.values.items() if v == value), f"unbound {value!r}")


def _owed_batches(batches: Sequence[dict[str, Any]]) -> list[tuple[str, tuple[tuple[str, str, str], ...]]]:
    return [(b.get("shard", ""), tuple((e["key"], e["value"], e["revision"]) for e in b["entries"]))
            for b in batches]


def _is_subsequence(want: Sequence[object], got: Sequence[object]) -> bool:
    it = iter(got)
    return all(any(w == g for g in it) for w in want)


@dataclass
class _Replay:
    session: Session
    binding: Binding = field(default_factory=Binding)
    nodes: dict[str, Node] = field(default_factory=dict)

    def node(self, name: str) -> Node:
        if name not in self.nodes:
            self.nodes[name] = self.session.node(name, join=False)
        return self.nodes[name]

    def key(self, key: str) -> str:
        """Keys live under the session's prefix: gossip is one store for a whole (shared) cluster."""
        return f"{self.session.tag}/{key}"

    def own_entries(self, entries: Sequence[Entry]) -> tuple[tuple[str, str, str], ...]:
        """This trace's entries, keys without the session prefix, revisions as their symbols."""
        prefix = self.key("")
        return tuple((e.key.removeprefix(prefix), e.value.hex(), self.binding.symbol_of(e.revision))
                     for e in entries if e.key.startswith(prefix))

    def own_shards(self, snapshot: Membership) -> dict[str, list[list[str]]]:
        """The snapshot's shards holding this trace's nodes (a shared service also lists other sessions')."""
        prefix = f"{self.session.tag}-"
        out = {}
        for shard, members in snapshot.shards.items():
            own = sorted([n.node_id.removeprefix(prefix), n.state.value] for n in members if n.node_id.startswith(prefix))
            if own:
                out[self.binding.symbol_of(shard)] = own
        return out

    def step(self, step: dict[str, Any]) -> None:
        node, op, want = self.node(step["node"]), step["op"], step["result"]
        try:
            got = self._call(node, step)
        except ClusterError as error:
            if want.get("error") != error.condition:
                raise Mismatch(f"{op} by {step['node']}: raised {error.condition} ({error.message}), "
                               f"expected {want}") from None
            return
        if "error" in want:
            raise Mismatch(f"{op} by {step['node']}: returned {got!r}, expected {want['error']}")
        if "shard" in want:
            self.binding.bind(want["shard"], got)
        if "revision" in want:
            self.binding.bind(want["revision"], int(str(got)))
            for item in step["ops"]:
                self.binding.advance(f"{step['op']}:{item['key']}", int(str(got)))

    def _call(self, node: Node, step: dict[str, Any]) -> object:
        provider, op = node.provider, step["op"]
        if op == "join_cluster":
            node.shard = provider.join_cluster(f"127.0.0.1:{7000 + len(self.nodes)}")
            return node.shard
        if op == "remove_from_cluster":
            provider.remove_from_cluster(self.session.id_of(step["target"]))
            return None
        if op == "join_shard":
            shard = step["shard"]
            provider.join_shard(ShardId(MISSING_SHARD if shard == MISSING_SHARD else str(self.binding.values[shard])))
            return None
        if op == "remove_from_shard":
            return provider.remove_from_shard(self.session.id_of(step["target"]))
        ops = [MetadataOp(key=self.key(o["key"]), value=bytes.fromhex(o["value"]),
                          expected=None if o["expected"] is None else Revision(int(str(self.binding.values[o["expected"]]))))
               for o in step["ops"]]
        if op == "update_shard_log":
            return provider.update_shard_log(ops)
        return provider.update_gossip(ops, Scope(step["scope"]))

    def owed_problems(self, name: str, owed: dict[str, Any]) -> list[str]:
        """What node ``name`` has not (yet) been told, or was told and must not be."""
        core = self.node(name).core
        problems = []
        if owed["membership"] is not None:
            snapshot = core.last_snapshot()
            got = None if snapshot is None else self.own_shards(snapshot)
            if got != owed["membership"]:
                problems.append(f"{name}'s last snapshot is {got}, owed {owed['membership']}")
        log = [(self.binding.symbol_of(shard), self.own_entries(entries)) for shard, entries in list(core.shard_log)]
        want_log = _owed_batches(owed["shardLog"])
        if not _is_subsequence(want_log, log):
            problems.append(f"{name}'s shard-log batches {log} do not hold, in order, {want_log}")
        owed_entries = {entry for _, batch in want_log for entry in batch}
        foreign = [entry for _, batch in log for entry in batch if entry not in owed_entries]
        if foreign:
            problems.append(f"{name} was told shard-log entries it is not owed: {foreign}")
        gossip = [("", self.own_entries(batch)) for batch in list(core.gossip)]
        want_gossip = _owed_batches(owed["gossip"])
        if not _is_subsequence(want_gossip, gossip):
            problems.append(f"{name}'s gossip batches {gossip} do not hold, in order, {want_gossip}")
        return problems


def replay_trace(target: Any, options: RunOptions, test: dict[str, Any]) -> VectorResult:
    ctx = CaseContext(options=options, deadline=time.monotonic() + TRACE_DEADLINE_S)
    name = f"tcId {test['tcId']}: {test['comment']}"
    try:
        with session(target, ctx) as s:
            replay = _Replay(s)
            for step in test["steps"]:
                replay.step(step)
            problems: list[str] = []
            for node_name, owed in test["owed"].items():
                core: Recorder = replay.node(node_name).core
                told = functools.partial(replay.owed_problems, node_name, owed)
                try:
                    core.wait(ctx, f"{node_name}'s owed notifications", lambda: not told(), limit=NOTIFY_WAIT_S)
                except CaseTimeout:
                    problems += told()
            if problems:
                raise Mismatch("; ".join(problems))
    except (Mismatch, CaseTimeout, ClusterError) as exc:
        return VectorResult("ModelTrace", name, False, str(exc))
    return VectorResult("ModelTrace", name, True)


def replay_detector(test: dict[str, Any]) -> VectorResult:
    """A detector trace against the spec's FailureDetector (a renewal makes its node a member, as a
    backend's model holds it; ``remove`` ends that)."""
    name = f"tcId {test['tcId']}: {test['comment']}"
    ticks = [event for event in test["events"] if event["event"] == "tick"]
    for event, got in zip(ticks, run_detector_walk(test)):
        if got != event["verdicts"]:
            return VectorResult("DetectorTrace", name, False,
                                f"tick at t={event['t']}: verdicts {got}, expected {event['verdicts']}")
    return VectorResult("DetectorTrace", name, True)


def replay_walks(target: Any, options: RunOptions) -> Iterator[VectorResult]:
    """The walk corpus (vectors/walks.json): its model walks through ``target``, its detector walks against
    the spec, each reported in its group with ``walks/`` before the group's name."""
    groups = {group["type"]: group["tests"] for group in json.loads(WALKS_FILE.read_text())["testGroups"]}
    for test in groups["DetectorTrace"]:
        result = replay_detector(test)
        yield VectorResult(f"walks/{result.group}", result.name, result.passed, result.detail)
    for test in groups["ModelTrace"]:
        result = replay_trace(target, options, test)
        yield VectorResult(f"walks/{result.group}", result.name, result.passed, result.detail)


def check_vectors(target: str) -> Iterator[VectorResult]:
    """Every cluster vector, traces.json's then the walk corpus's: model traces against ``target``,
    detector traces against the spec."""
    document = json.loads(TRACES_FILE.read_text())
    groups = {group["type"]: group["tests"] for group in document["testGroups"]}
    for test in groups["DetectorTrace"]:
        yield replay_detector(test)
    options = RunOptions(suite="cluster", target="memory" if target == "reference" else target,
                         timeout=TRACE_DEADLINE_S)
    with open_target(options) as opened:
        for test in groups["ModelTrace"]:
            yield replay_trace(opened, options, test)
        yield from replay_walks(opened, options)
