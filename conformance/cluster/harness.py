"""What cluster cases stand on: targets (memory, etcd, etcd://, exec:, tcp://) and what each can do
(capabilities ``restart``, ``clock``: the runner drives the failure detector's time, ``durable``: the
target reports how many committed changes it has made durable, ``held``: how many nodes it holds
liveness state for, ``sessions``: how many nodes its service serves at once, all five offered by a
target harness on its own channel, never on the service's wire (conformance/cluster/controls.py);
``service``: a cluster service whose own wire the runner may speak), a recording Core, and per-case sessions of fresh nodes on an isolated cluster."""

from __future__ import annotations

import itertools
import secrets
import shlex
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from conformance.cluster import client_target, inputs_target
from conformance.cluster.clock import DetectorClock
from conformance.cluster.controls import ControlChannel, Controls, Thresholds
from conformance.framework import CaseContext, CaseTimeout, RunOptions, Verdict
from reference.cluster.config import PROVIDER_SYNTAX, ProviderKind, provider_kind
from reference.cluster.etcd import EtcdCluster
from reference.cluster.etcd_gateway import EtcdEndpoint
from conformance.cluster.etcd_server import EtcdServer, EtcdUser, make_test_pki
from reference.cluster.memory import InProcessCluster
from reference.cluster.remote import RemoteCluster
from spec.cluster.errors import ClusterError
from spec.cluster.interface import ClusterBackend, ClusterProvider
from spec.cluster.types import Entry, Membership, MetadataOp, NodeId, NodeState, Revision, ShardId

RESTART = "restart"
CLOCK = "clock"
DURABLE = "durable"
HELD = "held"
SESSIONS = "sessions"
SERVICE = "service"
CONFIGURE = "configure"
CAS = "cas"
CLIENT = "client"
INPUTS = "inputs"
PAUSE = "pause"
Clock = Callable[[ClusterBackend, bool, int], Thresholds]
"""``(cluster, stopped, advance_ms)``: see ``CLOCK`` in conformance/cluster/controls.py."""


