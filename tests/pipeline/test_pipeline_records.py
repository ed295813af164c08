"""Typed records through the shuffle, their timings in the report, and fault plans that stay out of the way."""

from __future__ import annotations

import pickle
from typing import cast

from reference.pipeline.changes import StreamSpec
from reference.pipeline.coordination import Member
from reference.pipeline.faults import NO_FAULTS, CrashSink
from reference.pipeline.records import ChangeRecord, PartTiming
from reference.pipeline.report import latency_ms, throughput


def test_every_change_crosses_the_shuffle_as_a_plain_tuple_and_reads_back_equal() -> None:
    spec = StreamSpec(seed=3, changes=500, keys=60, origins=2)
    for origin in range(spec.origins):
        for tx in spec.transactions(origin):
            for change in tx.changes:
                record = ChangeRecord(origin, tx.seq, len(tx.changes), 1_700_000_000_000_000_000, change)
                wire = pickle.loads(pickle.dumps(record.wire()))
                assert type(wire) is tuple
                assert ChangeRecord.read(wire) == record


def test_latency_is_weighted_by_changes_and_throughput_spans_first_commit_to_last_durable() -> None:
    ms = 1_000_000
    timings = [PartTiming(committed_ns=0, accepted_ns=10 * ms, durable_ns=30 * ms, changes=1),
               PartTiming(committed_ns=5 * ms, accepted_ns=25 * ms, durable_ns=105 * ms, changes=3)]
    figures = latency_ms(timings)
    assert figures["accepted"]["p50"] == 20.0 and figures["accepted"]["max"] == 20.0
    assert figures["durable"]["p50"] == 100.0 and figures["durable"]["max"] == 100.0
    rate, seconds = throughput(4, timings, fallback_s=99.0)
    assert seconds == 0.105 and round(rate, 3) == round(4 / 0.105, 3)


def test_without_a_fault_plan_and_for_other_sinks_records_pass_untouched() -> None:
    records = [(1, (0, 1, 1, 0, 0, 0, None, 1, 2, "n", True))] * 5
    member = cast(Member, object())  # never touched: no plan claims anything here
    assert NO_FAULTS.sink_records(records, 0, "t0", member) is records
    plan = CrashSink("run", reader=1, after=1)
    assert list(plan.sink_records(records, 0, "t0", member)) == records
    assert pickle.loads(pickle.dumps(plan)) == plan  # shipped to the tasks in the job's closure
