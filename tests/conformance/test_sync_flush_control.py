"""The reference sync target's flush-control lines: each answered in one line, bad ones refused."""

from __future__ import annotations

from typing import Any, cast

from conformance.sync.reference_target import RunnerClock, answer
from reference.sync.server import SyncServer


class FakeServer:
    """Records what the lines asked of the server."""

    def __init__(self) -> None:
        self.thresholds: dict[str, Any] = {}
        self.policy_runs_at: list[float] = []
        self.clock = RunnerClock()

    def set_flush_thresholds(self, **thresholds: Any) -> None:
        self.thresholds = thresholds

    def run_policy(self) -> None:
        self.policy_runs_at.append(self.clock())

    def stats(self) -> dict[str, Any]:
        return {"in_memory_bytes": 1234}


def test_lines_set_thresholds_move_the_clock_and_report_pending_bytes() -> None:
    fake = FakeServer()
    server = cast(SyncServer, fake)
    assert answer(server, fake.clock, "POLICY 10 3 500\n") == "OK"
    assert fake.thresholds == {"max_replication_lag_s": 10.0, "max_syncs_per_url": 3, "max_in_memory_bytes": 500}
    assert answer(server, fake.clock, "ADVANCE 9") == "OK"
    assert answer(server, fake.clock, "ADVANCE 1") == "OK"
    assert fake.policy_runs_at == [9.0, 10.0]
    assert answer(server, fake.clock, "PENDING") == "PENDING 1234"


def test_bad_lines_are_refused_in_one_line_and_change_nothing() -> None:
    fake = FakeServer()
    server = cast(SyncServer, fake)
    for line in ("ADVANCE -1", "ADVANCE soon", "POLICY 10 0 500", "POLICY -1 3 500", "POLICY 10 3", "FLUSH", ""):
        reply = answer(server, fake.clock, line)
        assert reply.startswith("ERROR ") and "\n" not in reply, (line, reply)
    assert fake.clock() == 0.0 and fake.policy_runs_at == [] and fake.thresholds == {}
