"""The per-case wire log as frames: each direction's byte stream reassembled and decoded.

A peer records raw chunks as TCP delivers them (:class:`~conformance.framework.WireLog`); a
report shows whole protocol frames instead, decoded by the suite's :class:`FrameCodec` (type,
sequence number, ids, sizes, checksum verdict) with each frame's hex beside it. A stream that
stops decoding is shown chunk by chunk from there on, undecoded.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Final, Mapping, Protocol, Sequence


@dataclass(frozen=True, slots=True)
class Decoded:
    """One frame at the start of a buffer: its length, a one-line summary and its fields."""

    length: int
    summary: str
    fields: Mapping[str, object] = field(default_factory=dict)
    problem: str = ""
    """Why the frame is wrong as it stands (a checksum mismatch, a body that does not decode)."""


class Undecodable(Exception):
    """The bytes at the start of a buffer cannot be the start of a frame."""


class FrameCodec(Protocol):
    """How a suite reads its protocol's frames off a byte stream."""

    def next_frame(self, buffer: bytes, direction: str) -> Decoded | None:
        """The frame starting ``buffer`` (sent ``direction``, ``peer->impl`` or ``impl->peer``); None when
        more bytes are needed; raises :class:`Undecodable`."""
        ...


@dataclass(frozen=True, slots=True)
class WireFrame:
    """One frame (or undecodable chunk) of a case's traffic."""

    t_ms: float
    direction: str
    """``peer->impl`` or ``impl->peer``."""
    connection: str
    hex: str
    summary: str
    fields: Mapping[str, object] = field(default_factory=dict)
    problem: str = ""

    @property
    def label(self) -> str:
        """The summary, after the connection's name when the suite names connections."""
        return f"{self.connection}: {self.summary}" if self.connection else self.summary

    def to_json(self) -> dict[str, object]:
        return {"t_ms": self.t_ms, "dir": self.direction, "conn": self.connection, "summary": self.summary,
                "fields": dict(self.fields), "problem": self.problem, "hex": self.hex}


CODECS: Final = {"shuffle": "conformance.shuffle.wirelog", "sync": "conformance.sync.wirelog"}
"""Suites whose wire log is decoded, and the module holding their ``CODEC``."""


def codec_for(suite: str) -> FrameCodec | None:
    module = CODECS.get(suite)
    if module is None:
        return None
    codec: FrameCodec = importlib.import_module(module).CODEC
    return codec


class _Stream:
    """One direction of one connection being reassembled."""

    def __init__(self, direction: str, connection: str, codec: FrameCodec | None) -> None:
        self.direction, self.connection, self.codec = direction, connection, codec
        self.buffer = b""
        self.broken = codec is None

    def feed(self, t_ms: float, data: bytes) -> list[WireFrame]:
        if self.broken:
            return [self._raw(t_ms, data, "bytes (not decoded)" if self.codec is None else "undecodable bytes")]
        assert self.codec is not None
        self.buffer += data
        out: list[WireFrame] = []
        while self.buffer:
            try:
                decoded = self.codec.next_frame(self.buffer, self.direction)
            except Undecodable as exc:
                out.append(self._raw(t_ms, self.buffer, "undecodable bytes", str(exc)))
                self.buffer, self.broken = b"", True
                break
            if decoded is None:
                break
            frame, self.buffer = self.buffer[:decoded.length], self.buffer[decoded.length:]
            out.append(WireFrame(t_ms, self.direction, self.connection, frame.hex(), decoded.summary,
                                 decoded.fields, decoded.problem))
        return out

    def end(self, t_ms: float) -> list[WireFrame]:
        if not self.buffer:
            return []
        return [self._raw(t_ms, self.buffer, f"incomplete frame ({len(self.buffer)} bytes, the stream ended)",
                          "the stream ended inside a frame")]

    def _raw(self, t_ms: float, data: bytes, summary: str, problem: str = "") -> WireFrame:
        return WireFrame(t_ms, self.direction, self.connection, data.hex(), summary, {}, problem)


def frames(entries: Sequence[Mapping[str, object]], codec: FrameCodec | None) -> list[WireFrame]:
    """The chunks of a :class:`~conformance.framework.WireLog` as frames, in the order they completed."""
    streams: dict[str, _Stream] = {}
    out: list[WireFrame] = []
    last: defaultdict[str, float] = defaultdict(float)
    for entry in entries:
        tag = str(entry["dir"])
        direction, _, connection = tag.partition(" ")
        stream = streams.setdefault(tag, _Stream(direction, connection, codec))
        t_ms = float(str(entry["t_ms"]))
        last[tag] = t_ms
        out += stream.feed(t_ms, bytes.fromhex(str(entry["hex"])))
    for tag, stream in streams.items():
        out += stream.end(last[tag])
    return out
