"""The public API says directory (issue #36): ``stop_coordinator`` and ``StreamingShuffle.coordinator``
are deprecated aliases of ``stop_directory`` and ``StreamingShuffle.directory`` that warn once."""

from __future__ import annotations

import warnings

import reference.spark as api
from reference.spark import shuffle


class Context:
    """A SparkContext without a default shuffle service (nothing to close)."""


def test_stop_coordinator_still_stops_and_warns_once() -> None:
    shuffle._warned.discard("stop_coordinator")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        api.stop_coordinator(Context())
        api.stop_coordinator(Context())
        api.stop_directory(Context())
    assert [str(w.message) for w in seen] == [
        "stop_coordinator is deprecated: use stop_directory (the coordinator is now called the directory)"]
    assert all(w.category is DeprecationWarning for w in seen)


def test_the_coordinator_attribute_is_the_directory_and_warns_once() -> None:
    service = object.__new__(api.StreamingShuffle)
    service.directory = object()  # type: ignore[assignment]
    shuffle._warned.discard("StreamingShuffle.coordinator")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert service.coordinator is service.directory
        assert service.coordinator is service.directory
    assert len(seen) == 1 and "StreamingShuffle.directory" in str(seen[0].message)
