"""The streaming shuffle as a PySpark API: :class:`StreamingShuffle` (``shuffle`` for RDDs,
``repartition`` for DataFrames), the service a caller owns, and ``streaming_shuffle`` /
``streaming_repartition``, the same on a default service kept by the SparkContext.

Both return lazily. The result has exactly ``num_partitions`` partitions, each computed by an
exchange task that also writes one partition of the input (exchange.py): n partitions need n task
slots, the input is coalesced into (or spread over) the n tasks, and the choice is logged. Where
the cluster has fewer slots, ``fallback="spark"`` (the default) runs Spark's own shuffle instead,
with one warning line naming the numbers; ``fallback="error"`` raises InsufficientSlots. Each Spark
stage that reads the result is one run; the driver decides whom it serves and adds writer-only
tasks for the input partitions its stage does not read (runs.py). The directory lives on the
cluster provider named by ``spark.streamwire.cluster.provider`` (default: in-process in the
driver; e.g. ``etcd://127.0.0.1:2379``), see reference/shuffle/cluster_directory.py.
"""

from __future__ import annotations

import functools
import itertools
import logging
import queue
import threading
import warnings
import weakref
from typing import Any, Callable, Final, Iterable, Literal, Mapping

from reference.shuffle.cluster_directory import DriverDirectory, driver_directory_from_conf
from reference.shuffle.task import describe
from reference.spark import exchange, jvm_rows, records
from reference.spark.plan import (BIND_HOST_KEY, TRANSCRIPT_DIR_KEY, Plan, application_conf,
                                  runtime_flush_when_idle, runtime_limits, settings_from, start_bound_s)
from reference.spark.quiet import quiet_stops
from reference.spark.runs import decide_when_started, retire_when_it_ends
from reference.spark.shape import InsufficientSlots, Shape, choose_shape
from reference.spark.workers import local_workers_use_driver_python
from spec.auth.settings import auth_from_conf
from spec.shuffle import coordination

Fallback = Literal["spark", "error"]
"""What a shuffle does where the cluster has fewer task slots than partitions."""

log = logging.getLogger(__name__)


def available_slots(sc: Any) -> int:
    """Tasks the cluster can run at once now (0 while no executor has registered)."""
    jsc = sc._jsc.sc()
    return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))


def _spread(rdd: Any, shape: Shape) -> Any:
    """The input as exactly ``shape.partitions`` partitions: coalesced, or followed by empty ones.

    An input with fewer partitions keeps its Python function in the exchange task's own worker.
    ``sc.union`` would not: it materializes the input (``_jrdd``), so its function ran in a Python
    worker of its own whose output reached the exchange task through PySpark's batched serializer and
    buffered pipe, late and in batches, and never at all for a source that waits on its own output.
    Here the union is of what the input's function reads, and the function is pipelined over it,
    run on the input's partitions only (the empty ones after them are the reader-only tasks).
    """
    from pyspark.core.rdd import RDD, PipelinedRDD

    if shape.coalesced:
        return rdd.coalesce(shape.partitions)
    extra = shape.partitions - shape.input_partitions
    if not extra:
        return rdd
    sc = rdd.context
    read, deserializer = (rdd._prev_jrdd, rdd._prev_jrdd_deserializer) if shape.python_input else (
        rdd._jrdd, rdd._jrdd_deserializer)
    spread: Any = RDD(read.rdd().union(sc.parallelize([], extra)._jrdd.rdd()).toJavaRDD(), sc, deserializer)
    if not shape.python_input:
        return spread
    return PipelinedRDD(spread, functools.partial(_on_the_input, shape.input_partitions, rdd.func),
                        isFromBarrier=rdd._is_barrier())


def _ends_in_python(rdd: Any) -> bool:
    """Whether ``rdd`` ends in a Python function PySpark would pipeline into the next one."""
    from pyspark.core.rdd import PipelinedRDD

    return isinstance(rdd, PipelinedRDD) and rdd._is_pipelinable()


def _on_the_input(input_partitions: int, func: Callable[[int, Iterable[Any]], Iterable[Any]], index: int,
                  items: Iterable[Any]) -> Iterable[Any]:
    """The input's function on its own partitions; nothing on the reader-only ones after them."""
    return func(index, items) if index < input_partitions else iter(())


_DEFAULT_ATTRIBUTE: Final = "_streamwire_streaming_shuffle"
"""Where a SparkContext keeps the service the module-level functions use (it dies with the context)."""

_default_lock = threading.Lock()
"""Guards the creation of a context's default service (two threads may shuffle at once)."""


