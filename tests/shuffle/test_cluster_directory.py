"""The shuffle coordinated through the cluster-provider interface, on every backend.

Three ways a task reaches the cluster: ``in-process`` (node handles on the driver's embedded
cluster), ``in-process-service`` (the same cluster through the driver-hosted TCP service, what
Spark executors use by default) and ``etcd`` (a real etcd on loopback, each task its own client,
as executors would). Every runtime test of ``test_runtime.py`` that runs a shuffle is re-run here
on each of them, plus the checks specific to the cluster: the writer-node failure drill, attempts
and launches driven by shard-log notifications, and backend selection by configuration.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence, cast

import pytest
import test_runtime as runtime
from test_runtime import SMALL, no_leaks  # noqa: F401 - every test here must leave no thread or socket behind

from reference.cluster.config import FAIL_AFTER_CONF_KEY, SPARK_CONF_KEY
from reference.cluster.etcd import EtcdCluster
from conformance.cluster.etcd_server import EtcdServer
from reference.cluster.memory import InProcessCluster
from reference.shuffle.cluster_directory import (ClusterDirectory, DirectoryAddress, DriverDirectory,
                                                driver_directory_from_conf)
from reference.shuffle.directory_errors import ReaderNodeFailed, WriterNodeFailed
from reference.shuffle.local import LocalShuffleError
from reference.shuffle.task import PeerTaskFailed
from spec.cluster.interface import ClusterBackend, ClusterCore, ClusterProvider, FailureTiming
from spec.cluster.types import Entry, Membership, NodeId, NodeInfo, NodeState, ShardId
from spec.shuffle.coordination import (MAX_TEXT_BYTES, AttemptFailure, AttemptState, Role, ShuffleKey, WriterLocation,
                                      Writers)

DEADLINE_S = 30.0
"""Only to end a broken run; nothing here asserts on time."""

BACKENDS = ["in-process", "in-process-service", pytest.param("etcd", marks=pytest.mark.etcd)]


@dataclass
class ShuffleCluster:
    """A driver's coordinator with shuffle 0 open, and a directory factory for the harness's tasks."""

    coordinator: DriverDirectory
    shard: DirectoryAddress
    direct: bool
    """Tasks use the driver's backend object (in-process); otherwise each opens its own, from the URL."""
    opened: dict[tuple[Role, int], ClusterDirectory] = field(default_factory=dict)

    def directories(self, role: Role, task: int) -> ClusterDirectory:
        if self.direct:
            directory = ClusterDirectory(self.coordinator.backend, f"{role.name.lower()}{task}", self.shard.shard)
        else:
            directory = self.shard.open(role, task)
        self.opened[(role, task)] = directory
        return directory


def _conf(request: pytest.FixtureRequest) -> dict[str, str]:
    """No setting means the in-process cluster; etcd gets a namespace of its own per test."""
    if request.param != "etcd":
        return {}
    server: EtcdServer = request.getfixturevalue("etcd_server")
    return {SPARK_CONF_KEY: f"etcd://127.0.0.1:{server.client_port}/shuffle-{uuid.uuid4().hex[:8]}"}


@pytest.fixture
def failure_conf() -> dict[str, str]:
    """The driver-hosted cluster's failure timing: a job's (a node is FAIL after 5 s of silence)."""
    return {}


QUICK_FAIL = pytest.mark.parametrize("failure_conf", [{FAIL_AFTER_CONF_KEY: "2000"}], ids=["fail-after-2s"])
"""For a drill that waits for a node's FAIL: 2 s of silence (live nodes renew every 0.5 s, as in a job) instead
of 5, so the drill waits 3 s less; the in-process cluster's own default is 1 s."""


@pytest.fixture(params=BACKENDS)
def cluster(request: pytest.FixtureRequest, no_leaks: None, failure_conf: dict[str, str]) -> Iterator[ShuffleCluster]:
    coordinator = driver_directory_from_conf({**_conf(request), **failure_conf})
    try:
        shard = coordinator.add_shuffle(0, lambda key: None)
        yield ShuffleCluster(coordinator, shard, direct=request.param == "in-process")
    finally:
        coordinator.stop()


@pytest.fixture(autouse=True)
def runtime_on_cluster(cluster: ShuffleCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime tests below run their shuffles with this backend's directories."""
    monkeypatch.setattr(runtime, "run_local_shuffle", functools.partial(runtime.run_local_shuffle,
                                                                         directories=cluster.directories))


# Every runtime test that runs a shuffle, collected again here (with its parameters) for each backend.
globals().update({name: test for name, test in vars(runtime).items()
                  if name.startswith("test_") and "run_local_shuffle" in test.__code__.co_names})


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S} s"
        time.sleep(0.01)


