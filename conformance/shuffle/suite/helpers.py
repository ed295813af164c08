"""What every shuffle case uses: its constants, watching an implementation (:func:`observe`,
:func:`rejection`, :func:`completion`), raw frames, and workloads."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Final, Mapping, Sequence

from conformance.framework import CaseContext, Level, Verdict
from conformance.shuffle.peer import POLL_S, Link, describe
from conformance.shuffle.targets import (
    WRITER,
    AbstractRunning,
    Report,
    ShuffleTarget,
    Workload,
)
from spec.shuffle import codec
from spec.shuffle.layouts import ONE_WAY_MESSAGE
from spec.shuffle.messages import (
    Message,
)
from spec.shuffle.settings import key_of

REJECT_WINDOW_S: Final = 3.0
"""How long an implementation has to show it rejected a fault (close or report) where the rejection is a SHOULD:
one that does not reject (non-strict) waits all of it, in every such case."""
SETTLE_S: Final = 0.3
"""Quiet period: how long the peer keeps listening for something that must not come."""
STREAM_S: Final = 10.0
"""Bound on receiving a whole stream of a case (well inside the case deadline)."""
MUST_REJECT_WINDOW_S: Final = STREAM_S
"""How long where the rejection is a MUST: an implementation that rejects ends the wait when it does (no slower for
it), one that does not fails the case whatever the window, so only a failing one waits all of it; a loaded JVM
(Spark's own reader took over 3 s at load 12) is not failed for being slow."""
DEADLINE_MARGIN_S: Final = 2.0
"""Kept between a rejection's window and the case's deadline, so a missed rejection is a FAIL, not a TIMEOUT."""
CONNECTION_TIMEOUT_MS: Final = 400
ACK_TIMEOUT_MS: Final = 400

SEQUENCE, CHECKSUM = "STREAMING_SHUFFLE_INCORRECT_SEQUENCE_NUMBER", "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED"
CONNECTION_TIMEOUT = "STREAMING_SHUFFLE_WRITER_CONNECTION_TIMEOUT"
ACK_TIMEOUT = "STREAMING_SHUFFLE_TERMINATION_ACK_TIMEOUT"
ALREADY_BOUND, MISMATCHED_IDS = "READER_ALREADY_BOUND", "MISMATCHED_CHANNEL_IDS"
EXCLUSIVE_BINDING: Final = "docs/spec/shuffle.md#exclusive-binding"
CHANNEL_IDS: Final = "docs/spec/shuffle.md#channel-ids"

PEER_WRITER_ID, READER_ID_UNDER_TEST = 3, 1
"""Reader cases: the peer is writer 3 of a shuffle whose reader under test has id 1 (not 0, so a
reader that assumes id 0 is caught)."""
MULTI_WRITER_ID = 5

CheckFn = Callable[[ShuffleTarget, CaseContext], Verdict]


# -- observing ----------------------------------------------------------------------------------

@dataclass
class Observation:
    """What the implementation did while the peer watched: links it closed, reports, messages."""

    closed: list[str] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    messages: list[tuple[str, Message]] = field(default_factory=list)
    undecodable: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Report]:
        return [r for r in self.reports if r.kind == "error"]

    @property
    def completed(self) -> bool:
        return any(r.kind == "completed" for r in self.reports)

    def text(self) -> str:
        parts = [f"closed {', '.join(self.closed)}" if self.closed else "no connection closed"]
        parts.append("; ".join(map(str, self.reports)) if self.reports else "no report")
        if self.messages:
            parts.append("sent " + ", ".join(f"{name}:{describe(m)}" for name, m in self.messages))
        parts += self.undecodable
        return "; ".join(parts)


def observe(running: AbstractRunning, links: Sequence[Link], window: float,
            until: Callable[[Observation], bool]) -> Observation:
    """Watch ``links`` and reports for up to ``window`` s; stop :data:`SETTLE_S` after ``until`` holds
    or every link closed (so that what must not come has a chance to show)."""
    seen = Observation()
    deadline = time.monotonic() + window
    stop_at = deadline
    while time.monotonic() < stop_at:
        open_links = [link for link in links if link.name not in seen.closed]
        for link in open_links:
            message = link.poll()
            if message is not None:
                seen.messages.append((link.name, message))
            elif link.closed:
                seen.closed.append(link.name)
            elif link.decode_error is not None:
                seen.undecodable.append(f"{link.name} sent undecodable bytes: {link.decode_error}")
                seen.closed.append(link.name)
        if not open_links:
            time.sleep(POLL_S)
        seen.reports = running.reports()
        if stop_at == deadline and (until(seen) or (links and len(seen.closed) == len(links))):
            stop_at = min(deadline, time.monotonic() + SETTLE_S)
    seen.reports = running.reports()
    return seen


