"""The streaming shuffle as a PySpark API: :class:`StreamingShuffle` (``shuffle`` for RDDs,
``repartition`` for DataFrames), the service a caller owns, and ``streaming_shuffle`` /
``streaming_repartition``, the same on a default service kept by the SparkContext.

Both return lazily. The result has exactly ``num_partitions`` partitions, each computed by a reader
task. Each Spark stage that reads the result is one run (attempt): once the stage's readers have
all started, the driver's coordinator launches the writers (one task per input partition) as a
second job, sending only to those readers, so writer and reader tasks run at the same time as real
Spark tasks; see docs/shuffle-runtime.md for why this is not one barrier stage. When the stage ends
first (``take``, ``show`` and ``limit`` read some partitions, some rows), the run is retired and its
writers end quietly. Failures of any task are reported to the coordinator, which every other task
of the run watches, so the job fails promptly with the first task's error. The coordinator lives
on the cluster provider named by ``spark.streamwire.cluster.provider`` (default: in-process in the
driver; e.g. ``etcd://127.0.0.1:2379``), see reference/shuffle/cluster_directory.py.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import pickle
import queue
import socket
import threading
import time
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable, Final, Hashable, Iterable, Iterator, Mapping, NamedTuple

from reference.net import ConnectionLimits
from reference.spark.workers import local_workers_use_driver_python
from reference.shuffle.cluster_directory import (
    ClusterCoordinator,
    ClusterDirectory,
    ShuffleShard,
    directory_from_conf,
)
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.task import ROOT_CAUSE_WAIT_S, TaskOptions, describe
from reference.shuffle.writer_task import WriterTask
from reference.spark.arrived import arrived_batches
from spec.auth import AuthConfig
from spec.auth.settings import AUTHENTICATE_KEY, SECRET_KEY, auth_from_conf, enabled
from spec.shuffle import coordination as co
from spec.shuffle.errors import ShuffleError
from spec.shuffle.framing import DEFAULT_MAX_RECORD_SIZE
from spec.shuffle.settings import PREFIX, ShuffleSettings

RUNTIME_PREFIX: Final = "spark.streamwire.shuffle."
"""Options of this runtime that Spark does not have (kept out of ``spark.shuffle.streaming.*``)."""

BIND_HOST_KEY: Final = RUNTIME_PREFIX + "bindHost"
"""Address writer servers bind and advertise; default: the executor's host."""

TRANSCRIPT_DIR_KEY: Final = RUNTIME_PREFIX + "transcriptDir"
"""When set, every task appends every frame of its connections to a JSON-lines file there."""

MAX_PENDING_KEY: Final = RUNTIME_PREFIX + "maxPendingConnections"
"""Connections a writer keeps before they bind (one more evicts the oldest); default 64."""

BIND_TIMEOUT_KEY: Final = RUNTIME_PREFIX + "bindTimeoutMs"
"""How long a connection to a writer may stay unbound; default 120000 (Spark's spark.network.timeout)."""

MAX_RECORD_SIZE_KEY: Final = RUNTIME_PREFIX + "maxRecordSize"
"""Largest serialized record a reader accepts (with networkBufferSize it bounds a DATA frame); default 64 MiB."""

FLUSH_WHEN_IDLE_KEY: Final = RUNTIME_PREFIX + "flushWhenIdle"
"""The writers' low-latency flush (``TaskOptions.flush_when_idle``): a buffer becomes a DATA as soon as the
writer's input has nothing more to give, instead of at 90% full or networkBufferMaxWaitTimeMs; default false."""

PICKLE_PROTOCOL: Final = 5

STAGE_POLL_S: Final = 0.02
"""How often the driver looks at the reading stage (its readers joining, its end)."""

log = logging.getLogger(__name__)