# -- the drill: a writer's node stops heartbeating mid-stream -------------------------------------

@QUICK_FAIL
def test_writer_node_failure_fails_its_readers_with_the_writer_and_node(cluster: ShuffleCluster) -> None:
    """Writer 0's node handle is closed mid-stream (a crash of its heartbeats) while the task itself
    keeps its sockets open and keeps streaming: only the provider's FAIL can end its readers, and
    they fail with WriterNodeFailed naming writer 0 and its node, within ``timing.fail_bound``."""
    readers = 2
    received: list[list[bytes]] = [[] for _ in range(readers)]
    heartbeats_killed = threading.Event()

    def doomed() -> Iterator[tuple[int, bytes]]:
        i = 0
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:  # endless input: the task stops it when it fails
            if i == 200:
                cluster.opened[(Role.WRITER, 0)].provider.close()
                heartbeats_killed.set()
            yield i % readers, b"doomed:%d" % i
            i += 1
            time.sleep(0.001)

    def consume(reader_id: int, records: Iterable[bytes]) -> list[bytes]:
        for record in records:
            received[reader_id].append(record)
        return received[reader_id]

    healthy = [(i % readers, b"healthy:%d" % i) for i in range(100)]
    with pytest.raises(LocalShuffleError) as failed:
        runtime.run_local_shuffle([doomed(), healthy], readers, SMALL, consume=consume, directories=cluster.directories,
                                  timeout_s=DEADLINE_S + 30)

    assert heartbeats_killed.is_set()
    node = cluster.opened[(Role.WRITER, 0)].node_id
    for reader_id in range(readers):
        error = failed.value.errors[("reader", reader_id)]
        assert isinstance(error, WriterNodeFailed), repr(error)
        assert (error.writer_id, error.node, error.key) == (0, node, ShuffleKey(0, 0))
        assert error.condition == "STREAMING_SHUFFLE_WRITER_NODE_FAILED"
        assert "writer 0 " in str(error) and node in str(error)
        assert any(r.startswith(b"doomed:") for r in received[reader_id]), "the failure was not mid-stream"
    assert ("writer", 0) in failed.value.errors  # its readers hung up on it


@QUICK_FAIL
def test_reader_node_failure_fails_every_task_with_the_reader_and_node(cluster: ShuffleCluster) -> None:
    """Reader 1's node handle is closed mid-stream while the task keeps reading: the provider's FAIL
    ends the writers that serve it (they stream endlessly otherwise) and the other reader, each
    naming reader 1 and its node, directly or as the root cause a peer reported."""
    readers = 2
    heartbeats_killed = threading.Event()

    def joined(role: Role, task: int) -> ClusterDirectory:
        directory = cluster.directories(role, task)
        if role is Role.READER:
            assert directory.join(0, task) == 0  # what a Spark reader task does first
        return directory

    def endless(writer_id: int) -> Iterator[tuple[int, bytes]]:
        deadline = time.monotonic() + DEADLINE_S
        i = 0
        while time.monotonic() < deadline:  # the task stops it when it fails
            yield i % readers, b"%d:%d" % (writer_id, i)
            i += 1
            time.sleep(0.001)

    def consume(reader_id: int, records: Iterable[bytes]) -> list[bytes]:
        got = []
        for record in records:
            got.append(record)
            if reader_id == 1 and len(got) == 100:
                cluster.opened[(Role.READER, 1)].provider.close()
                heartbeats_killed.set()
        return got

    with pytest.raises(LocalShuffleError) as failed:
        runtime.run_local_shuffle([endless(0), endless(1)], readers, SMALL, consume=consume, directories=joined,
                                  timeout_s=DEADLINE_S + 30)

    assert heartbeats_killed.is_set()
    node = cluster.opened[(Role.READER, 1)].node_id
    for writer_id in range(2):
        error = failed.value.errors[("writer", writer_id)]
        assert isinstance(error, (ReaderNodeFailed, PeerTaskFailed)), repr(error)
        assert "STREAMING_SHUFFLE_READER_NODE_FAILED" in str(error) and "reader 1 " in str(error), str(error)
        assert node in str(error)
    direct = [e for e in failed.value.errors.values() if isinstance(e, ReaderNodeFailed)]
    assert direct, "no task saw the FAIL itself"
    assert all((e.reader_id, e.node, e.key) == (1, node, ShuffleKey(0, 0)) for e in direct)
    assert all(e.condition == "STREAMING_SHUFFLE_READER_NODE_FAILED" for e in direct)


