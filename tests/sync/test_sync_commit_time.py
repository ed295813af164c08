"""spec.sync.commit_time: a commit's timestamp never precedes the previous commit's (Delta's in-commit rule)."""

from __future__ import annotations

import pytest

from spec.sync.commit_time import commit_timestamp_ms


@pytest.mark.parametrize(("now", "previous", "stamped"), [
    (5_000, None, 5_000),  # no previous stamp: the wall clock
    (5_000, 4_000, 5_000),  # the clock ahead: the clock
    (5_000, 4_999, 5_000),  # exactly one ms after: the clock
    (5_000, 5_000, 5_001),  # the same ms: one after the previous
    (5_000, 65_000, 65_001),  # the clock a minute back: one after the previous
])
def test_a_commit_is_stamped_at_the_later_of_now_and_one_ms_after_the_previous(
        now: int, previous: int | None, stamped: int) -> None:
    assert commit_timestamp_ms(now, previous) == stamped