class InsufficientSlots(ShuffleError):
    """Writers and readers must all run at once; the cluster cannot hold that many tasks."""

    condition = "STREAMING_SHUFFLE_INSUFFICIENT_SLOTS"

    def __init__(self, writers: int, readers: int, slots: int) -> None:
        super().__init__(
            f"streaming shuffle needs {writers} writer + {readers} reader = {writers + readers} concurrent "
            f"task slots, but the cluster offers {slots}; use fewer partitions or more executor cores "
            "(writers and readers run at the same time)",
            writers=writers, readers=readers, slots=slots,
        )


class ReaderRetryUnsupported(ShuffleError):
    """A reader cannot be retried alone: its writers have already streamed their data (no replay)."""

    condition = "STREAMING_SHUFFLE_READER_RETRY_UNSUPPORTED"

    def __init__(self, reader_id: int, attempt: int, first_failure: str) -> None:
        super().__init__(
            f"reader {reader_id} is being retried (task attempt {attempt}); a streaming shuffle cannot "
            f"replay a single reader, so the job fails instead; first failure: {first_failure or 'unknown'}",
            readerId=reader_id, attemptNumber=attempt, firstFailure=first_failure,
        )


@dataclass(frozen=True)
class Plan:
    """Everything a task needs, shipped in the closure."""

    shuffle_id: int
    num_writers: int
    num_readers: int
    settings: ShuffleSettings
    shard: ShuffleShard
    """Where the tasks reach the shuffle's directory."""
    bind_host: str | None
    transcript_dir: str | None
    driver_host: str = "127.0.0.1"
    limits: ConnectionLimits = ConnectionLimits()
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE
    flush_when_idle: bool = False
    auth: AuthConfig | None = None
    """The application's handshake (``spark.authenticate``); it travels in the task closure, which
    Spark's own authenticated, encrypted connections carry when the same settings are on."""

    def host(self) -> str:
        """This task's host: where a writer's server binds, what its cluster node advertises."""
        return self.bind_host or _executor_host(self.driver_host)

    def options(self, role: str, task_id: int) -> TaskOptions:
        host = self.host()
        transcript = None
        if self.transcript_dir:
            os.makedirs(self.transcript_dir, exist_ok=True)
            transcript = os.path.join(self.transcript_dir, f"shuffle{self.shuffle_id}-{role}{task_id}.jsonl")
        return TaskOptions(bind_host=host, executor_id=f"{socket.gethostname()}:{os.getpid()}",
                           transcript_path=transcript, limits=self.limits,
                           max_record_size=self.max_record_size, readers_may_leave=True,
                           flush_when_idle=self.flush_when_idle, auth=self.auth)


def _executor_host(driver_host: str) -> str:
    """Loopback when the driver is on loopback (local and test clusters), else this host's address."""
    if driver_host.startswith("127.") or driver_host == "localhost":
        return "127.0.0.1"
    return os.environ.get("SPARK_LOCAL_IP") or socket.gethostbyname(socket.gethostname())


# -- driver side ----------------------------------------------------------------------------------

def available_slots(sc: Any) -> int:
    """Tasks the cluster can run at once now (0 while no executor has registered)."""
    jsc = sc._jsc.sc()
    return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))


class StageState(NamedTuple):
    """A stage as the driver's status store knows it."""

    status: str
    """PENDING, ACTIVE, COMPLETE, FAILED or SKIPPED."""
    num_tasks: int

    @property
    def ended(self) -> bool:
        return self.status not in ("PENDING", "ACTIVE")


def stage_state(sc: Any, stage: int) -> StageState | None:
    """The latest attempt of ``stage`` in the driver's status store (the one ``statusTracker`` reads,
    which does not show a stage's status); None until the store has heard of the stage."""
    from py4j.protocol import Py4JJavaError

    try:
        data = sc._jsc.sc().statusStore().lastStageAttempt(stage)
    except Py4JJavaError:  # NoSuchElementException: the listener has not seen the stage yet
        return None
    return StageState(str(data.status().toString()), int(data.numTasks()))


