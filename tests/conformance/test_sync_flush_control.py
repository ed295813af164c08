"""The reference sync target's flush-control lines: each answered in one line, bad ones refused."""

from __future__ import annotations

from pathlib import Path

from conformance.sync.clock import SPIN_LIMIT, ManualClock
from conformance.sync.reference_target import answer
from spec.sync.server import SyncServerEndpoint
from spec.sync.writer import SyncSettings


def test_lines_set_thresholds_move_the_clock_and_report_pending_bytes() -> None:
    endpoint, clock = SyncServerEndpoint(), ManualClock()
    assert answer(endpoint, clock, "POLICY 10 3 500\n") == "OK"
    settings = endpoint.settings
    assert (settings.max_replication_lag_s, settings.max_syncs_per_url, settings.max_in_memory_bytes) == (10.0, 3, 500)
    assert answer(endpoint, clock, "ADVANCE 9") == "OK"
    assert answer(endpoint, clock, "ADVANCE 1") == "OK"
    assert clock.now() == 10.0
    assert answer(endpoint, clock, "PENDING") == "PENDING 0"


def test_bad_lines_are_refused_in_one_line_and_change_nothing() -> None:
    endpoint, clock = SyncServerEndpoint(), ManualClock()
    for line in ("ADVANCE -1", "ADVANCE soon", "POLICY 10 0 500", "POLICY -1 3 500", "POLICY 10 3", "FLUSH", ""):
        reply = answer(endpoint, clock, line)
        assert reply.startswith("ERROR ") and "\n" not in reply, (line, reply)
    assert clock.now() == 0.0 and endpoint.settings == SyncSettings()


def test_a_clock_waking_at_deadlines_ends_a_sleep_only_at_its_deadline_or_a_ring() -> None:
    import threading

    clock = ManualClock(wakes_at_deadlines=True)
    alarm = clock.alarm()
    woke: list[float] = []

    def sleeper() -> None:
        for deadline in (10.0, 100.0):
            alarm.sleep_until(deadline)
            woke.append(clock.now())
        alarm.close()

    thread = threading.Thread(target=sleeper)
    thread.start()
    clock.settle()
    clock.advance(9.5)
    assert woke == []  # woken before its deadline, it went back to sleep
    clock.advance(0.5)
    assert woke == [10.0]
    clock.ring_all()  # a ring ends the sleep before its deadline
    thread.join(timeout=30)
    assert woke == [10.0, 10.0] and not thread.is_alive()


def test_settings_lines_set_any_setting_off_its_default_and_bare_brings_the_targets_own_back() -> None:
    from conformance.sync.reference_target import TARGET_SETTINGS

    endpoint, clock = SyncServerEndpoint(TARGET_SETTINGS), ManualClock()
    line = ("SETTINGS transaction_timeout_s=0.5 flush_task_interval_s=7 write_lock_timeout_s=0.25 max_syncs_per_url=3 "
            "high_watermark_bytes=48 initial_backoff_s=3 max_backoff_s=12")
    assert answer(endpoint, clock, line) == "OK"
    s, failures = endpoint.settings, endpoint.flush_failures
    assert (s.transaction_timeout_s, s.flush_task_interval_s, s.write_lock_timeout_s, s.max_syncs_per_url,
            s.high_watermark, s.max_replication_lag_s) == (0.5, 7.0, 0.25, 3, 48, TARGET_SETTINGS.max_replication_lag_s)
    assert (failures.initial_backoff_s, failures.max_backoff_s) == (3.0, 12.0)
    assert answer(endpoint, clock, "SETTINGS max_in_memory_bytes=500") == "OK"  # each line replaces the last
    assert endpoint.settings == TARGET_SETTINGS.__class__(**{**vars(TARGET_SETTINGS), "max_in_memory_bytes": 500})
    assert (failures.initial_backoff_s, failures.max_backoff_s) == (1.0, 5.0)
    assert answer(endpoint, clock, "SETTINGS") == "OK" and endpoint.settings == TARGET_SETTINGS
    for bad in ("SETTINGS colour=3", "SETTINGS max_syncs_per_url=0", "SETTINGS transaction_timeout_s=-1",
                "SETTINGS transaction_timeout_s=nan", "SETTINGS max_backoff_s=inf", "SETTINGS high_watermark_bytes=x",
                "SETTINGS max_syncs_per_url=2 max_syncs_per_url=3"):
        reply = answer(endpoint, clock, bad)
        assert reply.startswith("ERROR ") and "\n" not in reply, (bad, reply)
    assert endpoint.settings == TARGET_SETTINGS


def test_settings_lines_set_the_stores_row_groups_and_bare_brings_its_own_back(tmp_path: Path) -> None:
    """``row-groups``: the store's row-group limits are settings of the line too, each at least 1."""
    from conformance.sync.reference_target import serve
    from spec.sync.writer import RowGroupLimits

    server, endpoint, clock = serve(str(tmp_path))
    try:
        assert answer(endpoint, clock, "SETTINGS row_group_max_rows=3 row_group_max_bytes=40", server) == "OK"
        assert server.store.settings.row_groups == RowGroupLimits(3, 40)
        for bad in ("SETTINGS row_group_max_rows=0", "SETTINGS row_group_max_bytes=0", "SETTINGS row_group_max_rows=x"):
            assert answer(endpoint, clock, bad, server).startswith("ERROR "), bad
        assert server.store.settings.row_groups == RowGroupLimits(3, 40)
        assert answer(endpoint, clock, "SETTINGS max_syncs_per_url=2", server) == "OK"
        assert server.store.settings.row_groups == RowGroupLimits()
    finally:
        server.shutdown(grace_s=0)


def test_the_walks_put_an_event_at_the_edge_of_every_setting_the_target_takes() -> None:
    """The settings table the walks are derived from holds every setting of the sync server, and no other (the
    store's row groups aside: no walk reads them, the derived row-group case does)."""
    from conformance.sync.reference_target import SETTING_NAMES
    from conformance.sync.walks import SETTING_EDGES

    assert sorted(SETTING_EDGES) == sorted(SETTING_NAMES)


def test_a_sleeper_whose_deadline_is_never_ahead_is_held_asleep_and_advance_says_so() -> None:
    """A deadline computed at the time it is asked (what a deadline one tick late makes of a flusher) would keep a
    thread from ever sleeping: it is held asleep past SPIN_LIMIT sleeps at one time, and ADVANCE answers ERROR."""
    import threading

    clock = ManualClock(wakes_at_deadlines=True)
    alarm = clock.alarm()
    stop = threading.Event()
    asked: list[float] = []

    def spinner() -> None:
        while not stop.is_set():
            asked.append(clock.now())
            alarm.sleep_until(clock.now())
        alarm.close()

    threading.Thread(target=spinner, daemon=True).start()
    assert answer(SyncServerEndpoint(), clock, "ADVANCE 1").startswith("ERROR ")
    assert not clock.take_spun() and asked.count(1.0) <= SPIN_LIMIT + 1
    stop.set()
    clock.advance(1)  # the spinner's sleep is over once the time moves; it ends
    fair = ManualClock(wakes_at_deadlines=True)
    assert answer(SyncServerEndpoint(), fair, "ADVANCE 1") == "OK" and not fair.take_spun()
