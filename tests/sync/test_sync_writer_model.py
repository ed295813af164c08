"""Model check of the sync writer against a from-scratch model of its durability rule.

The model keeps every put as a record and recomputes durability at each flush and at each closing put
(a put without rows may close a transaction whose tables were all flushed already): a
transaction is durable when it is closed, every record it put is flushed, and every
transaction of its origin before it is durable.  Invariants: numbers never go backwards and
memory >= durable for every origin.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spec.sync.errors import EmptyTransaction, InterleavedTransaction
from spec.sync.writer import FlushReason, FlushTable, SyncSettings, SyncWriter, is_probe

ORIGINS = ("A", "B", "C")
TABLES = ("t1", "t2", "t3")


@dataclass
class ModelTx:
    origin: str
    seq: int | None
    records: list[list[object]] = field(default_factory=list)  # [table, flushed]


class SyncWriterModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.writer: SyncWriter[int] = SyncWriter()
        self.txs: list[ModelTx] = []
        self.memory: dict[str, int] = {}
        self.durable: dict[str, int] = {}
        self.next_seq = 1
        self.seen: dict[str, tuple[int | None, int | None]] = {}

    def _open(self) -> ModelTx | None:
        return self.txs[-1] if self.txs and self.txs[-1].seq is None else None

    @rule(origin=st.sampled_from(ORIGINS), table=st.sampled_from(TABLES), rows=st.integers(0, 3), close=st.booleans())
    def put(self, origin: str, table: str, rows: int, close: bool) -> None:
        seq = self.next_seq if close else None
        if is_probe(rows, seq):
            return
        open_tx = self._open()
        expected_error: type[Exception] | None = None
        if open_tx is not None and open_tx.origin != origin:
            expected_error = InterleavedTransaction
        elif open_tx is None and rows == 0:
            expected_error = EmptyTransaction
        if expected_error is not None:
            with pytest.raises(expected_error):
                self.writer.put(table=table, origin=origin, sequence=seq, rows=rows, size=rows, payload=rows, now=0.0)
            return
        self.writer.put(table=table, origin=origin, sequence=seq, rows=rows, size=rows, payload=rows, now=0.0)
        tx = open_tx or ModelTx(origin, None)
        if open_tx is None:
            self.txs.append(tx)
        if rows > 0:
            tx.records.append([table, False])
        if seq is not None:
            tx.seq = seq
            self.memory[origin] = seq
            self.next_seq += 1
            self._model_retire()

    def _model_flush(self, table: str) -> None:
        for tx in self.txs:
            for rec in tx.records:
                if rec[0] == table:
                    rec[1] = True
        self._model_retire()

    def _model_retire(self) -> None:
        waiting: set[str] = set()  # durability is per origin: an origin's transactions in order
        for tx in list(self.txs):
            if tx.origin in waiting or tx.seq is None or not all(r[1] for r in tx.records):
                waiting.add(tx.origin)
                continue
            self.txs.remove(tx)
            self.durable[tx.origin] = tx.seq

    @precondition(lambda self: self.writer.oldest_table() is not None)
    @rule(data=st.data())
    def flush_some_table(self, data: st.DataObject) -> None:
        table = data.draw(st.sampled_from(self.writer.pending_tables))
        plan = self.writer.plan_flush(table)
        self.writer.complete_flush(plan)
        self._model_flush(table)
        assert plan.durable_after == {o: s for o, s in self.writer_durable().items() if s is not None}

    @precondition(lambda self: self.writer.oldest_table() is not None)
    @rule()
    def flush_oldest(self) -> None:
        table = self.writer.oldest_table()
        assert table is not None
        self.writer.complete_flush(self.writer.plan_flush(table))
        self._model_flush(table)

    def writer_durable(self) -> dict[str, int | None]:
        return {o: self.writer.sequences(o)[1] for o in ORIGINS}

    @invariant()
    def numbers_match_model(self) -> None:
        for o in ORIGINS:
            assert self.writer.sequences(o) == (self.memory.get(o), self.durable.get(o))

    @invariant()
    def monotone_and_memory_covers_durable(self) -> None:
        for o in ORIGINS:
            memory, durable = self.writer.sequences(o)
            before = self.seen.get(o, (None, None))
            for now, then in ((memory, before[0]), (durable, before[1])):
                assert then is None or (now is not None and now >= then)
            if durable is not None:
                assert memory is not None and memory >= durable
            self.seen[o] = (memory, durable)


TestSyncWriterModel = SyncWriterModel.TestCase


def test_policy_checks_lag_then_size_then_count() -> None:
    s = SyncSettings(max_in_memory_bytes=100, max_replication_lag_s=10, max_syncs_per_url=2)
    w: SyncWriter[int] = SyncWriter(s)
    w.put(table="old", origin="A", sequence=1, rows=1, size=1, payload=0, now=0.0)
    w.put(table="big", origin="A", sequence=2, rows=1, size=60, payload=0, now=5.0)
    w.put(table="big", origin="A", sequence=3, rows=1, size=60, payload=0, now=5.0)
    assert w.next_action(10.0) == FlushTable("old", FlushReason.LAG)
    assert w.next_action(9.0).__class__.__name__ == "SquashTable"
    w.squashed("big", w.pending_items("big"))
    assert w.next_action(9.0) == FlushTable("big", FlushReason.SIZE)
    w.complete_flush(w.plan_flush("big"))
    w.put(table="old", origin="A", sequence=4, rows=1, size=1, payload=0, now=6.0)
    assert w.next_action(9.0) == FlushTable("old", FlushReason.COUNT)


def test_replayed_items_already_in_table_are_skipped() -> None:
    w: SyncWriter[int] = SyncWriter(durable={"A": 2})
    assert w.sequences("A") == (2, 2)
    for seq in (3, 4, 5):
        w.put(table="t", origin="A", sequence=seq, rows=1, size=1, payload=seq, now=0.0)
    plan = w.plan_flush("t", {"A": 4})
    assert [i.payload for i in plan.apply] == [5]
    assert plan.table_marks == {"A": 5} and plan.durable_after == {"A": 5}
