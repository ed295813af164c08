"""The source task: generates its origins' transactions and emits every change keyed for routing.

Writer ``w`` generates the origins ``o`` with ``o % writers == w``, interleaving them
transaction by transaction as independent databases would commit.  Each change is emitted as
``(route key, record)``; the record carries its transaction's commit time (for end-to-end
latency) and the size of the part its sink will receive (so the sink knows when a part is
complete without waiting for the next transaction).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from reference.pipeline.changes import StreamSpec, Transaction
from reference.pipeline.routing import parts, route_key
from reference.pipeline.records import ChangeRecord, WireRecord


@dataclass(frozen=True)
class SourceConfig:
    """The stream, the shape of the job and the pace (``rate`` changes/s over all writers; 0: as fast as possible)."""

    spec: StreamSpec
    writers: int
    readers: int
    rate: float = 0.0

    def origins_of(self, writer: int) -> list[int]:
        return [o for o in range(self.spec.origins) if o % self.writers == writer]


def _interleaved(spec: StreamSpec, origins: list[int]) -> Iterator[Transaction]:
    streams = [spec.transactions(o) for o in origins]
    while streams:
        for stream in list(streams):
            tx = next(stream, None)
            if tx is None:
                streams.remove(stream)
            else:
                yield tx


def generate(config: SourceConfig, writer: int) -> Iterator[tuple[int, WireRecord]]:
    """The routed records of writer ``writer``, paced to its share of ``config.rate``."""
    origins = config.origins_of(writer)
    share = sum(config.spec.changes_of(o) for o in origins) / max(config.spec.changes, 1)
    rate = config.rate * share
    started, emitted = time.monotonic(), 0
    for tx in _interleaved(config.spec, origins):
        if rate > 0 and (ahead := emitted / rate - (time.monotonic() - started)) > 0:
            time.sleep(ahead)
        committed = time.time_ns()
        for changes in parts(tx, config.readers).values():
            for change in changes:
                yield route_key(change), ChangeRecord(tx.origin, tx.seq, len(changes), committed, change).wire()
        emitted += len(tx.changes)


def source_partition(config: SourceConfig, writer: int, _: Iterator[object]) -> Iterator[tuple[int, WireRecord]]:
    """The Spark task body of source task ``writer``."""
    return generate(config, writer)