class StreamingShuffle:
    """The streaming shuffle's driver side for one SparkContext; the caller owns it.

    It holds the shuffles' directory (on the cluster provider named by
    ``spark.streamwire.cluster.provider``) and numbers the shuffles it opens, which stay open until
    :meth:`close` stops the directory (and its threads). Results are lazy: compute them before
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
        self.directory: DriverDirectory = driver_directory_from_conf(self.conf, self.driver_host)
        local_workers_use_driver_python(self.sc)
        quiet_stops(self.sc)
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
        use, kept on the context (so it dies with it), closed by :func:`stop_directory`."""
        with _default_lock:
            service: StreamingShuffle | None = getattr(sc, _DEFAULT_ATTRIBUTE, None)
            if service is None or service._closed:
                service = cls(sc)
                service._forget_collected = True  # nobody closes it until the context stops
                setattr(sc, _DEFAULT_ATTRIBUTE, service)
            return service

    @property
    def coordinator(self) -> DriverDirectory:
        """Deprecated (the word is now directory): :attr:`directory`; warns once per process."""
        _deprecated("StreamingShuffle.coordinator", "StreamingShuffle.directory")
        return self.directory

    def __enter__(self) -> StreamingShuffle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the directory; results not yet computed can no longer run. Idempotent."""
        if not self._closed:
            self._closed = True
            self.directory.stop()

    def shuffle(self, rdd: Any, num_partitions: int, partition_func: Callable[[Any], int] | None = None,
                conf: Mapping[str, object] | Any | None = None, *, fallback: Fallback = "spark") -> Any:
        """Shuffle an RDD of ``(key, value)`` pairs into ``num_partitions`` partitions, streaming.

        Partition ``i`` holds the pairs with ``partition_func(key) % num_partitions == i`` (default:
        PySpark's ``portable_hash``, as ``partitionBy``), each input partition's pairs in their order.
        ``conf`` (a dict or SparkConf) overrides ``spark.shuffle.streaming.*`` from the SparkConf;
        ``fallback``: what to do with fewer task slots than partitions (see the module).
        """
        from pyspark.rdd import portable_hash

        func = partition_func or portable_hash
        shape = self._shape(rdd.getNumPartitions(), num_partitions, fallback, _ends_in_python(rdd))
        if shape is None:
            return rdd.partitionBy(num_partitions, func)
        source = _spread(rdd, shape)

        def records_for(plan: Plan) -> exchange.RecordsOf:
            return functools.partial(records.pair_records, func, num_partitions, plan.max_record_size)

        plan = self._open(shape, conf, source, records_for)
        result = source.mapPartitionsWithIndex(functools.partial(
            exchange.exchange, plan, records_for(plan), records.unpickled))
        self._close_with(result, plan.shuffle_id)
        return result

    def repartition(self, df: Any, num_partitions: int, *cols: Any, conf: Mapping[str, object] | None = None,
                    fallback: Fallback = "spark") -> Any:
        """``df.repartition(num_partitions, *cols)`` through the streaming shuffle, Arrow IPC payloads.

        Rows go to ``pmod(hash(cols), num_partitions)``, Spark's own hash partitioning, so partition
        ``i`` holds the same rows as ``df.repartition(num_partitions, *cols)``'s partition ``i``.
        Without columns every row goes to partition ``(input partition + row) % num_partitions``
        (round robin). ``fallback``: what to do with fewer task slots than partitions (see the module).
        """
        from pyspark.sql import functions as F

        shape = self._shape(df.rdd.getNumPartitions(), num_partitions, fallback, python_input=False)
        if shape is None:
            return df.repartition(num_partitions, *cols)
        if cols:
            target = F.pmod(F.hash(*cols), F.lit(num_partitions))
        else:
            target = F.pmod(F.spark_partition_id() + F.monotonically_increasing_id(), F.lit(num_partitions))
        tagged = df.select("*", target.cast("int").alias(records.PARTITION_COLUMN))
        batches, schema = records.arrow_batches_of(tagged)
        source = _spread(batches, shape)
        records_of = functools.partial(records.batch_records, schema)
        plan = self._open(shape, conf, source, lambda _: records_of)
        spark, to_rows = df.sparkSession, jvm_rows.to_rows(df.sparkSession)
        exchanged = source.mapPartitionsWithIndex(functools.partial(
            exchange.exchange, plan, records_of, records.as_ipc_row if to_rows is None else records.as_ipc_stream))
        if to_rows is not None:
            result = to_rows(exchanged, df.schema)
        else:  # the JVM helper did not load (warned): the streams become rows in a second Python pass
            result = spark.createDataFrame(exchanged, "ipc binary").mapInArrow(records.from_ipc_rows, df.schema)
        self._close_with(result, plan.shuffle_id)
        return result

    def _shape(self, input_partitions: int, num_partitions: int, fallback: Fallback,
               python_input: bool) -> Shape | None:
        """The shape to run, or None where Spark's shuffle runs instead (one warning line); one warning
        line too where the input's Python function cannot run inside the exchange tasks."""
        if self._closed:
            raise ValueError("this StreamingShuffle is closed")
        if fallback not in ("spark", "error"):
            raise ValueError(f"fallback must be 'spark' or 'error', got {fallback!r}")
        shape = choose_shape(input_partitions, num_partitions, available_slots(self.sc), python_input)
        if shape.fits:
            if shape.input_behind_a_pipe:
                log.warning(shape.pipe_warning())
            return shape
        if fallback == "error":
            shape.require()
        log.warning("streaming shuffle into %d partitions needs %d task slots at once, the cluster offers %d: "
                    "running Spark's own shuffle instead (fallback=\"spark\")", num_partitions, num_partitions,
                    shape.slots)
        return None

    def _open(self, shape: Shape, conf: Mapping[str, object] | Any | None, source: Any,
              records_for: Callable[[Plan], exchange.RecordsOf]) -> Plan:
        """Register the shuffle with the directory and return the task plan; the directory calls
        the launcher for each run, which adds writer-only tasks for input partitions its stage lacks."""
        sc, directory = self.sc, self.directory
        while not self._collected.empty():
            directory.remove_shuffle(self._collected.get_nowait())
        settings, runtime = settings_from(sc, conf)
        limits, max_record_size = runtime_limits(runtime)
        flush_when_idle = runtime_flush_when_idle(runtime)
        shuffle_id = next(self._ids)
        log.info("streaming shuffle %d: %s", shuffle_id, shape.describe())

        def is_open() -> bool:
            return shuffle_id in directory.open_shuffles()

        def launcher(key: coordination.ShuffleKey) -> None:
            try:
                holder = directory.directory(key.shuffle_id)
                decision = decide_when_started(sc, holder, key, shape.partitions, plan.start_bound_s, is_open)
                if decision is None:
                    return
                served = decision.served
                retire_when_it_ends(sc, holder, key, decision, is_open)
                missing = [i for i in range(shape.partitions) if i not in served]
                if not missing:
                    return
                slots_now = available_slots(sc)
                if slots_now < shape.partitions:
                    raise InsufficientSlots(shape.partitions, slots_now)
                sc.setJobGroup(f"streaming-shuffle-{key.shuffle_id}-{key.attempt}",
                               f"streaming shuffle {key.shuffle_id} (run {key.attempt}): writers {missing} for "
                               f"readers {sorted(served)}", True)
                writers = source.mapPartitionsWithIndex(functools.partial(
                    exchange.write_only, plan, key, served, records_for(plan)))
                sc.runJob(writers, _nothing, missing)
            except BaseException as error:  # noqa: BLE001 - reported to every task of the run
                directory.report_failure(key, coordination.Role.DRIVER, -1, describe(error))

        plan = Plan(shuffle_id, shape.partitions, settings, directory.add_shuffle(shuffle_id, launcher),
                    runtime.get(BIND_HOST_KEY), runtime.get(TRANSCRIPT_DIR_KEY), self.driver_host,
                    limits=limits, max_record_size=max_record_size, flush_when_idle=flush_when_idle,
                    start_bound_s=start_bound_s(runtime),
                    auth=auth_from_conf(self.conf, str(sc.applicationId), None))
        return plan

    def _close_with(self, result: object, shuffle_id: int) -> None:
        """On the default service, forget the shuffle (at the next shuffle) once its result RDD or DataFrame is
        garbage-collected (an RDD derived from it keeps it alive; a DataFrame derived from it does not)."""
        if self._forget_collected:
            weakref.finalize(result, self._collected.put, shuffle_id)


def stop_directory(sc: Any) -> None:
    """Close the default service of ``sc`` and its directory (call before ``SparkContext.stop`` to leave no
    thread behind)."""
    with _default_lock:
        service: StreamingShuffle | None = getattr(sc, _DEFAULT_ATTRIBUTE, None)
        if service is not None:
            delattr(sc, _DEFAULT_ATTRIBUTE)
    if service is not None:
        service.close()


def stop_coordinator(sc: Any) -> None:
    """Deprecated alias of :func:`stop_directory` (kept for one release); warns once per process."""
    _deprecated("stop_coordinator", "stop_directory")
    stop_directory(sc)


_warned: set[str] = set()
"""The deprecated names already warned about in this process."""


def _deprecated(old: str, new: str) -> None:
    """Warn once per process that ``old`` is now ``new`` (the shuffle's coordinator is now its directory)."""
    if old not in _warned:
        _warned.add(old)
        warnings.warn(f"{old} is deprecated: use {new} (the coordinator is now called the directory)",
                      DeprecationWarning, stacklevel=3)


def streaming_shuffle(rdd: Any, num_partitions: int, partition_func: Callable[[Any], int] | None = None,
                      conf: Mapping[str, object] | Any | None = None, *, fallback: Fallback = "spark") -> Any:
    """:meth:`StreamingShuffle.shuffle` on the default service of ``rdd``'s context."""
    return StreamingShuffle.default(rdd.context).shuffle(rdd, num_partitions, partition_func, conf, fallback=fallback)


def streaming_repartition(df: Any, num_partitions: int, *cols: Any, conf: Mapping[str, object] | None = None,
                          fallback: Fallback = "spark") -> Any:
    """:meth:`StreamingShuffle.repartition` on the default service of ``df``'s context."""
    return StreamingShuffle.default(df.sparkSession.sparkContext).repartition(df, num_partitions, *cols, conf=conf,
                                                                              fallback=fallback)


def _nothing(items: Iterable[Any]) -> list[Any]:
    """The result of a writer-only task: its writes are its work."""
    for _ in items:
        pass
    return []