@dataclass
class ClusterTarget:
    """``new_cluster`` gives each case an isolated cluster; ``restart`` (capability "restart")
    restarts the backend holding a cluster it made; ``clock`` (capability "clock") stops, moves or
    releases its failure detector's clock; ``durable`` (capability "durable") counts the committed
    changes the backend holding a cluster has made durable; ``held`` (capability "held") counts the
    nodes it holds liveness state for; ``sessions`` (capability "sessions") says how many nodes the
    service serves at once; ``url`` (capability "service") is the cluster service."""

    description: str
    capabilities: frozenset[str]
    new_cluster: Callable[[], ClusterBackend]
    restart: Callable[[ClusterBackend], None] | None = None
    clock: Clock | None = None
    durable: Callable[[ClusterBackend], int] | None = None
    held: Callable[[ClusterBackend], int] | None = None
    url: str | None = None
    sessions: Callable[[], int] | None = None
    configure: Callable[[int, int, int, str | None], int | str] | None = None
    unconfigure: Callable[[], None] | None = None
    cas_write: Callable[[ClusterBackend, int, bool], tuple[int, bytes | None]] | None = None
    """Capability "cas": the runtime's compare-and-swap writer met by ``conflicts`` (``stale``: starting from an
    entry the key does not hold); how many ops it sent and what it wrote (conformance/cluster/controls.py)."""
    client: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None
    """Capability "client": the target's own client session machine run on a walk of inputs
    (conformance/cluster/client_target.py)."""
    inputs: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Capability "inputs": the target's own cluster pure functions called on one input
    (conformance/cluster/inputs_target.py)."""
    hold_reads: Callable[[str, bool], None] | None = None
    """Capability "pause": ``(node_id, held)`` stops (True) or resumes its service's reading of the
    connection serving that node; held time is unread time, never silence (``PAUSE`` and ``RESUME``
    in conformance/cluster/controls.py)."""


def verdict(expected: str, problems: list[str]) -> Verdict:
    return Verdict(not problems, expected, "; ".join(problems) if problems else expected)


def raises(error: type[ClusterError], action: Callable[[], object]) -> list[str]:
    """[] when ``action`` raised ``error``, else what happened instead."""
    try:
        result = action()
    except error:
        return []
    except ClusterError as exc:
        return [f"raised {type(exc).__name__}: {exc}"]
    return [f"returned {result!r}"]


def op(key: str, value: bytes, expected: int | None = None) -> MetadataOp:
    return MetadataOp(key=key, value=value, expected=None if expected is None else Revision(expected))


class Recorder:
    """A Core that records every notification with its arrival time."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.snapshots: list[tuple[float, Membership]] = []
        self.shard_log: list[tuple[ShardId, tuple[Entry, ...]]] = []
        self.gossip: list[tuple[Entry, ...]] = []
        self.heartbeats: list[tuple[float, float]] = []
        self.downs: list[float] = []

    def _add(self, bucket: list[Any], item: Any) -> None:
        with self._cond:
            bucket.append(item)
            self._cond.notify_all()

    def update_membership(self, snapshot: Membership) -> None:
        self._add(self.snapshots, (time.monotonic(), snapshot))

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        self._add(self.gossip, tuple(entries))

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        self._add(self.shard_log, (shard, tuple(entries)))

    def cluster_heartbeat(self, ttl: float) -> None:
        self._add(self.heartbeats, (time.monotonic(), ttl))

    def cluster_down(self) -> None:
        self._add(self.downs, time.monotonic())

    def wait(self, ctx: CaseContext, what: str, predicate: Callable[[], bool], limit: float | None = None) -> None:
        """Block until ``predicate`` holds; CaseTimeout names ``what`` when the deadline passes."""
        end = time.monotonic() + (limit if limit is not None else ctx.remaining())
        with self._cond:
            while not predicate():
                left = min(end - time.monotonic(), ctx.remaining())
                if left <= 0:
                    raise CaseTimeout(f"waited for {what}")
                self._cond.wait(min(left, 0.05))

    def latest(self, table: str) -> dict[str, Entry]:
        """Per key, the highest-revision entry notified (``table``: "log" or "gossip")."""
        with self._cond:
            batches = [e for _, e in self.shard_log] if table == "log" else list(self.gossip)
        out: dict[str, Entry] = {}
        for batch in batches:
            for entry in batch:
                if entry.key not in out or entry.revision > out[entry.key].revision:
                    out[entry.key] = entry
        return out

    def last_snapshot(self) -> Membership | None:
        with self._cond:
            return self.snapshots[-1][1] if self.snapshots else None

    def state_of(self, node: NodeId) -> NodeState | None:
        snapshot = self.last_snapshot()
        info = None if snapshot is None else snapshot.nodes().get(node)
        return None if info is None else info.state


@dataclass
class Node:
    id: NodeId
    provider: ClusterProvider
    core: Recorder
    shard: ShardId | None = None


_sessions = itertools.count(1)


@dataclass
class Session:
    cluster: ClusterBackend
    ctx: CaseContext
    tag: str = field(default_factory=lambda: f"c{next(_sessions)}-{uuid.uuid4().hex[:6]}")
    nodes: list[Node] = field(default_factory=list)

    def node(self, name: str, join: bool = True, takeover: str | None = None) -> Node:
        node_id = self.id_of(name)
        core = Recorder()
        node = Node(node_id, self.cluster.open_node(node_id, core, takeover=takeover), core)
        self.nodes.append(node)
        if join:
            node.shard = node.provider.join_cluster(f"127.0.0.1:{7000 + len(self.nodes)}")
        return node

    def id_of(self, name: str) -> NodeId:
        return NodeId(f"{self.tag}-{name}")

    def shard_of(self, shard_size: int, *names: str) -> list[Node]:
        """``names`` joined into one shard (the first one's), waiting until all see the topology."""
        nodes = [self.node(n) for n in names]
        shard = nodes[0].shard
        assert shard is not None
        for node in nodes[1:]:
            node.provider.join_shard(shard)
            node.shard = shard
        for node in nodes:
            core = node.core
            core.wait(self.ctx, f"{node.id} sees {shard_size} members in its shard",
                      lambda: _members_of(core.last_snapshot(), shard) >= shard_size)
        return nodes


