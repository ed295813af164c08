"""Coalescing: a batch is numbered by its last commit LSN, keeps each table's changes in commit order,
is full at its row bound or once its first transaction waited its budget, and a transaction whose
table is described differently starts the next batch."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from spec.pgoutput.changes import Op, RowChange, TableImage
from spec.pgoutput.coalesce import Batch
from spec.pgoutput.transactions import SourceTransaction

A = TableImage("public/a", (("id", pa.int64()),), (("v", pa.string()),))
A2 = TableImage("public/a", (("id", pa.int64()),), (("v", pa.string()), ("w", pa.int32())))
B = TableImage("public/b", (("id", pa.int64()),), ())


def _tx(lsn: int, *changes: tuple[TableImage, int]) -> SourceTransaction:
    out: dict[str, list[RowChange]] = {}
    for image, key in changes:
        values = tuple(str(key) for _ in image.values)
        out.setdefault(image.path, []).append(RowChange(image, Op.INSERT, None, (key,), values, (True,) * len(values)))
    return SourceTransaction(lsn, lsn + 1, 0, lsn, out, {image.path: image for image, _ in changes})


def test_numbered_by_the_last_commit_with_changes_in_order() -> None:
    batch = Batch(max_rows=10, budget_s=1.0)
    batch.add(_tx(100, (A, 1), (B, 1)), now=0.0)
    batch.add(_tx(200), now=0.1)  # no rows: covered, not counted
    batch.add(_tx(300, (A, 2)), now=0.2)
    assert not batch.full(0.5)
    coalesced = batch.take()
    assert coalesced is not None and coalesced.number == 300 and coalesced.row_count == 3
    assert [c.new_key for c in coalesced.changes["public/a"]] == [(1,), (2,)]
    assert [tx.commit_lsn for tx in coalesced.transactions] == [100, 300]
    assert batch.empty and batch.take() is None


def test_full_by_rows_or_by_budget() -> None:
    batch = Batch(max_rows=2, budget_s=0.05)
    batch.add(_tx(1, (A, 1)), now=10.0)
    assert not batch.full(10.04) and batch.full(10.05)
    batch.add(_tx(2, (A, 2)), now=10.01)
    assert batch.full(10.01)


def test_a_changed_table_description_starts_the_next_batch() -> None:
    batch = Batch()
    batch.add(_tx(1, (A, 1)), now=0.0)
    assert batch.fits(_tx(2, (B, 1))) and not batch.fits(_tx(2, (A2, 2)))


def test_a_batch_of_transactions_without_rows_sends_nothing() -> None:
    batch = Batch()
    batch.add(_tx(5), now=0.0)
    assert not batch.empty and batch.take() is None


def test_a_spilled_transaction_travels_alone() -> None:
    spilled = dataclasses.replace(_tx(2, (A, 2)), spilled_rows=5000)
    assert spilled.row_count == 5001
    batch = Batch()
    batch.add(_tx(1, (A, 1)), now=0.0)
    assert not batch.fits(spilled)
    batch.take()
    assert batch.fits(spilled)
    batch.add(spilled, now=0.0)
    assert not batch.fits(_tx(3, (B, 1)))
    coalesced = batch.take()
    assert coalesced is not None and coalesced.row_count == 5001 and coalesced.transactions == [spilled]


def test_one_put_answered_at_a_time_while_the_next_batch_grows() -> None:
    batch = Batch(max_rows=2, budget_s=0.05)
    batch.offer(_tx(1, (A, 1)), now=0.0)
    assert not batch.due(0.0, drained=False, putting=False)  # more may be ready to read
    assert batch.due(0.0, drained=True, putting=False) and batch.due(0.05, drained=False, putting=False)
    assert not batch.due(1.0, drained=True, putting=True) and not batch.held(putting=True)  # keep reading
    batch.offer(_tx(2, (A, 2)), now=0.01)
    assert batch.held(putting=True) and not batch.held(putting=False)  # full: wait for the answer
    assert batch.due(0.01, drained=False, putting=False)


def test_a_transaction_that_does_not_fit_starts_the_next_batch() -> None:
    batch = Batch(max_rows=10, budget_s=1.0)
    batch.offer(_tx(1, (A, 1)), now=0.0)
    batch.offer(_tx(2, (A2, 2)), now=0.5)
    assert batch.held(putting=True) and batch.due(0.5, drained=False, putting=False)
    first = batch.take()
    assert first is not None and first.number == 1 and first.tables == {"public/a": A}
    assert batch.number == 2 and batch.tables == {"public/a": A2} and batch.opened_at == 0.5
    batch.offer(_tx(3, (A2, 3)), now=0.6)
    batch.drop()
    assert batch.empty and batch.take() is None
