"""The sync writer's numbers at their boundaries: replays, marks that never move backwards, flush plans
that are abandoned or go stale, and the exact lag, size and count limits of the flush policy."""

from __future__ import annotations

import pytest

from spec.sync.errors import InterleavedTransaction, SequenceNotIncreasing, TransactionDiscarded
from spec.sync.writer import (
    FlushReason,
    FlushTable,
    PendingItem,
    Received,
    StaleFlushPlan,
    SyncSettings,
    SyncWriter,
)


def put(w: SyncWriter[int], seq: int | None, table: str = "t", origin: str = "A", now: float = 0.0,
        size: int = 1) -> Received:
    return w.put(table=table, origin=origin, sequence=seq, rows=1, size=size, payload=seq or 0, now=now)


def test_a_number_at_or_below_durable_is_a_replay_and_between_durable_and_memory_is_refused() -> None:
    w: SyncWriter[int] = SyncWriter(durable={"A": 5})
    assert put(w, 5) is Received.REPLAY and put(w, 4) is Received.REPLAY
    assert put(w, 7) is Received.RECORDED
    for seq in (6, 7):
        with pytest.raises(SequenceNotIncreasing):
            put(w, seq)
    assert w.sequences("A") == (7, 5)


def test_a_replay_moves_no_number() -> None:
    w: SyncWriter[int] = SyncWriter(durable={"A": 5})
    put(w, 7)
    put(w, None, origin="B")
    put(w, 1, origin="B")
    assert put(w, None) is Received.RECORDED and put(w, 3) is Received.REPLAY  # closes an open tx as a replay
    assert w.sequences("A") == (7, 5)


def test_a_replay_that_closes_an_open_transaction_drops_its_earlier_puts_at_once() -> None:
    w: SyncWriter[int] = SyncWriter(durable={"A": 5})
    put(w, None)
    put(w, 3)  # replay of a durable transaction whose first put was queued again
    assert w.pending_tables == [] and w.open_transactions == 0
    assert w.sequences("A") == (5, 5)


@pytest.mark.parametrize("closing_table", ["t", "other", "absent"])
def test_a_zero_row_closing_put_after_its_tables_were_flushed_makes_the_transaction_durable_at_once(
        closing_table: str) -> None:
    w: SyncWriter[int] = SyncWriter()
    w.put(table="other", origin="B", sequence=1, rows=1, size=1, payload=1, now=0.0)
    put(w, None)
    for table in ("other", "t"):
        w.complete_flush(w.plan_flush(table))
    w.put(table=closing_table, origin="A", sequence=7, rows=0, size=0, payload=None, now=0.0)
    assert w.sequences("A") == (7, 7) and w.open_transactions == 0


def test_a_tables_replay_mark_never_moves_backwards() -> None:
    w: SyncWriter[int] = SyncWriter(durable={"A": 5})
    put(w, 6)
    put(w, 7)
    plan = w.plan_flush("t", {"A": 9})  # the table already holds more than this writer remembers
    assert plan.apply == () and plan.skipped == 2
    assert plan.table_marks == {"A": 9}


def test_a_squashed_item_is_applied_unless_every_transaction_in_it_is_in_the_table() -> None:
    w: SyncWriter[int] = SyncWriter()
    put(w, 3)
    put(w, 4)
    w.squashed("t", [PendingItem((0, 1), 34, 2, 2)])
    plan = w.plan_flush("t", {"A": 3})
    assert [i.payload for i in plan.apply] == [34]


def test_an_abandoned_plan_changes_nothing() -> None:
    w: SyncWriter[int] = SyncWriter(durable={"A": 1})
    put(w, 2)
    marks = {"A": 1}
    plan = w.plan_flush("t", marks)
    assert plan.durable_after == {"A": 2} and plan.table_marks == {"A": 2}
    assert marks == {"A": 1}, "the caller's marks are not touched"
    assert w.sequences("A") == (2, 1) and w.pending_tables == ["t"] and w.open_transactions == 1


def test_a_plan_gone_stale_is_refused_and_a_fresh_one_commits() -> None:
    w: SyncWriter[int] = SyncWriter()
    put(w, 1)
    stale = w.plan_flush("t")
    put(w, 2)
    with pytest.raises(StaleFlushPlan):
        w.complete_flush(stale)
    assert w.sequences("A") == (2, None) and len(w.pending_items("t")) == 2
    w.complete_flush(w.plan_flush("t"))
    assert w.sequences("A") == (2, 2)


def test_a_squash_after_the_plan_makes_it_stale() -> None:
    w: SyncWriter[int] = SyncWriter()
    put(w, 1)
    put(w, 2)
    stale = w.plan_flush("t")
    w.squashed("t", [PendingItem((0, 1), 12, 2, 2)])
    with pytest.raises(StaleFlushPlan):
        w.complete_flush(stale)
    w.complete_flush(w.plan_flush("t"))
    assert w.sequences("A") == (2, 2)