def _members_of(snapshot: Membership | None, shard: ShardId) -> int:
    return 0 if snapshot is None else len(snapshot.shards.get(shard, ()))


@contextmanager
def session(target: ClusterTarget, ctx: CaseContext) -> Iterator[Session]:
    s = Session(target.new_cluster(), ctx)
    try:
        yield s
    finally:
        for node in s.nodes:
            node.provider.close()
        s.cluster.close()


@contextmanager
def stopped_clock(target: ClusterTarget, s: Session) -> Iterator[tuple[Thresholds, Callable[[int], None]]]:
    """The target's detector clock stopped for the block (real time again after it); yields the
    detector's thresholds and ``advance(ms)``, which moves the clock on and has the detector tick
    once, its verdicts committed."""
    clock = target.clock
    assert clock is not None
    limits = clock(s.cluster, True, 0)

    def advance(ms: int) -> None:
        clock(s.cluster, True, ms)

    try:
        yield limits, advance
    finally:
        clock(s.cluster, False, 0)


# -- targets --------------------------------------------------------------------------------

LOCAL_ETCD = {
    "etcd": "started on loopback",
    "etcd-auth": "started on loopback with authentication",
    "etcd-tls": "started on loopback with TLS, client certificates and authentication",
}
TARGET_HELP = (f"{PROVIDER_SYNTAX[ProviderKind.MEMORY]} (in-process, journaled), etcd | etcd-auth | etcd-tls "
               "(start etcd on loopback: plain, with a user and password, with TLS from a throwaway CA plus client "
               f"certificates and a user), {PROVIDER_SYNTAX[ProviderKind.ETCD]} (each case in a namespace of its own), "
               f"{PROVIDER_SYNTAX[ProviderKind.SERVICE]} (a cluster service: its wire only), exec:CMD (CMD starts a cluster "
               "service or a harness embedding one and prints its port as its first line, after an optional line "
               "CAPABILITIES clock restart durable held sessions configure cas client inputs pause; a harness then answers control lines on stdin, "
               "docs/conformance.md)")


@contextmanager
def open_target(options: RunOptions) -> Iterator[ClusterTarget]:
    spec = options.target
    kind = provider_kind(spec)  # the settings a Spark job takes (reference/cluster/config.py), and these targets' own
    with tempfile.TemporaryDirectory(prefix="streamwire-cluster-") as tmp:
        if kind is ProviderKind.MEMORY or spec == "reference":
            yield _memory_target(Path(tmp))
        elif spec in LOCAL_ETCD:
            tls = make_test_pki(Path(tmp) / "pki") if spec == "etcd-tls" else None
            user = None if spec == "etcd" else EtcdUser("streamwire", secrets.token_hex(12))
            server = EtcdServer(Path(tmp) / "etcd", tls=tls, user=user)
            server.start()
            try:
                yield _etcd_target(server.endpoint, f"etcd {server.endpoint} ({LOCAL_ETCD[spec]})", server.restart)
            finally:
                server.stop()
        elif kind is ProviderKind.ETCD:
            endpoint = EtcdEndpoint.parse(spec)
            yield _etcd_target(endpoint, str(endpoint), None)
        elif kind is ProviderKind.SERVICE:
            if options.capabilities and options.capabilities - {SERVICE}:
                raise ValueError(f"a tcp:// target offers only its wire ({SERVICE}); clock, restart, durable and held "
                                 "come from a harness's control channel: use exec:CMD")
            yield _service_target(spec, spec, frozenset(), None)
        elif spec.startswith("exec:"):
            with _exec_service(spec[len("exec:"):]) as (url, declared, channel):
                yield _service_target(f"{spec} at {url}", url, options.capabilities or declared, channel)
        else:
            raise ValueError(f"unknown cluster target {spec!r}; expected {TARGET_HELP}")