def test_a_suspected_node_is_logged_once_and_only_a_failed_one_ends_the_attempt(
        cluster: ShuffleCluster, caplog: pytest.LogCaptureFixture) -> None:
    """PFAIL is one node's local suspicion (docs/shuffle-runtime.md): a warning, no failure."""
    key = ShuffleKey(0, 0)
    writer = cluster.directories(Role.WRITER, 2)
    reader = cluster.directories(Role.READER, 0)
    try:
        writer.register(key, WriterLocation(2, "exec-1", "127.0.0.1", 4002))
        _wait_until(lambda: len(reader.lookup(key).writers) == 1, "registration")

        def health(state: NodeState, epoch: int) -> None:
            # as the provider pushes it; epochs far ahead, so the real snapshots do not interfere
            reader.view.update_membership(Membership(epoch=10**9 + epoch, shards={
                cluster.shard.shard: (NodeInfo(node_id=writer.node_id, address="", state=state),
                                      NodeInfo(node_id=reader.node_id, address="", state=NodeState.OK))}))

        health(NodeState.PFAIL, 0)
        with caplog.at_level(logging.WARNING, logger="reference.shuffle.cluster_directory"):
            assert len(reader.lookup(key).writers) == 1
            assert len(reader.lookup(key).writers) == 1
        warnings = [r.getMessage() for r in caplog.records if writer.node_id in r.getMessage()]
        assert len(warnings) == 1 and "PFAIL" in warnings[0] and "writer 2" in warnings[0]
        health(NodeState.FAIL, 1)
        with pytest.raises(WriterNodeFailed):
            reader.lookup(key)
    finally:
        writer.close()
        reader.close()


# -- coordination on the shard log ----------------------------------------------------------------

def test_locations_arrive_by_notification_and_a_retried_writer_replaces_its_entry(cluster: ShuffleCluster) -> None:
    key = ShuffleKey(0, 0)
    writer = cluster.directories(Role.WRITER, 4)
    reader = cluster.directories(Role.READER, 0)
    try:
        writer.register(key, WriterLocation(4, "exec-1", "127.0.0.1", 4001))
        _wait_until(lambda: reader.lookup(key).writers == (WriterLocation(4, "exec-1", "127.0.0.1", 4001),),
                    "first location")
        retry = cluster.directories(Role.WRITER, 4)  # a second attempt of the same task
        try:
            retry.register(key, WriterLocation(4, "exec-2", "127.0.0.1", 4002))
            _wait_until(lambda: reader.lookup(key).writers == (WriterLocation(4, "exec-2", "127.0.0.1", 4002),),
                        "retried location")
            retry.unregister(key, 4)
            _wait_until(lambda: reader.lookup(key).writers == (), "unregistration")
        finally:
            retry.close()
        assert reader.lookup(ShuffleKey(0, 1)) == Writers(())  # attempts are separate
    finally:
        writer.close()
        reader.close()


class LateNotifications:
    """A backend whose nodes get no shard-log notification until ``release``: a slow provider."""

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend
        self.held: list[tuple[ClusterCore, ShardId, Sequence[Entry]]] = []

    @property
    def timing(self) -> FailureTiming:
        return self.backend.timing

    def open_node(self, node_id: NodeId, core: ClusterCore) -> ClusterProvider:
        backend = self

        class Late:
            def __getattr__(self, name: str) -> object:
                return getattr(core, name)

            def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
                backend.held.append((core, shard, entries))

        return self.backend.open_node(node_id, cast(ClusterCore, Late()))

    def release(self) -> None:
        for core, shard, entries in self.held:
            core.notify_shard_log_update(shard, entries)

    def close(self) -> None:
        """The wrapped backend is the coordinator's."""


