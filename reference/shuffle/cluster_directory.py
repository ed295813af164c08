"""The shuffle's coordination on the cluster-provider interface (docs/cluster.md, integration note).

Every task, and the driver for each open shuffle, is a node of one cluster. The driver's node holds
the shuffle's shard (created by its ``join_cluster``); every task joins that shard, so the shard log
is the shuffle's directory and each task sees it through notifications, never by asking:

====================================  ===================================================================
shard-log key                         value
====================================  ===================================================================
``shuffle/<id>/attempt``              JSON ``{"attempt", "stage", "readers"}``; a reader's join is a CAS on it
``shuffle/<id>/<attempt>/writer/<w>`` JSON ``{"executor", "host", "port", "node"}``; empty = unregistered
``shuffle/<id>/<attempt>/reader/<r>`` JSON ``{"node", "stage"}``: a reader that joined the attempt
``shuffle/<id>/<attempt>/failure``    the attempt's first failure (an insert: the first report wins)
``shuffle/<id>/<attempt>/retired``    present once the driver retired the attempt (nobody reads it)
====================================  ===================================================================

An attempt is one run of the writers for the readers of one Spark stage (``stage``; None outside
Spark): a reader of another stage, or one the attempt has already seen, starts the next attempt.

Every task keeps the latest membership and acts on the health of the attempt's other nodes
(docs/shuffle-runtime.md, "Node health"): a registered writer or a joined reader whose node the
provider declares FAIL makes ``lookup`` raise :class:`WriterNodeFailed` / :class:`ReaderNodeFailed`
(naming the task and its node), so every other task stops within the backend's
``timing.fail_bound`` (plus one task poll) instead of waiting on a socket that will never deliver.
PFAIL (a local suspicion) is logged once per node and changes nothing. A task whose own node is cut
off from the provider (``cluster_down``) keeps streaming on its connections until the others must
have been told it is FAIL (``fail_bound`` after its last renewal), then ``lookup`` raises
:class:`ClusterUnreachable`; a renewal before that clears it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterator, Mapping, NamedTuple, Sequence

from reference.cluster.config import (DEFAULT, JOB_FAILURE_POLICY, SPARK_CONF_KEY, DriverCluster, failure_policy,
                                      open_backend, service_secret)
from spec.cluster.detector import FailurePolicy
from spec.cluster.errors import ClusterError, RevisionMismatch
from spec.cluster.interface import ClusterBackend, ClusterProvider
from spec.cluster.types import Entry, Membership, MetadataOp, NodeId, NodeInfo, NodeState, ShardId
from spec.shuffle import coordination as co
from spec.shuffle.errors import ShuffleError

Launcher = Callable[[co.ShuffleKey], None]
"""Starts the writers of a new attempt (runs on its own thread in the driver)."""

CAS_ATTEMPTS: Final = 32
"""Writes retried against the revision actually found; more conflicts than this is a coordination error."""

log = logging.getLogger(__name__)


class WriterNodeFailed(ShuffleError):
    """A registered writer's cluster node was declared FAIL: its streams can never complete."""

    condition = "STREAMING_SHUFFLE_WRITER_NODE_FAILED"

    def __init__(self, key: co.ShuffleKey, writer_id: int, node: str, executor: str) -> None:
        super().__init__(
            f"writer {writer_id} of shuffle {key.shuffle_id} (attempt {key.attempt}) ran on cluster node "
            f"{node} (executor {executor}), which the cluster provider declared FAIL; its streams cannot complete",
            shuffleId=key.shuffle_id, attempt=key.attempt, writerId=writer_id, node=node, executor=executor)
        self.key, self.writer_id, self.node, self.executor = key, writer_id, node, executor


class ReaderNodeFailed(ShuffleError):
    """A joined reader's cluster node was declared FAIL: the writers can never complete its stream."""

    condition = "STREAMING_SHUFFLE_READER_NODE_FAILED"

    def __init__(self, key: co.ShuffleKey, reader_id: int, node: str) -> None:
        super().__init__(
            f"reader {reader_id} of shuffle {key.shuffle_id} (attempt {key.attempt}) ran on cluster node "
            f"{node}, which the cluster provider declared FAIL; no writer can complete its stream",
            shuffleId=key.shuffle_id, attempt=key.attempt, readerId=reader_id, node=node)
        self.key, self.reader_id, self.node = key, reader_id, node