class ReadingStage:
    """The driver's view of the stage that reads one attempt: whom the writers serve, and when
    nobody reads the attempt any more (the stage ended, whatever its end), which retires it."""

    def __init__(self, sc: Any, holder: ClusterDirectory, key: co.ShuffleKey) -> None:
        self.sc, self.holder, self.key = sc, holder, key
        self._done = threading.Event()

    def wanted(self, is_open: Callable[[], bool]) -> frozenset[int] | None:
        """The readers of the attempt once every task of their stage has joined (all of them when
        the readers run outside Spark); None, after retiring the attempt, when the stage ended first."""
        while is_open():
            joined = self.holder.attempt_readers(self.key)
            if joined.readers and joined.stage is None:
                return joined.readers
            state = None if joined.stage is None else stage_state(self.sc, joined.stage)
            if state is not None and state.ended:
                self.holder.retire(self.key)
                return None
            if state is not None and len(joined.readers) >= state.num_tasks:
                return joined.readers
            time.sleep(STAGE_POLL_S)
        return None

    def retire_when_it_ends(self) -> None:
        """Watch the stage on a thread of its own until :meth:`stop`; retire the attempt if it ends."""
        stage = self.holder.attempt_readers(self.key).stage
        if stage is None:
            return

        def watch() -> None:
            from py4j.protocol import Py4JError

            try:
                while not self._done.wait(STAGE_POLL_S):
                    state = stage_state(self.sc, stage)
                    if state is not None and state.ended:
                        self.holder.retire(self.key)
                        return
            except (Py4JError, ConnectionError, co.CoordinationError):
                return  # the context or the shuffle is closing: nothing is left to retire

        threading.Thread(target=watch, name=f"shuffle-retire-{self.key.shuffle_id}-{self.key.attempt}",
                         daemon=True).start()

    def stop(self) -> None:
        self._done.set()


class Shape(NamedTuple):
    """How many writers a shuffle runs, chosen from the input and the cluster's free slots."""

    writers: int
    readers: int
    input_partitions: int
    slots: int

    @property
    def coalesced(self) -> bool:
        return self.writers < self.input_partitions

    def describe(self) -> str:
        fit = f" (input coalesced from {self.input_partitions} partitions)" if self.coalesced else ""
        where = f"{self.slots} task slots" if self.slots else "a cluster with no executor registered yet"
        return f"{self.writers} writers{fit} + {self.readers} readers on {where}"


def choose_shape(input_partitions: int, num_readers: int, slots: int) -> Shape:
    """Writers = the input's partitions, fewer when writers and readers would not all fit in ``slots``.

    ``slots`` 0 means no executor has registered yet: the input is kept as it is and the launch
    checks again. Raises InsufficientSlots when even one writer beside the readers cannot run.
    """
    if num_readers < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_readers}")
    if slots == 0:
        return Shape(input_partitions, num_readers, input_partitions, slots)
    if slots < 1 + num_readers:
        raise InsufficientSlots(1, num_readers, slots)
    return Shape(min(input_partitions, slots - num_readers), num_readers, input_partitions, slots)


def _settings(sc: Any, conf: Mapping[str, object] | Any | None) -> tuple[ShuffleSettings, dict[str, str]]:
    values: dict[str, object] = dict(sc.getConf().getAll())
    if conf is not None:
        values.update(dict(conf.getAll()) if hasattr(conf, "getAll") else dict(conf))
    runtime = {k: str(v) for k, v in values.items() if k.startswith(RUNTIME_PREFIX)}
    return ShuffleSettings.from_dict({k: v for k, v in values.items() if k.startswith(PREFIX)}), runtime


def runtime_limits(runtime: Mapping[str, str]) -> tuple[ConnectionLimits, int]:
    """The writers' connection limits and the readers' record-size bound from ``spark.streamwire.shuffle.*``.

    Raises ValueError naming the key of a value that is not a positive integer.
    """
    def number(key: str, default: int) -> int:
        raw = runtime.get(key)
        if raw is None:
            return default
        try:
            value = int(raw.strip())
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"{key} must be a positive integer, got {raw!r}")
        return value

    defaults = ConnectionLimits()
    limits = replace(defaults, max_pending=number(MAX_PENDING_KEY, defaults.max_pending),
                     bind_timeout_s=number(BIND_TIMEOUT_KEY, round(defaults.bind_timeout_s * 1000)) / 1000.0)
    return limits, number(MAX_RECORD_SIZE_KEY, DEFAULT_MAX_RECORD_SIZE)


