"""The pipeline's source and sink tasks on threads, without Spark: the shuffle is a queue per sink."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

from reference.cdc.pgwire import PgConnection
from reference.pipeline.postgres import CdcConfig, ShuffledRecord, sink_partition, source_partition
from reference.pipeline.syncserver import SyncServerProcess
from tests.cdc.conftest import Database


def _threaded(records: Iterator[tuple[int, ShuffledRecord]], readers: int) -> list[Iterator[tuple[int, ShuffledRecord]]]:
    """The shuffle without Spark: the source's records handed to one iterator per sink, in order."""
    queues: list[queue.Queue[tuple[int, ShuffledRecord] | None]] = [queue.Queue() for _ in range(readers)]

    def pump() -> None:
        try:
            for reader, record in records:
                queues[reader].put((reader, record))
        finally:
            for q in queues:
                q.put(None)

    threading.Thread(target=pump, name="source", daemon=True).start()

    def drain(q: queue.Queue[tuple[int, ShuffledRecord] | None]) -> Iterator[tuple[int, ShuffledRecord]]:
        while (item := q.get(timeout=60)) is not None:
            yield item

    return [drain(q) for q in queues]


Records = Iterator[tuple[int, ShuffledRecord]]


def run_pipeline(database: Database, server: SyncServerProcess, readers: int,
                 tap: Callable[[Records], Records] = lambda records: records, **settings: int) -> list[str | None]:
    """The source task and ``readers`` sink tasks on threads, to the current WAL position; each sink's stop line
    (``tap``: what the shuffle sees of the source's records; ``settings``: more of :class:`CdcConfig`)."""
    config = CdcConfig(database.url(), database.name, database.name, False, "current", readers, server.location,
                       sync_deadline_s=30.0, **settings)
    inputs = _threaded(tap(source_partition(config, 0, iter(()))), readers)
    results: list[str | None] = [None] * readers
    errors: list[BaseException] = []

    def sink(r: int) -> None:
        try:
            (counts,) = list(sink_partition(config, r, inputs[r]))
            results[r] = counts.stopped
        except BaseException as exc:  # raised below
            errors.append(exc)

    threads = [threading.Thread(target=sink, args=(r,)) for r in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    return results


def sql(database: Database, *statements: str) -> None:
    conn = PgConnection(database.address)
    try:
        for statement in statements:
            conn.query(statement)
    finally:
        conn.close()