class ClusterUnreachable(ShuffleError):
    """This task's own node has been cut off from the cluster provider for longer than the others
    need to declare it FAIL: they have stopped, and no failure report can reach it any more."""

    condition = "STREAMING_SHUFFLE_CLUSTER_UNREACHABLE"

    def __init__(self, node: str, seconds: float, fail_bound: float) -> None:
        super().__init__(
            f"cluster node {node} has had no renewal from the cluster provider for {seconds:.1f} s, longer "
            f"than the provider's failure bound ({fail_bound:.1f} s): the other tasks consider this one failed",
            node=node, secondsCutOff=round(seconds, 3), failBound=fail_bound)
        self.node = node


class ClusterCoordinationError(co.CoordinationError):
    """A cluster-provider operation failed (its condition is in the message)."""

    condition = "STREAMING_SHUFFLE_COORDINATION_CLUSTER_ERROR"


@contextmanager
def _provider_errors(what: str) -> Iterator[None]:
    try:
        yield
    except ClusterError as error:
        raise ClusterCoordinationError(f"{what}: {error}", clusterCondition=error.condition) from error


def _attempt_key(shuffle_id: int) -> str:
    return f"shuffle/{shuffle_id}/attempt"


def _writers_prefix(key: co.ShuffleKey) -> str:
    return f"shuffle/{key.shuffle_id}/{key.attempt}/writer/"


def _readers_prefix(key: co.ShuffleKey) -> str:
    return f"shuffle/{key.shuffle_id}/{key.attempt}/reader/"


def _failure_key(key: co.ShuffleKey) -> str:
    return f"shuffle/{key.shuffle_id}/{key.attempt}/failure"


def _retired_key(key: co.ShuffleKey) -> str:
    return f"shuffle/{key.shuffle_id}/{key.attempt}/retired"


class AttemptReaders(NamedTuple):
    """The readers that joined an attempt, and the stage they run in (None outside Spark)."""

    stage: int | None
    readers: frozenset[int]


class TaskEntry(NamedTuple):
    """A task's shard-log record (a writer's location or a reader's node) and its node's health."""

    task_id: int
    record: dict[str, Any]
    state: NodeState | None
    """None once the node has left the cluster (a finished task leaves gracefully)."""
    address: str
    """The node's address in the membership (the task's host; "" when unknown or gone)."""

    @property
    def node(self) -> str:
        return str(self.record["node"])