def runtime_flush_when_idle(runtime: Mapping[str, str]) -> bool:
    """Whether the writers use the low-latency flush (``spark.streamwire.shuffle.flushWhenIdle``, a boolean
    read as Spark reads one); raises ValueError naming the key of any other value."""
    return enabled(runtime, FLUSH_WHEN_IDLE_KEY)


SECRET_COOKIE: Final = "sparkCookie"
"""Where Spark's SecurityManager keeps the secret it generated (local and YARN): the user's Hadoop credentials."""
SECRET_ENVIRONMENT: Final = "_SPARK_AUTH_SECRET"
"""Where a cluster manager hands the generated secret to processes it starts (Kubernetes, standalone workers)."""


def application_conf(sc: Any) -> dict[str, str]:
    """The SparkConf as a dict, with the secret Spark generated for the application filled in as
    ``spark.authenticate.secret`` when ``spark.authenticate`` is on without one: the shuffle's
    connections and the cluster service then require the same secret."""
    conf: dict[str, str] = dict(sc.getConf().getAll())
    if enabled(conf, AUTHENTICATE_KEY) and not conf.get(SECRET_KEY):
        jvm = sc._jvm
        credentials = jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser().getCredentials()
        generated = credentials.getSecretKey(jvm.org.apache.hadoop.io.Text(SECRET_COOKIE))
        secret = bytes(generated).decode() if generated else os.environ.get(SECRET_ENVIRONMENT, "")
        if secret:
            conf[SECRET_KEY] = secret
    return conf


_DEFAULT_ATTRIBUTE: Final = "_streamwire_streaming_shuffle"
"""Where a SparkContext keeps the service the module-level functions use (it dies with the context)."""

_default_lock = threading.Lock()
"""Guards the creation of a context's default service (two threads may shuffle at once)."""