def test_a_write_right_after_another_sees_it_before_its_notification(cluster: ShuffleCluster) -> None:
    """A writer that fails right after registering must unregister, although the notification of
    its registration has not reached its node yet (it used to read its own view, find nothing
    and skip the unregistration, leaving the writer registered forever)."""
    key = ShuffleKey(0, 0)
    late = LateNotifications(cluster.coordinator.backend)
    writer = ClusterDirectory(late, "writer3", cluster.shard.shard)
    barrier = cluster.directories(Role.READER, 0)
    try:
        writer.register(key, WriterLocation(3, "exec-1", "127.0.0.1", 4003))
        writer.unregister(key, 3)
        writer.report_failure(key, Role.WRITER, 3, "RuntimeError: failed right after registering")
        barrier.report_failure(key, Role.READER, 0, "RuntimeError: barrier")  # notified after the above
        driver = cluster.coordinator.directory(0)
        _wait_until(lambda: isinstance(driver.lookup(key).state, AttemptFailure), "failure notification")
        assert driver.lookup(key) == Writers((), AttemptFailure("writer 3 failed: RuntimeError: failed right after registering"))
    finally:
        late.release()
        writer.close()
        barrier.close()


def test_a_failure_wins_over_a_retirement(cluster: ShuffleCluster) -> None:
    """A task that failed in a retired attempt reads as failed, so its peers report the root cause."""
    key = ShuffleKey(0, 0)
    driver = cluster.coordinator.directory(0)
    reader = cluster.directories(Role.READER, 0)
    try:
        driver.retire(key)
        _wait_until(lambda: reader.lookup(key).state is AttemptState.RETIRED, "retirement notification")
        reader.report_failure(key, Role.READER, 0, "RuntimeError: root cause")
        _wait_until(lambda: isinstance(reader.lookup(key).state, AttemptFailure), "failure notification")
        assert reader.lookup(key).state == AttemptFailure("reader 0 failed: RuntimeError: root cause")
    finally:
        reader.close()


def test_first_failure_report_wins(cluster: ShuffleCluster) -> None:
    key = ShuffleKey(0, 0)
    first, second = cluster.directories(Role.READER, 0), cluster.directories(Role.WRITER, 1)
    try:
        first.report_failure(key, Role.READER, 0, "RuntimeError: root cause")
        second.report_failure(key, Role.WRITER, 1, "BrokenPipeError: consequence")
        _wait_until(lambda: isinstance(second.lookup(key).state, AttemptFailure), "failure notification")
        assert second.lookup(key).state == AttemptFailure("reader 0 failed: RuntimeError: root cause")
    finally:
        first.close()
        second.close()


def test_a_failure_too_long_for_the_directory_is_cut_not_lost(cluster: ShuffleCluster) -> None:
    key = ShuffleKey(0, 0)
    writer, reader = cluster.directories(Role.WRITER, 2), cluster.directories(Role.READER, 0)
    try:
        writer.report_failure(key, Role.WRITER, 2, "ValueError: " + "é" * MAX_TEXT_BYTES)
        _wait_until(lambda: isinstance(reader.lookup(key).state, AttemptFailure), "failure notification")
        state = reader.lookup(key).state
        assert isinstance(state, AttemptFailure)
        failure = state.text
        assert failure.startswith("writer 2 failed: ValueError: ééé")
        assert MAX_TEXT_BYTES - 1 <= len(failure.encode()) <= MAX_TEXT_BYTES
    finally:
        writer.close()
        reader.close()


def test_a_retried_task_finds_the_first_failure_of_the_latest_attempt(cluster: ShuffleCluster) -> None:
    """What a retried reader names in ReaderRetryUnsupported (Spark shows only the last attempt's error)."""
    first = cluster.directories(Role.READER, 0)
    try:
        attempt = first.join(0, 0)
        first.report_failure(ShuffleKey(0, attempt), Role.WRITER, 1, "WriterNodeFailed: lost")
    finally:
        first.close()
    retry = cluster.directories(Role.READER, 0)  # a fresh node: the shard log reaches it by catch-up
    try:
        assert retry.latest_failure(0, DEADLINE_S) == "writer 1 failed: WriterNodeFailed: lost"
        assert retry.latest_failure(99, 0.0) == ""  # no such shuffle: nothing to wait for
    finally:
        retry.close()


