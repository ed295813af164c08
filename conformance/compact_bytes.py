"""The compact form of long inputs in the recorded vectors, read and written in one place.

A vector that must carry 16 MiB (a frame past its bound, a GCM message of several segments) says so in a line:
bytes are hex, ``{"repeat": HEX, "times": n}`` (those bytes n times), or a list of those joined; text is a string
or ``{"repeat": TEXT, "times": n}``. docs/conformance.md ("Compact bytes in vectors") describes it for an
implementer in another language. A form that is malformed, or that would expand past :data:`MAX_EXPANDED_BYTES`,
is refused with :class:`CompactFormError` before anything is allocated: a vector is a stranger's input too.
"""

from __future__ import annotations

import re
from typing import Any, Final

MAX_EXPANDED_BYTES: Final = 64 * 2**20
"""The most one compact form may expand to (64 MiB: four times the largest input a vector needs, a 16 MiB frame)."""

SHORTEST_RUN: Final = 64
"""A run of one byte at least this long is written as a repeat by :func:`compact_bytes`."""

_HEX: Final = re.compile(r"(?:[0-9a-fA-F]{2})*")


class CompactFormError(Exception):
    """A compact form that is malformed or expands past :data:`MAX_EXPANDED_BYTES`: the vector is wrong, not the
    implementation under test (so it is not a ValueError, which the targets answer as a refused input)."""


def _hex(value: Any) -> bytes:
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise CompactFormError(f"not hex (pairs of hex digits): {str(value)[:40]!r}")
    return bytes.fromhex(value)


def _times(form: dict[Any, Any]) -> int:
    if set(form) != {"repeat", "times"}:
        raise CompactFormError(f"a repeat has exactly the keys repeat and times, not {sorted(map(str, form))}")
    times = form["times"]
    if not isinstance(times, int) or isinstance(times, bool) or times < 0:
        raise CompactFormError(f"a repeat's times is a whole number >= 0, not {times!r}")
    return times


def _bounded(total: int) -> int:
    if total > MAX_EXPANDED_BYTES:
        raise CompactFormError(f"expands to {total} bytes, past the bound of {MAX_EXPANDED_BYTES}")
    return total


def expand_bytes(form: Any) -> bytes:
    """The bytes ``form`` stands for: hex, ``{"repeat": HEX, "times": n}``, or a list of those joined (not nested);
    :class:`CompactFormError` when it is malformed or past :data:`MAX_EXPANDED_BYTES`."""
    parts = form if isinstance(form, list) else [form]
    runs: list[tuple[bytes, int]] = []
    total = 0
    for part in parts:
        if isinstance(part, str):
            runs.append((_hex(part), 1))
        elif isinstance(part, dict):
            times = _times(part)
            runs.append((_hex(part["repeat"]), times))
        else:
            raise CompactFormError(f"a part is hex or a repeat, not {type(part).__name__}")
        unit, times = runs[-1]
        total = _bounded(total + len(unit) * times)
    return b"".join(unit * times for unit, times in runs)


def expand_text(form: Any) -> str:
    """The text ``form`` stands for: a string, or ``{"repeat": TEXT, "times": n}``; :class:`CompactFormError` when it
    is malformed or its UTF-8 past :data:`MAX_EXPANDED_BYTES`."""
    if isinstance(form, str):
        return form
    if not isinstance(form, dict):
        raise CompactFormError(f"text is a string or a repeat, not {type(form).__name__}")
    times = _times(form)
    unit = form["repeat"]
    if not isinstance(unit, str):
        raise CompactFormError(f"a text repeat's repeat is a string, not {type(unit).__name__}")
    _bounded(len(unit.encode()) * times)
    return unit * times


def compact_bytes(data: bytes) -> str | list[Any]:
    """``data`` as hex, or, when it holds a run of :data:`SHORTEST_RUN` equal bytes or more, as a list of parts, hex
    or ``{"repeat": HEX, "times": n}``: what :func:`expand_bytes` reads back."""
    parts: list[Any] = []
    start = 0
    for match in re.finditer(rb"(.)\1{%d,}" % (SHORTEST_RUN - 1), data, re.DOTALL):
        parts += [data[start:match.start()].hex()] if match.start() > start else []
        parts.append({"repeat": match.group(1).hex(), "times": len(match.group())})
        start = match.end()
    if not parts:
        return data.hex()
    return parts + ([data[start:].hex()] if start < len(data) else [])