class StreamingShuffle:
    """The streaming shuffle's driver side for one SparkContext; the caller owns it.

    It holds the coordinator (the directory on the cluster provider named by
    ``spark.streamwire.cluster.provider``) and numbers the shuffles it opens, which stay open until
    :meth:`close` stops the coordinator (and its threads). Results are lazy: compute them before
    closing::

        with StreamingShuffle(spark) as s:
            rows = s.repartition(df, 4, "key").collect()
    """

    def __init__(self, spark: Any) -> None:
        """``spark``: a SparkSession or a SparkContext."""
        self.sc: Any = getattr(spark, "sparkContext", spark)
        conf = self.sc.getConf()
        self.driver_host: str = conf.get("spark.driver.host", "127.0.0.1")
        self.conf: dict[str, str] = application_conf(self.sc)
        self.coordinator: ClusterCoordinator = directory_from_conf(self.conf, self.driver_host)
        local_workers_use_driver_python(self.sc)
        self._ids = itertools.count()
        self._closed = False
        self._forget_collected = False
        """Forget a shuffle once its result object is garbage-collected (the default service only)."""
        self._collected: queue.SimpleQueue[int] = queue.SimpleQueue()
        """Shuffles whose result was collected. The garbage collector runs finalizers on whatever thread
        allocates, perhaps one holding the cluster's lock or still starting, so a finalizer only queues
        (SimpleQueue.put is reentrant) and the service forgets them at its next shuffle."""

    @classmethod
    def default(cls, sc: Any) -> StreamingShuffle:
        """The service of ``sc`` behind ``streaming_shuffle``/``streaming_repartition``: made on first
        use, kept on the context (so it dies with it), closed by :func:`stop_coordinator`."""
        with _default_lock:
            service: StreamingShuffle | None = getattr(sc, _DEFAULT_ATTRIBUTE, None)
            if service is None or service._closed:
                service = cls(sc)
                service._forget_collected = True  # nobody closes it until the context stops
                setattr(sc, _DEFAULT_ATTRIBUTE, service)
            return service

    def __enter__(self) -> StreamingShuffle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the coordinator; results not yet computed can no longer run. Idempotent."""
        if not self._closed:
            self._closed = True
            self.coordinator.stop()

    def shuffle(self, rdd: Any, num_partitions: int, partition_func: Callable[[Any], int] | None = None,
                conf: Mapping[str, object] | Any | None = None) -> Any:
        """Shuffle an RDD of ``(key, value)`` pairs into ``num_partitions`` partitions, streaming.

        Partition ``i`` holds the pairs with ``partition_func(key) % num_partitions == i`` (default:
        PySpark's ``portable_hash``, as ``partitionBy``), each writer's pairs in their input order.
        ``conf`` (a dict or SparkConf) overrides ``spark.shuffle.streaming.*`` from the SparkConf.
        """
        from pyspark.rdd import portable_hash

        func = partition_func or portable_hash
        shape = self._shape(rdd.getNumPartitions(), num_partitions)
        source = rdd.coalesce(shape.writers) if shape.coalesced else rdd

        def launch(plan: Plan, key: co.ShuffleKey, wanted: frozenset[int]) -> None:
            source.mapPartitionsWithIndex(functools.partial(_write_pairs, plan, key, wanted, func)).foreach(_ignore)

        plan = self._open(shape, conf, launch)
        result = self.sc.parallelize(range(num_partitions), num_partitions).mapPartitionsWithIndex(
            functools.partial(_read_pairs, plan))
        self._close_with(result, plan.shuffle_id)
        return result

    def repartition(self, df: Any, num_partitions: int, *cols: Any, conf: Mapping[str, object] | None = None) -> Any:
        """``df.repartition(num_partitions, *cols)`` through the streaming shuffle, Arrow IPC payloads.

        Rows go to ``pmod(hash(cols), num_partitions)``, Spark's own hash partitioning, so partition
        ``i`` holds the same rows as ``df.repartition(num_partitions, *cols)``'s partition ``i``.
        Without columns every row goes to partition ``(writer + row) % num_partitions`` (round robin).
        """
        from pyspark.sql import functions as F

        if cols:
            target = F.pmod(F.hash(*cols), F.lit(num_partitions))
        else:
            target = F.pmod(F.spark_partition_id() + F.monotonically_increasing_id(), F.lit(num_partitions))
        tagged = df.select("*", target.cast("int").alias(PARTITION_COLUMN))
        shape = self._shape(df.rdd.getNumPartitions(), num_partitions)
        source = tagged.coalesce(shape.writers) if shape.coalesced else tagged

        def launch(plan: Plan, key: co.ShuffleKey, wanted: frozenset[int]) -> None:
            source.mapInArrow(functools.partial(_write_batches, plan, key, wanted), "done int").write.format(
                "noop").mode("overwrite").save()

        plan = self._open(shape, conf, launch)
        result = df.sparkSession.range(0, num_partitions, 1, num_partitions).mapInArrow(
            functools.partial(_read_batches, plan), df.schema)
        self._close_with(result, plan.shuffle_id)
        return result

    def _shape(self, input_partitions: int, num_readers: int) -> Shape:
        if self._closed:
            raise ValueError("this StreamingShuffle is closed")
        return choose_shape(input_partitions, num_readers, available_slots(self.sc))

    def _open(self, shape: Shape, conf: Mapping[str, object] | Any | None,
              launch: Callable[[Plan, co.ShuffleKey, frozenset[int]], None]) -> Plan:
        """Register the shuffle with the coordinator and return the task plan."""
        sc, coordinator = self.sc, self.coordinator
        while not self._collected.empty():
            coordinator.remove_shuffle(self._collected.get_nowait())
        settings, runtime = _settings(sc, conf)
        limits, max_record_size = runtime_limits(runtime)
        flush_when_idle = runtime_flush_when_idle(runtime)
        shuffle_id = next(self._ids)
        log.info("streaming shuffle %d: %s", shuffle_id, shape.describe())

        def launcher(key: co.ShuffleKey) -> None:
            try:
                stage = ReadingStage(sc, coordinator.directory(key.shuffle_id), key)
                wanted = stage.wanted(lambda: key.shuffle_id in coordinator.open_shuffles())
                if wanted is None:
                    return
                slots_now = available_slots(sc)
                if slots_now < shape.writers + len(wanted):
                    raise InsufficientSlots(shape.writers, len(wanted), slots_now)
                sc.setJobGroup(f"streaming-shuffle-{key.shuffle_id}-{key.attempt}",
                               f"streaming shuffle {key.shuffle_id} (attempt {key.attempt}): {shape.describe()}, "
                               f"for readers {sorted(wanted)}", True)
                stage.retire_when_it_ends()
                try:
                    launch(plan, key, wanted)
                finally:
                    stage.stop()
            except BaseException as error:  # noqa: BLE001 - reported to every task of the attempt
                coordinator.report_failure(key, co.Role.DRIVER, -1, describe(error))

        plan = Plan(shuffle_id, shape.writers, shape.readers, settings, coordinator.add_shuffle(shuffle_id, launcher),
                    runtime.get(BIND_HOST_KEY), runtime.get(TRANSCRIPT_DIR_KEY), self.driver_host,
                    limits=limits, max_record_size=max_record_size, flush_when_idle=flush_when_idle,
                    auth=auth_from_conf(self.conf, str(sc.applicationId), None))
        return plan

    def _close_with(self, result: object, shuffle_id: int) -> None:
        """On the default service, forget the shuffle (at the next shuffle) once its result RDD or DataFrame is
        garbage-collected (an RDD derived from it keeps it alive; a DataFrame derived from it does not)."""
        if self._forget_collected:
            weakref.finalize(result, self._collected.put, shuffle_id)


def stop_coordinator(sc: Any) -> None:
    """Close the default service of ``sc`` (call before ``SparkContext.stop`` to leave no thread behind)."""
    with _default_lock:
        service: StreamingShuffle | None = getattr(sc, _DEFAULT_ATTRIBUTE, None)
        if service is not None:
            delattr(sc, _DEFAULT_ATTRIBUTE)
    if service is not None:
        service.close()


def streaming_shuffle(rdd: Any, num_partitions: int, partition_func: Callable[[Any], int] | None = None,
                      conf: Mapping[str, object] | Any | None = None) -> Any:
    """:meth:`StreamingShuffle.shuffle` on the default service of ``rdd``'s context."""
    return StreamingShuffle.default(rdd.context).shuffle(rdd, num_partitions, partition_func, conf)


def streaming_repartition(df: Any, num_partitions: int, *cols: Any, conf: Mapping[str, object] | None = None) -> Any:
    """:meth:`StreamingShuffle.repartition` on the default service of ``df``'s context."""
    return StreamingShuffle.default(df.sparkSession.sparkContext).repartition(df, num_partitions, *cols, conf=conf)


# -- task side ------------------------------------------------------------------------------------

def _reader_attempt(plan: Plan, reader_id: int) -> tuple[ClusterDirectory, co.ShuffleKey]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt_number = ctx.attemptNumber() if ctx is not None else 0
    stage = ctx.stageId() if ctx is not None else None
    client = plan.shard.open(co.Role.READER, reader_id, plan.host())
    if attempt_number > 0:  # Spark shows the last attempt's error: it must name the root cause
        try:
            raise ReaderRetryUnsupported(reader_id, attempt_number,
                                         client.latest_failure(plan.shuffle_id, ROOT_CAUSE_WAIT_S))
        finally:
            client.close()
    return client, co.ShuffleKey(plan.shuffle_id, client.join(plan.shuffle_id, reader_id, stage))


def read_records(plan: Plan, reader_id: int) -> Iterator[bytes]:
    """The records of reader ``reader_id`` (one Spark task), as serialized bytes."""
    client, key = _reader_attempt(plan, reader_id)
    try:
        task = ReaderTask(key, reader_id, range(plan.num_writers), plan.settings, client,
                          plan.options("reader", reader_id))
        yield from task.records()
    finally:
        client.close()


def write_records(plan: Plan, key: co.ShuffleKey, writer_id: int, records: Iterable[tuple[int, bytes]],
                  served: frozenset[int]) -> None:
    """Stream ``(reader_id, bytes)`` pairs as writer ``writer_id`` (one Spark task) to the readers ``served``."""
    client = plan.shard.open(co.Role.WRITER, writer_id, plan.host())
    try:
        WriterTask(key, writer_id, plan.num_readers, plan.settings, client, plan.options("writer", writer_id),
                   served).run(records)
    finally:
        client.close()


def _write_pairs(plan: Plan, key: co.ShuffleKey, wanted: frozenset[int], partition_func: Callable[[Any], int],
                 index: int, pairs: Iterable[tuple[Hashable, Any]]) -> Iterator[None]:
    """Each wire record is a pickled list of pairs for one reader: the pairs that had arrived
    together, so pickling and the writer's per-record cost are paid per batch, never waiting for more.
    Pairs for readers the run does not serve (``wanted``: its stage's) are dropped."""
    r = plan.num_readers

    def records() -> Iterator[tuple[int, bytes]]:
        for batch in arrived_batches(pairs):
            by_reader: dict[int, list[tuple[Hashable, Any]]] = {}
            for k, v in batch:
                by_reader.setdefault(partition_func(k) % r, []).append((k, v))
            for reader_id, reader_pairs in by_reader.items():
                if reader_id not in wanted:
                    continue
                for record in _pickled_within(reader_pairs, plan.max_record_size):
                    yield reader_id, record

    write_records(plan, key, index, records(), wanted)
    return iter(())


def _pickled_within(pairs: list[tuple[Hashable, Any]], max_record_size: int) -> Iterator[bytes]:
    """``pairs`` pickled as one list, or split in halves until each part fits the readers' record limit
    (a single pair above it is still one record, which the reader refuses)."""
    record = pickle.dumps(pairs, PICKLE_PROTOCOL)
    if len(record) <= max_record_size or len(pairs) == 1:
        yield record
        return
    half = len(pairs) // 2
    yield from _pickled_within(pairs[:half], max_record_size)
    yield from _pickled_within(pairs[half:], max_record_size)


def _read_pairs(plan: Plan, index: int, _ignored: Iterable[int]) -> Iterator[Any]:
    loads = pickle.loads
    for record in read_records(plan, index):
        yield from loads(record)


def _ignore(_: object) -> None:
    return None


# -- DataFrames -----------------------------------------------------------------------------------

PARTITION_COLUMN: Final = "__streaming_shuffle_partition"


def _write_batches(plan: Plan, key: co.ShuffleKey, wanted: frozenset[int], batches: Iterator[Any]) -> Iterator[Any]:
    """One Arrow IPC stream per input batch and reader the run serves (``wanted``); the rest is dropped."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import TaskContext

    ctx = TaskContext.get()
    writer_id = ctx.partitionId() if ctx is not None else 0
    readers = sorted(wanted)

    def records() -> Iterator[tuple[int, bytes]]:
        for batch in batches:
            parts = batch.column(PARTITION_COLUMN)
            data = batch.drop_columns([PARTITION_COLUMN])
            for reader_id in readers:
                chunk = data.filter(pc.equal(parts, reader_id))
                if chunk.num_rows:
                    sink = pa.BufferOutputStream()
                    with pa.ipc.new_stream(sink, chunk.schema) as out:
                        out.write_batch(chunk)
                    yield reader_id, sink.getvalue().to_pybytes()

    write_records(plan, key, writer_id, records(), wanted)
    return iter(())


def _read_batches(plan: Plan, batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    ids = [i for batch in batches for i in batch.column("id").to_pylist()]
    for reader_id in ids:
        for record in read_records(plan, reader_id):
            yield from pa.ipc.open_stream(record)