def test_readers_join_attempts_and_the_driver_launches_each_attempt_once(cluster: ShuffleCluster) -> None:
    """Joins are CAS on the shuffle's attempt key; the driver's node starts the writers of each new
    attempt when the notification arrives (a reader seen twice means the result is recomputed)."""
    launched: list[ShuffleKey] = []
    shard = cluster.coordinator.add_shuffle(7, launched.append)
    directories = [shard.open(Role.READER, r) for r in range(3)]
    try:
        assert [d.join(7, r) for r, d in enumerate(directories)] == [0, 0, 0]
        _wait_until(lambda: len(launched) >= 1, "launch of attempt 0")
        assert directories[1].join(7, 1) == 1
        assert directories[0].join(7, 0) == 1
        _wait_until(lambda: len(launched) >= 2, "launch of attempt 1")
        # Callbacks run in commit order: once the driver saw a later write, every launch is started.
        directories[0].report_failure(ShuffleKey(7, 1), Role.READER, 0, "barrier")
        driver = cluster.coordinator.directory(7)
        _wait_until(lambda: isinstance(driver.lookup(ShuffleKey(7, 1)).state, AttemptFailure), "barrier notification")
        for thread in threading.enumerate():
            if thread.name.startswith("shuffle-launch-7-"):
                thread.join(DEADLINE_S)
        assert launched == [ShuffleKey(7, 0), ShuffleKey(7, 1)]
    finally:
        for directory in directories:
            directory.close()
        cluster.coordinator.remove_shuffle(7)


def test_provider_setting_selects_the_backend(cluster: ShuffleCluster) -> None:
    """Unset means the driver's in-process cluster, reached by executors over the cluster service."""
    if isinstance(cluster.coordinator.backend, InProcessCluster):
        assert cluster.shard.url.startswith("tcp://127.0.0.1:")
    else:
        assert isinstance(cluster.coordinator.backend, EtcdCluster)
        assert cluster.shard.url.startswith("etcd://127.0.0.1:")
    with pytest.raises(ValueError, match=SPARK_CONF_KEY):
        driver_directory_from_conf({SPARK_CONF_KEY: "zookeeper://127.0.0.1:2181"})


def test_runs_of_a_stage_retried_or_read_twice_and_of_two_stages_at_once_stay_apart(cluster: ShuffleCluster) -> None:
    """A reader joins the oldest open run of its stage that lacks it: a stage read twice in one job
    (union of a result with itself) or retried under its id opens a second run, another stage (a
    second action at once) its own, and a run the driver decided takes no reader any more (the next
    partition of a task that reads several starts a new run)."""
    tasks = [cluster.shard.open(Role.READER, r) for r in range(2)]
    driver = cluster.coordinator.directory(0)
    try:
        assert [tasks[0].join(0, 0, stage=5), tasks[0].join(0, 0, stage=5), tasks[1].join(0, 1, stage=5)] == [0, 1, 0]
        assert tasks[1].join(0, 0, stage=6) == 2  # another stage, at the same time
        _wait_until(lambda: driver.open_attempt(ShuffleKey(0, 0)) is not None, "run 0 in the driver's view")
        assert driver.decide(ShuffleKey(0, 0)) == frozenset({0, 1})
        assert driver.decide(ShuffleKey(0, 0)) is None  # decided once
        _wait_until(lambda: tasks[1].served(ShuffleKey(0, 0)) == frozenset({0, 1}), "the decision in a task's view")
        assert tasks[1].join(0, 1, stage=5) == 1  # run 1 of stage 5 is still open and lacks reader 1
        assert tasks[1].join(0, 1, stage=5) == 3  # run 0 is decided: a new run
        assert driver.open_attempt(ShuffleKey(0, 0)) is None
    finally:
        for task in tasks:
            task.close()


def test_a_reader_done_reading_is_seen_by_the_driver_once_whatever_it_read(cluster: ShuffleCluster) -> None:
    """A reader that read everything or stopped early (``take``) marks itself done; the driver sees
    exactly the readers done, so it can retire a run whose readers all are (writers a reader left
    before connecting to would otherwise wait for it)."""
    tasks = [cluster.shard.open(Role.READER, r) for r in range(2)]
    driver = cluster.coordinator.directory(0)
    key = ShuffleKey(0, 0)
    try:
        assert [tasks[0].join(0, 0, stage=3), tasks[1].join(0, 1, stage=3)] == [0, 0]
        tasks[1].reader_done(key, 1)
        tasks[1].reader_done(key, 1)  # idempotent
        _wait_until(lambda: driver.readers_done(key) == frozenset({1}), "reader 1 done in the driver's view")
        tasks[0].reader_done(key, 0)
        _wait_until(lambda: driver.readers_done(key) == frozenset({0, 1}), "both readers done in the driver's view")
        assert [r.record["stage"] for r in driver.view.readers(key)] == [3, 3]  # the join's record is kept
    finally:
        for task in tasks:
            task.close()