def test_a_transaction_dropped_after_the_plan_makes_it_stale() -> None:
    w: SyncWriter[int] = SyncWriter(durable={"A": 5})
    put(w, 6)
    put(w, None)
    stale = w.plan_flush("t")
    assert put(w, 4) is Received.REPLAY  # closes the open transaction as a replay: its put is dropped
    with pytest.raises(StaleFlushPlan):
        w.complete_flush(stale)
    assert [i.payload for i in w.pending_items("t")] == [6]


def test_a_put_to_another_table_leaves_the_plan_fresh() -> None:
    w: SyncWriter[int] = SyncWriter()
    put(w, 1, table="t1")
    plan = w.plan_flush("t1")
    put(w, 2, table="t2")
    w.complete_flush(plan)
    assert w.sequences("A") == (2, 1)


def test_a_later_transaction_is_not_durable_before_an_earlier_one_of_its_origin() -> None:
    w: SyncWriter[int] = SyncWriter()
    put(w, 1, table="t1", origin="A")
    put(w, 2, table="t2", origin="A")
    plan = w.plan_flush("t2")
    assert plan.durable_after == {}
    w.complete_flush(plan)
    assert w.sequences("A") == (2, None)
    w.complete_flush(w.plan_flush("t1"))
    assert w.sequences("A") == (2, 2)


def test_another_origins_unflushed_table_holds_nothing_back() -> None:
    w: SyncWriter[int] = SyncWriter()
    put(w, 1, table="t1", origin="A")
    put(w, 2, table="t2", origin="B")
    plan = w.plan_flush("t2")
    assert plan.durable_after == {"B": 2}
    w.complete_flush(plan)
    assert w.sequences("B") == (2, 2) and w.sequences("A") == (1, None)
    w.complete_flush(w.plan_flush("t1"))
    assert w.sequences("A") == (1, 1)


def test_another_origin_may_not_write_into_an_open_transaction() -> None:
    w: SyncWriter[int] = SyncWriter()
    put(w, None, origin="A")
    with pytest.raises(InterleavedTransaction):
        put(w, None, origin="B")


@pytest.mark.parametrize("now, action", [(9.5, None), (10.0, FlushTable("t", FlushReason.LAG))])
def test_lag_flushes_at_exactly_max_replication_lag(now: float, action: FlushTable | None) -> None:
    w: SyncWriter[int] = SyncWriter(SyncSettings(max_replication_lag_s=10))
    put(w, 1)
    assert w.next_action(now) == action


@pytest.mark.parametrize("size, action", [(99, None), (100, FlushTable("t", FlushReason.SIZE))])
def test_size_flushes_at_exactly_max_in_memory_bytes(size: int, action: FlushTable | None) -> None:
    w: SyncWriter[int] = SyncWriter(SyncSettings(max_in_memory_bytes=100))
    put(w, 1, size=size)
    assert w.next_action(0.0) == action


@pytest.mark.parametrize("puts, action", [(2, None), (3, FlushTable("t", FlushReason.COUNT))])
def test_count_flushes_at_exactly_max_syncs_per_url(puts: int, action: FlushTable | None) -> None:
    w: SyncWriter[int] = SyncWriter(SyncSettings(max_syncs_per_url=3))
    for seq in range(1, puts + 1):
        put(w, seq)
    assert w.next_action(0.0) == action


def test_an_open_transaction_silent_for_the_timeout_is_discarded_and_other_origins_are_served() -> None:
    w: SyncWriter[int] = SyncWriter(SyncSettings(transaction_timeout_s=10))
    put(w, None, table="t1", origin="A", now=0)
    with pytest.raises(InterleavedTransaction):
        put(w, 1, table="t2", origin="B", now=9.9)
    assert w.next_deadline() == 10
    assert put(w, 1, table="t2", origin="B", now=10) is Received.RECORDED
    assert w.pending_tables == ["t2"]  # A's put went with its transaction
    w.complete_flush(w.plan_flush("t2"))
    assert w.sequences("B") == (1, 1)
    with pytest.raises(TransactionDiscarded):  # A's client must replay, not carry on mid-transaction
        put(w, 2, table="t1", origin="A", now=11)
    assert put(w, None, table="t1", origin="A", now=12) is Received.RECORDED


def test_the_flusher_expires_a_silent_transaction_so_durability_moves_on() -> None:
    w: SyncWriter[int] = SyncWriter(SyncSettings(transaction_timeout_s=10))
    put(w, 1, table="t1", origin="B", now=0)
    put(w, None, table="t2", origin="A", now=0)
    assert w.expire(9) is None and w.expire(10) == "A"
    w.complete_flush(w.plan_flush("t1"))
    assert w.sequences("B") == (1, 1) and w.open_transactions == 0


def test_squashing_leaves_the_open_transactions_puts_alone() -> None:
    w: SyncWriter[int] = SyncWriter()
    put(w, 1)
    put(w, 2)
    put(w, None)
    assert [i.tx_ids for i in w.squashable_items("t")] == [(0,), (1,)]
    w.squashed("t", [PendingItem((0, 1), 12, 2, 2)])
    assert [i.tx_ids for i in w.pending_items("t")] == [(0, 1), (2,)]
