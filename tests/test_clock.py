"""The machines' one clock (spec/clock.py): instants and durations in whole milliseconds add and subtract to exactly
what a millisecond clock reads, where float seconds drift (0.1 + 0.2 is 0.30000000000000004); binary fractions, which
floats hold exactly, stay exact too."""

from __future__ import annotations

from spec.clock import after, elapsed, ms_after, periods_past

STARTS_MS = range(0, 3000, 7)
DURATIONS_MS = (1, 100, 150, 200, 300, 700, 1001, 2200)


def test_whole_milliseconds_add_up_to_the_instant_a_millisecond_clock_reads() -> None:
    drifted = 0
    for start in STARTS_MS:
        for duration in DURATIONS_MS:
            exact = (start + duration) / 1000
            assert ms_after(start / 1000, duration) == exact, (start, duration)
            assert after(start / 1000, duration / 1000) == exact, (start, duration)
            assert after(exact, -duration / 1000) == start / 1000, (start, duration)
            assert elapsed(start / 1000, exact) == duration / 1000, (start, duration)
            drifted += start / 1000 + duration / 1000 != exact
    assert drifted > 100  # the instants where float seconds would have drifted, each held above


def test_binary_fractions_stay_exact_and_large_instants_keep_their_milliseconds() -> None:
    tick = 2.0 ** -10
    assert after(3 * tick, tick) == 4 * tick and elapsed(tick, 5 * tick) == 4 * tick
    assert after(123456.789, 0.2) == 123456.989 and elapsed(123456.789, 123456.989) == 0.2


def test_periods_past_counts_whole_periods_from_an_inexact_start() -> None:
    for period in (100, 200, 300, 700):
        for k in range(1, 40):
            start = period / 1000
            assert periods_past(start, (period * (1 + k)) / 1000, period) == k + 1, (period, k)
            assert periods_past(start, (period * (1 + k) - 1) / 1000, period) == k, (period, k)


def test_an_instant_or_duration_no_clock_reaches_adds_as_floats_do() -> None:
    for ever in (1e300, float("inf"), 1e12):
        assert after(5.0, ever) == 5.0 + ever and after(ever, 0.25) == ever + 0.25
        assert elapsed(2.0, ever) == ever - 2.0 and elapsed(-ever, 1.0) == 1.0 + ever
    assert abs(after(5.0, 1e12 - 1) - (1e12 + 4)) < 1e-3  # just short of it: whole units, at a float's own rounding