def gave_up(seen: Observation) -> bool:
    return bool(seen.closed or seen.errors or seen.completed)


def reject_window(ctx: CaseContext) -> float:
    """How long the case watches for a rejection: :data:`MUST_REJECT_WINDOW_S` in a MUST case (within its deadline),
    :data:`REJECT_WINDOW_S` otherwise."""
    if ctx.level is not Level.MUST:
        return REJECT_WINDOW_S
    return max(REJECT_WINDOW_S, min(MUST_REJECT_WINDOW_S, ctx.remaining() - DEADLINE_MARGIN_S))


def rejection(ctx: CaseContext, running: AbstractRunning, links: Sequence[Link], what: str, condition: str | None,
              forbidden: Callable[[Message], bool] = lambda m: False, forbidden_text: str = "",
              after: float = 0.0) -> Verdict:
    """The verdict on "the implementation rejects ``what``" (see the module docstring), watched for ``after`` s (a
    timeout the fault waits out) and :func:`reject_window`; a forbidden message decides it at once."""
    seen = observe(running, links, after + reject_window(ctx),
                   lambda o: gave_up(o) or any(forbidden(m) for _, m in o.messages))
    wrong = [r for r in seen.errors if condition is not None and r.condition not in (None, condition)]
    bad = [m for _, m in seen.messages if forbidden(m)]
    shown = f" [{condition}]" if condition else ""
    expected = f"rejects {what}: closes the connection or reports an error{shown}"
    if forbidden_text:
        expected += f"; sends no {forbidden_text}"
    passed = bool(seen.closed or seen.errors) and not wrong and not bad and not seen.completed
    return Verdict(passed, expected, seen.text())


def completion(running: AbstractRunning, links: Sequence[Link], window: float = STREAM_S) -> Observation:
    """Watch until the writer under test reports completion, or errs, or closes every link."""
    return observe(running, links, window, lambda s: s.completed or bool(s.errors))


def completed_cleanly(seen: Observation, links: Sequence[Link]) -> bool:
    return not seen.errors and (seen.completed or len(seen.closed) == len(links))


# -- raw bytes ----------------------------------------------------------------------------------

def one_way_frame(body: bytes) -> bytes:
    """``body`` in a OneWayMessage frame, however malformed the body is."""
    return struct.pack(">qbi", codec.FRAME_HEADER_LENGTH + len(body), ONE_WAY_MESSAGE, len(body)) + body


UNKNOWN_TYPE_BODY: Final = struct.pack(">iqii", 9, 0, PEER_WRITER_ID, READER_ID_UNDER_TEST)
"""A body whose type id (9) is none of 1..4."""
OVERSIZED_HEADER: Final = struct.pack(">qbi", 2**31 + 100, ONE_WAY_MESSAGE, -1)
"""A frame header announcing more than Spark's largest frame (2^31 + 6 bytes); no body follows."""
HTTP_GARBAGE: Final = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
SHORT_FRAME: Final = struct.pack(">q", 5) + b"\x09\x00\x00\x00\x00"
"""A frame claiming 5 bytes, fewer than its own 8-byte length field."""


def frame_problems(raw: bytes) -> list[str]:
    """Every way ``raw`` (a byte stream) departs from whole, well-formed OneWayMessage frames."""
    problems: list[str] = []
    offset = 0
    while offset < len(raw):
        if len(raw) - offset < codec.FRAME_HEADER_LENGTH:
            return problems + [f"{len(raw) - offset} bytes of a frame header left at offset {offset}"]
        length, kind, body_length = struct.unpack_from(">qbi", raw, offset)
        body = raw[offset + codec.FRAME_HEADER_LENGTH: offset + length]
        if kind != ONE_WAY_MESSAGE:
            problems.append(f"offset {offset}: transport type {kind}, not OneWayMessage (9)")
        if body_length != length - codec.FRAME_HEADER_LENGTH:
            problems.append(f"offset {offset}: body_length {body_length} but frame_length {length}")
        if len(body) != length - codec.FRAME_HEADER_LENGTH:
            return problems + [f"offset {offset}: stream ends inside a {length}-byte frame"]
        try:
            codec.decode_body(body)
        except Exception as exc:  # any codec error is a finding, reported as text
            problems.append(f"offset {offset}: body does not decode: {exc}")
        offset += length
    return problems


# -- workloads ----------------------------------------------------------------------------------

def writer_workload(records: Mapping[int, Sequence[bytes]], **settings: str) -> Workload:
    return Workload(WRITER, writer_id=MULTI_WRITER_ID, num_readers=len(records), records=records,
                    settings={k if k.startswith("streamwire.") else key_of(k): v for k, v in settings.items()})


def numbered_records(tag: str, count: int, size: int = 0) -> tuple[bytes, ...]:
    return tuple(f"{tag}-{i:05d}-".encode().ljust(size, b"x") for i in range(count))


