"""The sync server's endpoint (spec/sync/server.py) on a fake clock: no sockets, no store, no threads.

Deadlines are checked one tick before and at the boundary, the order expire -> retry -> flush,
admission (draining, busy, a call that already ended) and the durable numbers after a restart.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pyarrow as pa
import pytest

from conformance.sync.suite import DESCS, _cmd, rows_batch
from spec.sync.errors import (
    InterruptedPut, InvalidTablePath, ServerDraining, ServerRestarted, StoreLocationRefused, TransactionDiscarded,
    UnsupportedFormat, UnstorableSchema,
)
from spec.sync.confinement import check_store_location
from spec.sync.messages import ColumnDescriptor, ColumnRole, StorageLocation, TableFormat
from spec.sync.schema import SyncSchema
from spec.sync.server import SyncServerEndpoint, TransactionExpired, recorded_durable
from spec.sync.squash import SquashedChange
from spec.sync.writer import FlushReason, FlushTable, Received, SyncSettings


def before(t: float) -> float:
    """One tick before ``t``."""
    return math.nextafter(t, -math.inf)


def _change(key: int) -> SquashedChange:
    batch = rows_batch([(None, key, "v")])
    return SquashedChange.of_put(SyncSchema.validate(DESCS, batch.schema), [batch])


def _put(ep: SyncServerEndpoint, table: str, origin: str, seq: int | None, now: float, key: int = 1) -> Received | None:
    return ep.record(_cmd(table, origin, seq), table=table, rows=1, change=_change(key), now=now, claim=lambda: True)


def _flush(ep: SyncServerEndpoint, action: FlushTable) -> None:
    ep.flushed(ep.plan_flush(action.table, {}, action.reason))


SETTINGS = SyncSettings(max_replication_lag_s=10.0, transaction_timeout_s=60.0, flush_task_interval_s=900.0)


def test_pending_data_is_flushed_at_the_lag_and_not_a_tick_before() -> None:
    ep = SyncServerEndpoint(SETTINGS)
    assert _put(ep, "t", "A", 1, now=5.0) is Received.RECORDED
    assert ep.next_deadline(5.0) == 15.0
    assert ep.next_action(before(15.0)) is None
    action = ep.next_action(15.0)
    assert action == FlushTable("t", FlushReason.LAG)
    assert isinstance(action, FlushTable)
    _flush(ep, action)
    assert ep.sequences("A") == (1, 1) and ep.next_action(15.0) is None
    assert ep.next_deadline(15.0) == 15.0 + 900.0  # nothing pending: the flush task's interval


def test_a_silent_transaction_is_discarded_at_its_timeout_and_not_a_tick_before() -> None:
    ep = SyncServerEndpoint(SyncSettings(max_replication_lag_s=3600.0, transaction_timeout_s=60.0))
    _put(ep, "t", "A", None, now=0.0)  # opens a transaction that never closes
    assert ep.next_deadline(0.0) == 60.0
    assert ep.next_action(before(60.0)) is None and ep.open_transactions == 1
    assert ep.next_action(60.0) == TransactionExpired("A", 60.0)
    assert ep.open_transactions == 0 and ep.pending_bytes == 0
    with pytest.raises(TransactionDiscarded):  # its origin is told, once
        _put(ep, "t", "A", 1, now=61.0)


def test_expiry_then_retry_then_flush() -> None:
    ep = SyncServerEndpoint(SETTINGS)
    _put(ep, "broken", "A", 1, now=0.0)
    action = ep.next_action(10.0)
    assert action == FlushTable("broken", FlushReason.LAG)
    failure = ep.flush_failed("broken", "OSError: disk full", now=10.0)
    assert (failure.failures, failure.retry_at) == (1, 11.0)
    _put(ep, "good", "B", 1, now=10.0)
    _put(ep, "other", "C", None, now=10.0)  # C's transaction stays open
    # At 70: C's transaction is past its timeout, broken's retry is due, good is past its lag.
    assert ep.next_action(70.0) == TransactionExpired("C", 60.0)
    assert ep.next_action(70.0) == FlushTable("broken", FlushReason.RETRY)
    ep.flush_failed("broken", "OSError: disk full", now=70.0)
    action = ep.next_action(70.0)
    assert action == FlushTable("good", FlushReason.LAG)  # the failing table waits; the others flush
    assert isinstance(action, FlushTable)
    _flush(ep, action)
    assert ep.next_action(70.0) is None
    assert ep.sequences("B") == (1, 1) and ep.sequences("A") == (1, None)


def test_a_failed_table_is_retried_after_a_capped_doubling_wait() -> None:
    ep = SyncServerEndpoint(SETTINGS)
    _put(ep, "t", "A", 1, now=0.0)
    now, waits = 10.0, []
    for _ in range(5):
        action = ep.next_action(now)
        assert isinstance(action, FlushTable) and action.table == "t"
        retry_at = ep.flush_failed("t", "OSError", now).retry_at
        waits.append(retry_at - now)
        assert ep.next_deadline(now) == retry_at
        assert ep.next_action(before(retry_at)) is None  # skipped by the policy until due
        now = retry_at
    assert waits == [1.0, 2.0, 4.0, 5.0, 5.0]
    action = ep.next_action(now)
    assert action == FlushTable("t", FlushReason.RETRY)
    assert isinstance(action, FlushTable)
    _flush(ep, action)
    assert ep.failing_tables() == {} and ep.sequences("A") == (1, 1)


def test_admission_order_draining_then_watermark_then_the_call() -> None:
    ep = SyncServerEndpoint(SyncSettings(high_watermark_bytes=_change(1).batch.nbytes))
    assert ep.admit(_cmd("", "A", None, ()), rows=0) is True  # a probe
    assert ep.admit(_cmd("t", "A", 1), rows=1) is False
    claims: list[bool] = []

    def claim() -> bool:
        claims.append(True)
        return True

    assert ep.record(_cmd("t", "A", None), table="t", rows=1, change=_change(1), now=0.0, claim=claim) is Received.RECORDED
    assert ep.record(_cmd("t", "A", 1), table="t", rows=1, change=_change(2), now=0.0, claim=claim) is None  # busy
    assert len(claims) == 1, "a put over the high-watermark is refused before its call is claimed"
    with pytest.raises(InterruptedPut):
        ep.record(_cmd("t", "A", 1), table="t", rows=0, change=None, now=0.0, claim=lambda: False)
    assert ep.sequences("A") == (None, None) and ep.open_transactions == 1
    assert ep.start_draining() == ["t"]
    with pytest.raises(ServerDraining):
        ep.admit(_cmd("t", "A", 1), rows=1)
    assert ep.admit(_cmd("", "A", None, ()), rows=0) is True  # probes are still answered


def test_only_the_first_answer_of_a_server_life_says_first() -> None:
    ep = SyncServerEndpoint()
    answers = [ep.busy(), ep.accepted("A"), ep.accepted("B"), ep.busy()]
    assert [a.first for a in answers] == [True, False, False, False]


def test_after_a_restart_each_origin_is_durable_at_the_largest_number_any_table_records() -> None:
    tables = [{"A": 3, "B": 7}, {"A": 5}, {"A": 4, "C": 1}]
    assert recorded_durable(tables) == {"A": 5, "B": 7, "C": 1}
    assert recorded_durable(reversed(tables)) == {"A": 5, "B": 7, "C": 1}
    ep = SyncServerEndpoint(durable=recorded_durable(tables))
    answer = ep.accepted("A")
    assert (answer.memory_sequence_number, answer.durable_sequence_number, answer.first) == (5, 5, True)
    assert _put(ep, "t", "A", 5, now=0.0) is Received.REPLAY  # acknowledged, not applied again
    assert ep.pending_bytes == 0


def test_reconfigured_thresholds_decide_from_then_on() -> None:
    ep = SyncServerEndpoint(SETTINGS)
    _put(ep, "t", "A", 1, now=0.0)
    assert ep.next_action(1.0) is None
    ep.reconfigure(SyncSettings(max_replication_lag_s=1.0))
    assert ep.next_action(1.0) == FlushTable("t", FlushReason.LAG)


def test_a_failed_table_whose_data_was_discarded_is_not_retried_for_ever() -> None:
    """Its open transaction timed out after its flush failed: nothing is left to write, so its retry
    must not stay the next deadline (before, a deadline in the past: the flusher woke without pause)."""
    ep = SyncServerEndpoint(SETTINGS)
    _put(ep, "t", "A", None, now=0.0)  # an open transaction's put
    assert ep.next_action(10.0) == FlushTable("t", FlushReason.LAG)
    ep.flush_failed("t", "OSError: disk full", now=10.0)
    assert ep.next_action(60.0) == TransactionExpired("A", 60.0)
    assert ep.pending_tables == []
    assert ep.next_action(60.0) is None
    assert ep.next_deadline(60.0) == 60.0 + 900.0 and ep.failing_tables() == {}


def test_a_put_is_refused_for_the_first_thing_wrong_with_it_in_a_fixed_order() -> None:
    bad_path = _cmd("../escape", "A", 1)
    nowhere = StorageLocation(location="file:///elsewhere")
    with pytest.raises(UnsupportedFormat):  # the format before the path
        SyncServerEndpoint.destination(replace(bad_path, format=TableFormat.ICEBERG, store=nowhere), ())
    with pytest.raises(InvalidTablePath):  # the path before the store location
        SyncServerEndpoint.destination(replace(bad_path, store=nowhere), ())
    with pytest.raises(StoreLocationRefused):
        SyncServerEndpoint.destination(replace(_cmd("t", "A", 1), store=nowhere), ())
    assert SyncServerEndpoint.destination(_cmd("a/b", "A", 1), ()) == ("a/b", None)
    batch = rows_batch([(None, 1, "v")])
    duplicated = (*DESCS, ColumnDescriptor(role=ColumnRole.VALUE, name="V"))
    wide = pa.table({**{n: batch[n] for n in batch.column_names}, "V2": batch["v"]})
    schema = SyncSchema.validate(duplicated, wide.schema)
    fits: list[SyncSchema] = []
    with pytest.raises(UnstorableSchema):  # the columns before their fit to the table
        SyncServerEndpoint.change("t", _cmd("t", "A", 1, duplicated), schema, wide.to_batches(),
                                  lambda s: fits.append(s) or None)  # type: ignore[func-returns-value]
    assert fits == []
    assert SyncServerEndpoint.change("t", _cmd("t", "A", None), None, [], lambda s: None) == (None, None)  # type: ignore[arg-type, return-value]


def test_a_put_naming_another_server_life_is_refused_and_a_probe_tells_this_one() -> None:
    """The server-life extension: a put sent to an earlier life of the server is refused before anything of it
    is recorded (recorded, it would hide the restart from its client); a put naming no life, or this one, is
    admitted; every answer names the life."""
    ep = SyncServerEndpoint(SETTINGS, life=8)
    with pytest.raises(ServerRestarted, match="server life 7, but this server's life is 8"):
        ep.admit(replace(_cmd("t", "A", 1), server_life=7), rows=1)
    probe = replace(_cmd("", "A", None, ()), server_life=7)
    assert ep.admit(probe, rows=0) is True and ep.accepted("A").server_life == 8
    assert ep.admit(replace(_cmd("t", "A", 1), server_life=8), rows=1) is False
    assert ep.admit(_cmd("t", "A", 1), rows=1) is False
    assert ep.busy().server_life == 8


def test_a_store_location_with_dotdot_before_a_scheme_separator_is_refused() -> None:
    """``..`` anywhere in a location leaves the allowed one, also before a ``://`` further on: the location
    ``/srv/allowed/../../escaped://y`` is the local directory ``/srv/../escaped:/y`` (found by the sync input corpus:
    the reference server wrote a table there)."""
    allowed = ("/srv/allowed",)
    for location in ("/srv/allowed/../../escaped://y", "/srv/allowed/../x://y", "file:///srv/allowed/../x"):
        with pytest.raises(StoreLocationRefused):
            check_store_location(StorageLocation(location=location), allowed)
    assert check_store_location(StorageLocation(location="/srv/allowed/x://y"), allowed) == "/srv/allowed/x://y"