def _memory_target(tmp: Path) -> ClusterTarget:
    """In-process clusters, each handed a clock the runner stops (the controls a harness offers, called directly)."""
    counter = itertools.count()
    controls: weakref.WeakKeyDictionary[ClusterBackend, Controls] = weakref.WeakKeyDictionary()

    def new_cluster() -> ClusterBackend:
        clock = DetectorClock()
        cluster = InProcessCluster(data_dir=tmp / f"cluster-{next(counter)}", clock=clock)
        controls[cluster] = Controls(cluster, clock)
        return cluster

    return ClusterTarget("in-process cluster (journaled)", frozenset({RESTART, CLOCK, DURABLE, HELD, CAS, CLIENT, INPUTS}),
                         new_cluster,
                         lambda cluster: controls[cluster].restart(),
                         lambda cluster, stopped, advance_ms: controls[cluster].set_clock(stopped, advance_ms),
                         lambda cluster: controls[cluster].durable(), lambda cluster: controls[cluster].held(),
                         cas_write=lambda cluster, conflicts, stale: controls[cluster].cas_write(conflicts, stale),
                         client=client_target.run, inputs=inputs_target.run)


def _service_target(description: str, url: str, declared: frozenset[str],
                    channel: ControlChannel | None) -> ClusterTarget:
    """A cluster service: the ``service`` capability, and the controls its harness declared."""
    offered = declared if channel is not None else frozenset()

    def restart(_cluster: ClusterBackend) -> None:
        assert channel is not None
        channel.restart()

    def clock(_cluster: ClusterBackend, stopped: bool, advance_ms: int) -> Thresholds:
        assert channel is not None
        return channel.set_clock(stopped, advance_ms)

    def durable(_cluster: ClusterBackend) -> int:
        assert channel is not None
        return channel.durable()

    def held(_cluster: ClusterBackend) -> int:
        assert channel is not None
        return channel.held()

    def sessions() -> int:
        assert channel is not None
        return channel.sessions()

    def cas_write(_cluster: ClusterBackend, conflicts: int, stale: bool) -> tuple[int, bytes | None]:
        assert channel is not None
        return channel.cas_write(conflicts, stale)

    configured = channel is not None and CONFIGURE in offered
    return ClusterTarget(description, offered | {SERVICE}, lambda: RemoteCluster(url),
                         restart if RESTART in offered else None, clock if CLOCK in offered else None,
                         durable if DURABLE in offered else None, held if HELD in offered else None, url,
                         sessions if SESSIONS in offered else None,
                         channel.serve if configured and channel is not None else None,
                         channel.unserve if configured and channel is not None else None,
                         cas_write if channel is not None and CAS in offered else None,
                         channel.client if channel is not None and CLIENT in offered else None,
                         channel.inputs if channel is not None and INPUTS in offered else None,
                         channel.hold_reads if channel is not None and PAUSE in offered else None)


def _etcd_target(endpoint: EtcdEndpoint, description: str, restart: Callable[[], None] | None) -> ClusterTarget:
    return ClusterTarget(description, frozenset({RESTART}) if restart else frozenset(),
                         lambda: EtcdCluster(endpoint, f"conformance-{uuid.uuid4().hex[:12]}"),
                         None if restart is None else (lambda _cluster: restart()))


@contextmanager
def _exec_service(command: str) -> Iterator[tuple[str, frozenset[str], ControlChannel]]:
    """CMD started: its url, the capabilities it declared and the channel to its stdin and stdout."""
    process = subprocess.Popen(shlex.split(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        stdout = process.stdout
        assert stdout is not None
        lines: list[str] = []

        def read() -> None:
            lines.append(stdout.readline())
            if lines[0].startswith("CAPABILITIES"):
                lines.append(stdout.readline())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(30.0)
        declared = frozenset(lines.pop(0).split()[1:]) if lines and lines[0].startswith("CAPABILITIES") else frozenset()
        if not lines or not lines[0].strip().isdigit():
            raise RuntimeError(f"{command!r} did not print its port as its first line within 30 s")
        assert process.stdin is not None
        yield f"tcp://127.0.0.1:{int(lines[0])}", declared, ControlChannel(process.stdin, stdout)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10.0)
