"""A task lets its process keep freed heap up to its memory budget (glibc), never less than an earlier task asked."""

from __future__ import annotations

import os

import pytest

from reference.shuffle import heap


def test_the_freed_heap_kept_only_grows_and_is_what_the_largest_budget_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    monkeypatch.setattr(heap, "_MALLOPT", mallopt)
    monkeypatch.setattr(heap, "_retained", 0)
    assert heap.retain_freed_heap(8 << 20) == 8 << 20
    assert heap.retain_freed_heap(4 << 20) == 8 << 20  # a smaller budget keeps what a larger one asked
    assert heap.retain_freed_heap(64 << 20) == 64 << 20
    assert calls == [(heap.M_MMAP_THRESHOLD, 8 << 20), (heap.M_TRIM_THRESHOLD, 8 << 20),
                     (heap.M_MMAP_THRESHOLD, heap.MMAP_THRESHOLD_MAX), (heap.M_TRIM_THRESHOLD, 64 << 20)]


def test_glibc_takes_the_settings_and_elsewhere_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_retained", 0)
    glibc = "CS_GNU_LIBC_VERSION" in os.confstr_names and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    assert heap.retain_freed_heap(32 << 20) == (32 << 20 if glibc else 0)
