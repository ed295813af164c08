"""The outage policy: a source waits for as long as it takes, warns every 30 s naming what it waits
for and the slot's retained WAL, backs off up to a cap, and stops only over --max-retained-wal."""

from __future__ import annotations

import pytest

from spec.clock import after, elapsed
from spec.pgoutput.feedback import SlotFeedback
from spec.pgoutput.outage import Away, OutagePolicy, format_bytes, parse_bytes, postgres_transient

SYNC = "grpc://127.0.0.1:1"


def test_waits_for_ever_with_a_warning_every_30_s() -> None:
    policy = OutagePolicy("s")
    warnings = []
    now = 100.0
    while now < 100.0 + 3600:  # an hour away: never a stop
        step = policy.failed(now, Away.SYNC_SERVER, SYNC, "UNAVAILABLE", 5 << 20)
        assert step.stop is None and 0 < step.retry_in_s <= policy.backoff_max_s
        if step.warning is not None:
            warnings.append((now, step.warning))
        now = after(now, step.retry_in_s + policy.attempt_s)  # a clock in whole units, as the machines count
    assert len(warnings) == pytest.approx(3600 / 30, abs=2)
    assert all(elapsed(a, b) >= 30 for (a, _), (b, _) in zip(warnings, warnings[1:]))
    first = warnings[0][1]
    assert first.startswith(f"waiting for the sync server at {SYNC} for 3") and "slot s retains 5.0 MiB of WAL" in first
    assert policy.recovered(now) == f"the sync server is back after {now - 100:.0f} s"
    assert policy.recovered(now) is None


def test_backoff_doubles_to_its_cap_and_restarts_with_a_new_outage() -> None:
    policy = OutagePolicy("s", backoff_initial_s=0.1, backoff_max_s=1.0)
    delays = [policy.failed(float(i), Away.POSTGRES, "pg", "closed", None).retry_in_s for i in range(6)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    policy.recovered(6.0)
    assert policy.failed(7.0, Away.POSTGRES, "pg", "closed", None).retry_in_s == 0.1


def test_postgres_away_warns_that_the_retained_wal_is_unknown() -> None:
    policy = OutagePolicy("s", warn_every_s=30)
    policy.failed(0.0, Away.POSTGRES, "postgresql://u@h:5432/d", "closed", None)
    warning = policy.failed(31.0, Away.POSTGRES, "postgresql://u@h:5432/d", "closed", None).warning
    assert warning == ("waiting for Postgres at postgresql://u@h:5432/d for 31 s (closed); "
                       "what slot s retains is unknown while Postgres is away")


def test_stops_with_one_line_over_max_retained_wal() -> None:
    policy = OutagePolicy("s", max_retained_wal=parse_bytes("1GB"))
    assert policy.failed(0.0, Away.SYNC_SERVER, SYNC, "x", 1 << 30).stop is None
    step = policy.failed(1.0, Away.SYNC_SERVER, SYNC, "x", (1 << 30) + 1)
    assert step.stop is not None and "\n" not in step.stop
    assert step.stop.startswith("slot s retains 1.0 GiB of WAL, more than --max-retained-wal 1.0 GiB")


def test_transient_postgres_failures() -> None:
    assert postgres_transient(None) and postgres_transient("08006") and postgres_transient("57P01")
    assert postgres_transient("55006") and postgres_transient("53300") and postgres_transient("57P03")
    assert not postgres_transient("28P01") and not postgres_transient("42704") and not postgres_transient("3D000")


def test_sizes() -> None:
    assert parse_bytes("20GB") == 20 << 30 and parse_bytes("512MiB") == 512 << 20 and parse_bytes("4096") == 4096
    assert parse_bytes("1.5kB") == 1536
    for bad in ("lots", "-1MB", "0", "inf", "infGB", "nan", "1e400"):
        with pytest.raises(ValueError):
            parse_bytes(bad)
    assert format_bytes(512) == "512 B" and format_bytes(3 << 20) == "3.0 MiB" and format_bytes(5 << 40) == "5120.0 GiB"


def test_a_resent_transaction_is_recognised() -> None:
    feedback = SlotFeedback()
    feedback.on_sent(100)
    feedback.on_sent(200)
    feedback.on_durable(100)
    assert feedback.already_sent(100) and feedback.already_sent(200) and not feedback.already_sent(201)
