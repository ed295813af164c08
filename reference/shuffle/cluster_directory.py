"""The shuffle's coordination on the cluster-provider interface (docs/cluster.md, integration note).

Every task, and the driver for each open shuffle, is a node of one cluster. The driver's node holds
the shuffle's shard (created by its ``join_cluster``); every task joins that shard, so the shard log
is the shuffle's directory and each task sees it through notifications, never by asking.
Its keys and what they hold are listed in reference/shuffle/directory_keys.py.

An attempt is one run of the writers for the readers of one Spark stage (``stage``; None outside
Spark). A starting reader joins the oldest open attempt of its stage that lacks its id, else it
opens the next attempt; once the driver has decided whom an attempt serves it is closed, and a
later reader (the next partition of a task that reads several) opens a new one. Several stages
(two actions at once) each have their own open attempts.

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
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple

from reference.cluster.config import (DEFAULT, JOB_FAILURE_POLICY, SPARK_CONF_KEY, DriverCluster, failure_policy,
                                      open_backend, service_secret)
from reference.shuffle.attempt_launches import AttemptLaunches, Launcher
from reference.shuffle.directory_errors import (ClusterCoordinationError, ClusterUnreachable, ReaderNodeFailed,
                                                WriterNodeFailed, provider_errors)
from reference.shuffle.directory_keys import (attempt_key, attempts_record, failure_key, readers_prefix, retired_key,
                                              served_key, writers_prefix)
from reference.shuffle.shard_view import ShardView, TaskEntry
from reference.shuffle.shard_writes import write_entry
from spec.cluster.detector import FailurePolicy
from spec.cluster.errors import ClusterError
from spec.cluster.interface import ClusterBackend, ClusterProvider
from spec.cluster.types import Entry, NodeId, NodeState, ShardId
from spec.shuffle import coordination
from spec.shuffle.errors import ShuffleError

log = logging.getLogger(__name__)


class AttemptReaders(NamedTuple):
    """The readers that joined an attempt, and the stage they run in (None outside Spark)."""

    stage: int | None
    readers: frozenset[int]


class ClusterDirectory:
    """A task's :class:`~spec.shuffle.coordination.ShuffleDirectory` (and ``join``) on its own node.

    ``shard=None`` makes the node the holder of a new shard (the driver's side of one shuffle);
    ``launcher`` is then called, on a thread of its own, once for each new attempt a reader starts.
    """

    def __init__(self, backend: ClusterBackend, name: str, shard: ShardId | None = None, *,
                 launcher: Launcher | None = None, address: str = "", owns_backend: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._launches = None if launcher is None else AttemptLaunches(launcher)
        self._backend = backend if owns_backend else None
        self.view = ShardView(None if self._launches is None else self._launches.on_entry, clock)
        self._suspected: set[str] = set()
        self.node_id = NodeId(f"{name}-{uuid.uuid4().hex[:12]}")
        with provider_errors(f"node {self.node_id} could not join the shuffle's shard {shard}"):
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
        with provider_errors(f"cluster provider {url} unreachable"):
            backend = open_backend(url)
        try:
            return cls(backend, name, shard, owns_backend=True, address=address)
        except BaseException:
            backend.close()
            raise

    # -- writes: every one a compare-and-swap (reference/shuffle/shard_writes.py) ---------------------

    def _update(self, key: str, change: Callable[[Entry | None], bytes | None]) -> None:
        write_entry(self.provider, self.view, key, change)

    def register(self, key: coordination.ShuffleKey, writer: coordination.WriterLocation) -> None:
        """An insert; a retried writer task replaces its earlier attempt's location."""
        record = {"executor": writer.executor, "host": writer.host, "port": writer.port, "node": self.node_id}
        self._update(writers_prefix(key) + str(writer.writer_id), lambda _: json.dumps(record).encode())

    def unregister(self, key: coordination.ShuffleKey, writer_id: int) -> None:
        """Disable the entry (an empty value: the interface has no delete)."""
        self._update(writers_prefix(key) + str(writer_id), lambda e: b"" if e is not None and e.value else None)

    def report_failure(self, key: coordination.ShuffleKey, role: coordination.Role, task: int, description: str) -> None:
        """Keep the first failure only: later ones are usually consequences of it."""
        text = coordination.failure_text(role, task, description).encode()
        self._update(failure_key(key), lambda e: text if e is None or not e.value else None)

    def retire(self, key: coordination.ShuffleKey) -> None:
        """Nobody reads the attempt any more: its tasks end quietly (the driver's call)."""
        self._update(retired_key(key), lambda e: b"retired" if e is None else None)

    def join(self, shuffle_id: int, reader_id: int, stage: int | None = None) -> int:
        """The attempt a starting reader of ``stage`` belongs to: the oldest open one of its stage
        that lacks ``reader_id``, else a new one. The reader's node and stage are recorded under the
        attempt so the other tasks watch its health and the driver knows whom the run serves."""
        chosen = [-1]

        def enter(current: Entry | None) -> bytes:
            state = attempts_record(current)
            run = next((r for r in state["open"] if r["stage"] == stage and reader_id not in r["readers"]), None)
            if run is None:
                run = {"attempt": state["next"], "stage": stage, "readers": []}
                state["next"] += 1
                state["open"].append(run)
            run["readers"].append(reader_id)
            chosen[0] = run["attempt"]
            return json.dumps(state).encode()

        self._update(attempt_key(shuffle_id), enter)
        record = json.dumps({"node": self.node_id, "stage": stage}).encode()
        self._update(readers_prefix(coordination.ShuffleKey(shuffle_id, chosen[0])) + str(reader_id), lambda _: record)
        return chosen[0]

    def reader_done(self, key: coordination.ShuffleKey, reader_id: int) -> None:
        """Reader ``reader_id`` reads no more of attempt ``key``: it has all its data, or its consumer
        stopped early (``take``) perhaps before it ever connected to some writers, which only the
        attempt's retirement can then end."""
        def done(current: Entry | None) -> bytes | None:
            record = json.loads(current.value) if current is not None and current.value else None
            if record is None or record.get("done"):
                return None
            return json.dumps({**record, "done": True}).encode()

        self._update(readers_prefix(key) + str(reader_id), done)

    def decide(self, key: coordination.ShuffleKey) -> frozenset[int] | None:
        """Close the open attempt ``key`` to new readers and record whom it serves (the driver's call):
        the readers that joined it; None when it is not open."""
        served: list[frozenset[int] | None] = [None]

        def close(current: Entry | None) -> bytes | None:
            state = attempts_record(current)
            run = next((r for r in state["open"] if r["attempt"] == key.attempt), None)
            served[0] = None if run is None else frozenset(run["readers"])
            if run is None:
                return None
            state["open"].remove(run)
            return json.dumps(state).encode()

        self._update(attempt_key(key.shuffle_id), close)
        if served[0] is not None:
            readers = sorted(served[0])
            self._update(served_key(key), lambda _: json.dumps(readers).encode())
        return served[0]

    # -- reads: the notified view only ------------------------------------------------------------

    def lookup(self, key: coordination.ShuffleKey) -> coordination.Writers:
        """Writers registered so far and the first failure.

        Raises WriterNodeFailed / ReaderNodeFailed when a task of the attempt is on a FAIL node, and
        ClusterUnreachable when this node has been cut off past the provider's failure bound.
        """
        self._check_own_node()
        writers = self.view.writers(key)
        locations = []
        for w in writers:  # a lost writer first: when a host dies, its lost data is the root cause
            self._check_node(w, lambda: WriterNodeFailed(key, w.task_id, w.node, w.record["executor"]), "writer")
            locations.append(coordination.WriterLocation(w.task_id, w.record["executor"], w.record["host"], w.record["port"]))
        for reader in self.view.readers(key):
            self._check_node(reader, lambda: ReaderNodeFailed(key, reader.task_id, reader.node), "reader")
        failure = self.view.entry(failure_key(key))
        if failure is not None:
            state: coordination.AttemptState | coordination.AttemptFailure = \
                coordination.AttemptFailure(failure.value.decode())
        elif self.view.entry(retired_key(key)) is not None:
            state = coordination.AttemptState.RETIRED
        else:
            state = coordination.AttemptState.RUNNING
        return coordination.Writers(tuple(locations), state)

    def open_attempt(self, key: coordination.ShuffleKey) -> AttemptReaders | None:
        """The stage and readers of attempt ``key`` while it is open (None once decided)."""
        state = attempts_record(self.view.entry(attempt_key(key.shuffle_id)))
        run = next((r for r in state["open"] if r["attempt"] == key.attempt), None)
        return None if run is None else AttemptReaders(run["stage"], frozenset(run["readers"]))

    def served(self, key: coordination.ShuffleKey) -> frozenset[int] | None:
        """The readers attempt ``key`` serves, once the driver decided (None before)."""
        entry = self.view.entry(served_key(key))
        return None if entry is None else frozenset(json.loads(entry.value))

    def readers_done(self, key: coordination.ShuffleKey) -> frozenset[int]:
        """The readers of attempt ``key`` that read no more, as this node was notified."""
        return frozenset(r.task_id for r in self.view.readers(key) if r.record.get("done"))

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
            current = self.view.entry(attempt_key(shuffle_id))
            if current is not None:
                key = coordination.ShuffleKey(shuffle_id, int(attempts_record(current)["next"]) - 1)
                failure = self.view.entry(failure_key(key))
                if failure is not None or time.monotonic() >= deadline:
                    return failure.value.decode() if failure is not None else ""
            elif time.monotonic() >= deadline:
                return ""
            time.sleep(0.02)

    def close(self) -> None:
        """Leave gracefully (a finished task is not a failure); the shard holder also removes the
        shard's FAIL nodes, so the shard and its log are destroyed with their last member."""
        try:
            if self._launches is not None:
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
class DirectoryAddress:
    """What a task needs to reach its shuffle's directory; picklable, shipped in the task's closure."""

    url: str
    shard: ShardId

    def open(self, role: coordination.Role, task: int, host: str = "") -> ClusterDirectory:
        return ClusterDirectory.connect(self.url, self.shard, f"{role.name.lower()}{task}", host)


class DriverDirectory:
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

    def add_shuffle(self, shuffle_id: int, launcher: Launcher) -> DirectoryAddress:
        holder = ClusterDirectory(self.backend, f"driver-shuffle{shuffle_id}", launcher=launcher)
        with self._lock:
            previous = self._shuffles.pop(shuffle_id, None)
            self._shuffles[shuffle_id] = holder
        if previous is not None:
            previous.close()
        return DirectoryAddress(self.task_url, holder.shard)

    def open_shuffles(self) -> list[int]:
        with self._lock:
            return sorted(self._shuffles)

    def directory(self, shuffle_id: int) -> ClusterDirectory:
        """The driver's own node of an open shuffle (it reports the driver's failures)."""
        with self._lock:
            return self._shuffles[shuffle_id]

    def report_failure(self, key: coordination.ShuffleKey, role: coordination.Role, task: int, description: str) -> None:
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


def driver_directory_from_conf(conf: Mapping[str, str], host: str = "127.0.0.1") -> DriverDirectory:
    """The driver's directory for ``spark.streamwire.cluster.provider`` (in-process by default)."""
    return DriverDirectory(conf.get(SPARK_CONF_KEY, DEFAULT), host, service_secret(conf), failure_policy(conf))
