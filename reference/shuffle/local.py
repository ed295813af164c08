"""An M x R shuffle inside one process, each task on its own thread, through a real directory.

The same writer and reader tasks as in Spark, over real sockets, finding each other on an
in-process cluster (the same directory Spark tasks use); used by the tests and the benchmark to
exercise the runtime without Spark's start-up cost.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Callable, Iterable, Protocol, Sequence

from reference.net.ledger import ResourceLedger
from reference.cluster.memory import InProcessCluster
from reference.shuffle.cluster_directory import ClusterDirectory
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.task import TaskOptions
from reference.shuffle.writer_task import WriterStats, WriterTask
from spec.shuffle import coordination
from spec.shuffle.coordination import ShuffleDirectory
from spec.shuffle.settings import ShuffleSettings

Consumer = Callable[[int, Iterable[bytes]], list[bytes]]


class TaskDirectory(ShuffleDirectory, Protocol):
    def close(self) -> None: ...


DirectoryFactory = Callable[[coordination.Role, int], TaskDirectory]
"""Opens one task's directory; by default a node of an in-process cluster the harness starts."""


def collect(reader_id: int, records: Iterable[bytes]) -> list[bytes]:
    return list(records)


class LocalShuffleError(Exception):
    """At least one task failed; ``errors`` maps ``("writer"|"reader", id)`` to its exception."""

    def __init__(self, errors: dict[tuple[str, int], BaseException]) -> None:
        first = next(iter(errors.values()))
        super().__init__(f"{len(errors)} task(s) failed; first: {first!r}")
        self.errors = errors


def run_local_shuffle(
    inputs: Sequence[Iterable[tuple[int, bytes]]], num_readers: int, settings: ShuffleSettings = ShuffleSettings(),
    options: TaskOptions = TaskOptions(), consume: Consumer = collect, *, writer_options: Sequence[TaskOptions] | None = None,
    timeout_s: float = 60.0, directories: DirectoryFactory | None = None, ledger: ResourceLedger | None = None,
) -> tuple[list[list[bytes]], list[WriterStats]]:
    """Run one writer per input and ``num_readers`` readers; return each reader's output and writer stats.

    ``ledger`` receives every socket and thread the tasks open (for leak checks).
    """
    cluster: InProcessCluster | None = None
    holder: ClusterDirectory | None = None
    if directories is None:
        cluster = InProcessCluster()
        holder = ClusterDirectory(cluster, "driver-shuffle0", launcher=lambda key: None)
        shard, backend = holder.shard, cluster
        directories = lambda role, task: ClusterDirectory(backend, f"{role.name.lower()}{task}", shard)  # noqa: E731
    open_directory = directories
    key = coordination.ShuffleKey(0, 0)
    outputs: list[list[bytes]] = [[] for _ in range(num_readers)]
    stats: list[WriterStats] = [WriterStats() for _ in inputs]
    failures: dict[tuple[str, int], BaseException] = {}
    clients: list[TaskDirectory] = []

    def writer(w: int, records: Iterable[tuple[int, bytes]]) -> None:
        opts = writer_options[w] if writer_options is not None else options
        opts = replace(opts, ledger=ledger or opts.ledger)
        try:
            client = open_directory(coordination.Role.WRITER, w)
            clients.append(client)
            stats[w] = WriterTask(key, w, num_readers, settings, client, opts).run(records)
        except BaseException as error:  # noqa: BLE001 - reported to the caller
            failures[("writer", w)] = error

    def reader(r: int) -> None:
        try:
            client = open_directory(coordination.Role.READER, r)
            clients.append(client)
            records = ReaderTask(key, r, range(len(inputs)), settings, client,
                                 replace(options, ledger=ledger or options.ledger)).records()
            try:
                outputs[r] = consume(r, records)
            finally:
                records.close()  # as a failed Spark task's worker does: the stream ends with the task
        except BaseException as error:  # noqa: BLE001 - reported to the caller
            failures[("reader", r)] = error

    threads = [threading.Thread(target=writer, args=(w, records)) for w, records in enumerate(inputs)]
    threads += [threading.Thread(target=reader, args=(r,)) for r in range(num_readers)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout_s)
        if any(thread.is_alive() for thread in threads):
            raise TimeoutError(f"shuffle tasks still running after {timeout_s} s")
    finally:
        for client in clients:
            client.close()
        if holder is not None:
            holder.close()
        if cluster is not None:
            cluster.close()
    if failures:
        raise LocalShuffleError(failures)
    return outputs, stats
