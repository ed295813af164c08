"""The compact form of bytes and text in vectors: read back what it stands for, refused past its bound or when
malformed, with one typed error and before anything is allocated."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.compact_bytes import MAX_EXPANDED_BYTES, SHORTEST_RUN, CompactFormError, compact_bytes, \
    expand_bytes, expand_text


@pytest.mark.parametrize("form, data", [
    ("", b""), ("00ff", b"\x00\xff"), ("ABcd", b"\xab\xcd"), ({"repeat": "ab", "times": 3}, b"\xab" * 3),
    ({"repeat": "0102", "times": 0}, b""), (["01", {"repeat": "00", "times": 2}, "ff"], b"\x01\x00\x00\xff"), ([], b""),
])
def test_each_shape_reads_as_the_bytes_it_stands_for(form: Any, data: bytes) -> None:
    assert expand_bytes(form) == data


def test_what_compact_bytes_writes_reads_back_and_is_short() -> None:
    data = b"\x01" + bytes(SHORTEST_RUN) + b"\x02\x03" + b"\xff" * (SHORTEST_RUN - 1)
    form = compact_bytes(data)
    assert form == ["01", {"repeat": "00", "times": SHORTEST_RUN}, "0203" + "ff" * (SHORTEST_RUN - 1)]
    assert expand_bytes(form) == data and compact_bytes(b"\x07\x07") == "0707"


def test_the_bound_is_inclusive_and_counts_every_part() -> None:
    assert len(expand_bytes(["00", {"repeat": "00", "times": MAX_EXPANDED_BYTES - 1}])) == MAX_EXPANDED_BYTES
    with pytest.raises(CompactFormError, match=f"expands to {MAX_EXPANDED_BYTES + 1} bytes"):
        expand_bytes(["00", {"repeat": "00", "times": MAX_EXPANDED_BYTES}])
    with pytest.raises(CompactFormError, match="past the bound"):  # refused before allocating 2**80 bytes
        expand_bytes({"repeat": "0102", "times": 2**79})
    with pytest.raises(CompactFormError, match="past the bound"):  # the UTF-8 is bounded, not the characters
        expand_text({"repeat": "é", "times": MAX_EXPANDED_BYTES // 2 + 1})


@pytest.mark.parametrize("form", [
    "0", "zz", "00 ff", 7, None, [["00"]], [1], {"repeat": "00"}, {"times": 2}, {"repeat": "00", "times": 2, "x": 1},
    {"repeat": "00", "times": -1}, {"repeat": "00", "times": 1.0}, {"repeat": "00", "times": "2"},
    {"repeat": "00", "times": True}, {"repeat": "0", "times": 1}, {"repeat": 0, "times": 1},
])
def test_a_malformed_byte_form_is_refused_with_one_typed_error(form: Any) -> None:
    with pytest.raises(CompactFormError):
        expand_bytes(form)


@pytest.mark.parametrize("form, text", [("", ""), ("é€", "é€"), ({"repeat": "ab", "times": 2}, "abab")])
def test_text_is_a_string_or_a_repeat_of_one(form: Any, text: str) -> None:
    assert expand_text(form) == text


@pytest.mark.parametrize("form", [7, None, ["a"], {"repeat": 1, "times": 2}, {"repeat": "a", "times": -1},
                                  {"repeat": "a"}])
def test_a_malformed_text_form_is_refused_with_one_typed_error(form: Any) -> None:
    with pytest.raises(CompactFormError):
        expand_text(form)


def test_the_error_is_not_a_refused_input() -> None:
    """The targets answer a ValueError as an input outside a function's domain; a broken vector is not that."""
    assert not issubclass(CompactFormError, ValueError)


def test_a_broken_form_reaches_no_function_under_test() -> None:
    """The sync target answers one error line (not the spec's ``raised``); the cluster target's call raises it (its
    control answers ``ERROR``), not ``refused``."""
    from conformance.cluster.inputs_target import run
    from conformance.sync.clock import ManualClock
    from conformance.sync.reference_target import TARGET_SETTINGS, answer
    from spec.sync.server import SyncServerEndpoint, recorded_durable

    line = 'DECODE {"decoder": "response", "hex": {"repeat": "00", "times": 67108865}}'
    got = answer(SyncServerEndpoint(TARGET_SETTINGS, recorded_durable([])), ManualClock(), line)
    assert got == f"ERROR expands to 67108865 bytes, past the bound of {MAX_EXPANDED_BYTES}"
    with pytest.raises(CompactFormError, match="not hex"):
        run({"call": "decode", "body": "0"})