class ShardView:
    """A node's Core: the newest entry of each shard-log key and the latest membership, as notified."""

    def __init__(self, on_entry: Callable[[Entry], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._log: dict[str, Entry] = {}
        self._membership: Membership | None = None
        self._nodes: dict[NodeId, NodeInfo] = {}
        self._on_entry = on_entry
        self._clock = clock
        self._renewed = clock()
        self._down = False

    def update_membership(self, snapshot: Membership) -> None:
        with self._lock:
            if self._membership is None or snapshot.epoch >= self._membership.epoch:
                self._membership, self._nodes = snapshot, snapshot.nodes()

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        """The shuffle keeps everything in its shard's log."""

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        fresh = self._keep(entries)
        if self._on_entry is not None:
            for entry in fresh:
                self._on_entry(entry)

    def remember(self, entry: Entry) -> None:
        """This node's own committed write, before its notification arrives (read your writes)."""
        self._keep([entry])

    def _keep(self, entries: Sequence[Entry]) -> list[Entry]:
        """Keep the newer entries (catch-ups and own writes may repeat, Q3); return those kept."""
        fresh = []
        with self._lock:
            for entry in entries:
                known = self._log.get(entry.key)
                if known is None or entry.revision > known.revision:
                    self._log[entry.key] = entry
                    fresh.append(entry)
        return fresh

    def cluster_heartbeat(self, ttl: float) -> None:
        """A renewal: this node is in the cluster again (or still)."""
        with self._lock:
            self._renewed, self._down = self._clock(), False

    def cluster_down(self) -> None:
        """Cut off: the task keeps streaming until ``cut_off_for`` exceeds the provider's bound."""
        with self._lock:
            self._down = True

    def cut_off_for(self) -> float | None:
        """Seconds since the last renewal while the provider says this node is down; None when up."""
        with self._lock:
            return self._clock() - self._renewed if self._down else None

    def entry(self, key: str) -> Entry | None:
        with self._lock:
            return self._log.get(key)

    def writers(self, key: co.ShuffleKey) -> list[TaskEntry]:
        """Registered writers of an attempt, by writer id."""
        return self._tasks(_writers_prefix(key))

    def readers(self, key: co.ShuffleKey) -> list[TaskEntry]:
        """Readers that joined an attempt, by reader id."""
        return self._tasks(_readers_prefix(key))

    def _tasks(self, prefix: str) -> list[TaskEntry]:
        with self._lock:
            out = []
            for name, entry in self._log.items():
                if name.startswith(prefix) and entry.value:
                    record = json.loads(entry.value)
                    info = self._nodes.get(NodeId(record["node"]))
                    out.append(TaskEntry(int(name[len(prefix):]), record, None if info is None else info.state,
                                         "" if info is None else info.address))
            return sorted(out)

    def failed_members(self, shard: ShardId) -> list[NodeId]:
        with self._lock:
            members = () if self._membership is None else self._membership.shards.get(shard, ())
            return [n.node_id for n in members if n.state is NodeState.FAIL]


class ClusterDirectory:
    """A task's :class:`~spec.shuffle.coordination.ShuffleDirectory` (and ``join``) on its own node.

    ``shard=None`` makes the node the holder of a new shard (the driver's side of one shuffle);
    ``launcher`` is then called, on a thread of its own, once for each new attempt a reader starts.
    """

    def __init__(self, backend: ClusterBackend, name: str, shard: ShardId | None = None, *,
                 launcher: Launcher | None = None, address: str = "", owns_backend: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._launcher = launcher
        self._launched = -1
        self._backend = backend if owns_backend else None
        self.view = ShardView(self._on_entry if launcher is not None else None, clock)
        self._suspected: set[str] = set()
        self.node_id = NodeId(f"{name}-{uuid.uuid4().hex[:12]}")
        with _provider_errors(f"node {self.node_id} could not join the shuffle's shard {shard}"):
            self.provider: ClusterProvider = backend.open_node(self.node_id, self.view)
            try:
                created = self.provider.join_cluster(address)
                if shard is not None:
                    self.provider.join_shard(shard)
            except BaseException:
                self.provider.close()
                raise
        self.shard = created if shard is None else shard

    @classmethod
    def connect(cls, url: str, shard: ShardId, name: str, address: str = "") -> ClusterDirectory:
        """A task's directory in another process (an executor): ``url`` is what ``open_backend`` takes;
        ``address`` (the task's host) becomes its node's address in the membership."""
        with _provider_errors(f"cluster provider {url} unreachable"):
            backend = open_backend(url)
        try:
            return cls(backend, name, shard, owns_backend=True, address=address)
        except BaseException:
            backend.close()
            raise

    # -- writes: every one a CAS on the revision last seen, retried on the one actually found -----

    def _update(self, key: str, change: Callable[[Entry | None], bytes | None]) -> None:
        """Write ``change(current)`` unless it is None (nothing to change).

        A committed write enters this node's view at once, not when its notification arrives: the
        next write (a writer failing right after it registered unregisters at once) must not
        decide on a view that lacks this node's own last write, or it changes nothing.
        """
        current = self.view.entry(key)
        for _ in range(CAS_ATTEMPTS):
            value = change(current)
            if value is None:
                return
            try:
                revision = self.provider.update_shard_log(
                    [MetadataOp(key=key, value=value, expected=None if current is None else current.revision)])
                self.view.remember(Entry(key=key, value=value, revision=revision))
                return
            except RevisionMismatch as mismatch:
                current = mismatch.actual
            except ClusterError as error:
                raise ClusterCoordinationError(f"update of {key}: {error}", clusterCondition=error.condition) from error
        raise ClusterCoordinationError(f"{key} kept changing under {CAS_ATTEMPTS} compare-and-swap attempts")

    def register(self, key: co.ShuffleKey, writer: co.WriterLocation) -> None:
        """An insert; a retried writer task replaces its earlier attempt's location."""
        record = {"executor": writer.executor, "host": writer.host, "port": writer.port, "node": self.node_id}
        self._update(_writers_prefix(key) + str(writer.writer_id), lambda _: json.dumps(record).encode())

    def unregister(self, key: co.ShuffleKey, writer_id: int) -> None:
        """Disable the entry (an empty value: the interface has no delete)."""
        self._update(_writers_prefix(key) + str(writer_id), lambda e: b"" if e is not None and e.value else None)

    def report_failure(self, key: co.ShuffleKey, role: co.Role, task: int, description: str) -> None:
        """Keep the first failure only: later ones are usually consequences of it."""
        text = co.failure_text(role, task, description).encode()
        self._update(_failure_key(key), lambda e: text if e is None or not e.value else None)

    def retire(self, key: co.ShuffleKey) -> None:
        """Nobody reads the attempt any more: its tasks end quietly (the driver's call)."""
        self._update(_retired_key(key), lambda e: b"retired" if e is None else None)

    def join(self, shuffle_id: int, reader_id: int, stage: int | None = None) -> int:
        """The attempt a starting reader of ``stage`` belongs to (a reader seen twice, or one of
        another stage, starts a new run); the reader's node and stage are recorded under the attempt
        so the other tasks watch its health and the driver knows whom the run serves."""
        chosen = [-1]

        def enter(current: Entry | None) -> bytes:
            attempt, readers, current_stage = -1, [], None
            if current is not None:
                state = json.loads(current.value)
                attempt, readers = int(state["attempt"]), [int(r) for r in state["readers"]]
                current_stage = state.get("stage")
            if attempt < 0 or reader_id in readers or stage != current_stage:
                attempt, readers = attempt + 1, []
            chosen[0] = attempt
            return json.dumps({"attempt": attempt, "stage": stage, "readers": readers + [reader_id]}).encode()

        self._update(_attempt_key(shuffle_id), enter)
        record = json.dumps({"node": self.node_id, "stage": stage}).encode()
        self._update(_readers_prefix(co.ShuffleKey(shuffle_id, chosen[0])) + str(reader_id), lambda _: record)
        return chosen[0]

    # -- reads: the notified view only ------------------------------------------------------------

    def lookup(self, key: co.ShuffleKey) -> co.Writers:
        """Writers registered so far and the first failure.

        Raises WriterNodeFailed / ReaderNodeFailed when a task of the attempt is on a FAIL node, and
        ClusterUnreachable when this node has been cut off past the provider's failure bound.
        """
        self._check_own_node()
        writers = self.view.writers(key)
        locations = []
        for w in writers:  # a lost writer first: when a host dies, its lost data is the root cause
            self._check_node(w, lambda: WriterNodeFailed(key, w.task_id, w.node, w.record["executor"]), "writer")
            locations.append(co.WriterLocation(w.task_id, w.record["executor"], w.record["host"], w.record["port"]))
        for reader in self.view.readers(key):
            self._check_node(reader, lambda: ReaderNodeFailed(key, reader.task_id, reader.node), "reader")
        failure = self.view.entry(_failure_key(key))
        return co.Writers(failure.value.decode() if failure is not None else "", tuple(locations),
                          retired=self.view.entry(_retired_key(key)) is not None)

    def attempt_readers(self, key: co.ShuffleKey) -> AttemptReaders:
        """Who joined the attempt so far (as this node was notified), and their stage."""
        joined = self.view.readers(key)
        stage = joined[0].record.get("stage") if joined else None
        return AttemptReaders(stage, frozenset(r.task_id for r in joined))

    def _check_node(self, task: TaskEntry, failed: Callable[[], ShuffleError], role: str) -> None:
        """FAIL ends the attempt; PFAIL is only a suspicion of one node: logged once, no action."""
        if task.state is NodeState.FAIL:
            raise failed()
        if task.state is NodeState.PFAIL and task.node not in self._suspected:
            self._suspected.add(task.node)
            log.warning("streaming shuffle: node %s of %s %d is suspected (PFAIL); its tasks keep running "
                        "unless the cluster provider declares it FAIL", task.node, role, task.task_id)

    def _check_own_node(self) -> None:
        cut_off = self.view.cut_off_for()
        if cut_off is not None:
            bound = self.provider.timing.fail_bound
            if cut_off >= bound:
                raise ClusterUnreachable(self.node_id, cut_off, bound)

    def latest_failure(self, shuffle_id: int, wait_s: float) -> str:
        """The first failure of the shuffle's latest attempt ("" if none), waiting up to ``wait_s``
        for this node's catch-up of the shard log (a retried task opens a fresh node)."""
        deadline = time.monotonic() + wait_s
        while True:
            current = self.view.entry(_attempt_key(shuffle_id))
            if current is not None:
                key = co.ShuffleKey(shuffle_id, int(json.loads(current.value)["attempt"]))
                failure = self.view.entry(_failure_key(key))
                if failure is not None or time.monotonic() >= deadline:
                    return failure.value.decode() if failure is not None else ""
            elif time.monotonic() >= deadline:
                return ""
            time.sleep(0.02)

    def _on_entry(self, entry: Entry) -> None:
        """On the driver's node: start the writers of each new attempt (off the callback thread)."""
        if not entry.key.endswith("/attempt") or not entry.value:
            return
        attempt = int(json.loads(entry.value)["attempt"])
        if attempt <= self._launched or self._launcher is None:
            return
        self._launched = attempt
        shuffle_id = int(entry.key.split("/")[1])
        threading.Thread(target=self._launcher, args=(co.ShuffleKey(shuffle_id, attempt),),
                         name=f"shuffle-launch-{shuffle_id}-{attempt}", daemon=True).start()

    def close(self) -> None:
        """Leave gracefully (a finished task is not a failure); the shard holder also removes the
        shard's FAIL nodes, so the shard and its log are destroyed with their last member."""
        try:
            if self._launcher is not None:
                for node in self.view.failed_members(self.shard):
                    self.provider.remove_from_cluster(node)
            self.provider.remove_from_cluster(self.node_id)
        except ClusterError:
            pass  # closed or cut off: the others see this node FAIL, which is the truth
        finally:
            self.provider.close()
            if self._backend is not None:
                self._backend.close()


@dataclass(frozen=True)
class ShuffleShard:
    """What a task needs to reach its shuffle's directory; picklable, shipped in the task's closure."""

    url: str
    shard: ShardId

    def open(self, role: co.Role, task: int, host: str = "") -> ClusterDirectory:
        return ClusterDirectory.connect(self.url, self.shard, f"{role.name.lower()}{task}", host)


class ClusterCoordinator:
    """The driver's side: the chosen backend, and one shard-holding node per open shuffle.

    ``memory`` hosts the in-process cluster in the driver behind the cluster service (executors
    reach it at ``tcp://``); other settings name a backend every process opens itself.
    """

    def __init__(self, setting: str = DEFAULT, host: str = "127.0.0.1", secret: str | None = None,
                 policy: FailurePolicy = JOB_FAILURE_POLICY) -> None:
        self._cluster = DriverCluster(setting, host, secret, policy)
        self.backend: ClusterBackend = self._cluster.backend
        self.task_url = self._cluster.executor_url
        """What tasks in other processes give ``open_backend``."""
        self._lock = threading.Lock()
        self._shuffles: dict[int, ClusterDirectory] = {}

    def add_shuffle(self, shuffle_id: int, launcher: Launcher) -> ShuffleShard:
        holder = ClusterDirectory(self.backend, f"driver-shuffle{shuffle_id}", launcher=launcher)
        with self._lock:
            previous = self._shuffles.pop(shuffle_id, None)
            self._shuffles[shuffle_id] = holder
        if previous is not None:
            previous.close()
        return ShuffleShard(self.task_url, holder.shard)

    def open_shuffles(self) -> list[int]:
        with self._lock:
            return sorted(self._shuffles)

    def directory(self, shuffle_id: int) -> ClusterDirectory:
        """The driver's own node of an open shuffle (it reports the driver's failures)."""
        with self._lock:
            return self._shuffles[shuffle_id]

    def report_failure(self, key: co.ShuffleKey, role: co.Role, task: int, description: str) -> None:
        """The driver's own failure (launching the writers); moot once the shuffle is closed."""
        with self._lock:
            holder = self._shuffles.get(key.shuffle_id)
        if holder is None:
            return
        try:
            holder.report_failure(key, role, task, description)
        except ClusterCoordinationError:
            pass  # closed meanwhile, or the cluster is gone: no task is left to tell

    def remove_shuffle(self, shuffle_id: int) -> None:
        with self._lock:
            holder = self._shuffles.pop(shuffle_id, None)
        if holder is not None:
            holder.close()

    def stop(self) -> None:
        with self._lock:
            holders, self._shuffles = list(self._shuffles.values()), {}
        for holder in holders:
            holder.close()
        self._cluster.close()


def directory_from_conf(conf: Mapping[str, str], host: str = "127.0.0.1") -> ClusterCoordinator:
    """The driver's coordinator for ``spark.streamwire.cluster.provider`` (in-process by default)."""
    return ClusterCoordinator(conf.get(SPARK_CONF_KEY, DEFAULT), host, service_secret(conf), failure_policy(conf))
