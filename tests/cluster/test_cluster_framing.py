"""The one cluster frame reader: whole frames out of any split of the stream, its size rules checked
from the header before a body byte is kept, and the same rules for ``decode``."""

from __future__ import annotations

import pytest

from spec.cluster import wire
from spec.cluster.errors import FrameTooLarge, MalformedMessage

HELLO = wire.encode(wire.ServiceKind.HELLO, 1, node_id="n", secret="", takeover="", resume=False, resume_after=0)
RENEW = wire.encode(wire.ServiceKind.RENEW, 2)
JOIN = wire.encode(wire.ServiceKind.JOIN_CLUSTER, 3, address="h:1")
STREAM = HELLO + RENEW + JOIN


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_a_stream_split_at_any_byte_yields_the_same_frames(cut: int) -> None:
    frames = wire.FrameReader()
    bodies = [*frames.feed(STREAM[:cut]), *frames.feed(STREAM[cut:])]
    assert bodies == [HELLO[4:], RENEW[4:], JOIN[4:]]
    assert frames.held_bytes == 0


def test_a_stream_fed_one_byte_at_a_time_holds_at_most_one_partial_frame() -> None:
    frames = wire.FrameReader()
    bodies: list[bytes] = []
    for i in range(len(STREAM)):
        assert frames.held_bytes <= max(len(HELLO), len(RENEW), len(JOIN))
        bodies += frames.feed(STREAM[i:i + 1])
    assert [wire.decode(b).kind for b in bodies] == [wire.ServiceKind.HELLO, wire.ServiceKind.RENEW,
                                                     wire.ServiceKind.JOIN_CLUSTER]


def test_wanted_is_the_rest_of_the_header_then_the_rest_of_the_body() -> None:
    frames = wire.FrameReader()
    assert frames.wanted == 4
    assert not list(frames.feed(RENEW[:3]))
    assert frames.wanted == 1
    assert not list(frames.feed(RENEW[3:6]))
    assert frames.wanted == len(RENEW) - 6
    assert list(frames.feed(RENEW[6:])) == [RENEW[4:]] and frames.wanted == 4


@pytest.mark.parametrize("length", range(wire.Header.sizeof()))
def test_a_frame_shorter_than_a_message_header_is_refused_from_its_header(length: int) -> None:
    frames = wire.FrameReader()
    with pytest.raises(MalformedMessage):
        list(frames.feed(length.to_bytes(4, "big")))
    with pytest.raises(MalformedMessage):
        wire.decode(RENEW[4:4 + length])


def test_a_frame_of_its_bound_is_read_and_one_byte_more_is_refused_before_its_body() -> None:
    bound = len(JOIN) - 4
    assert list(wire.FrameReader(bound).feed(JOIN)) == [JOIN[4:]]
    frames = wire.FrameReader(bound - 1)
    with pytest.raises(FrameTooLarge):
        list(frames.feed(JOIN[:4]))


def test_a_bound_changed_between_frames_applies_to_the_next_header() -> None:
    """The service raises the bound once HELLO is accepted, in the middle of one read."""
    large = wire.encode(wire.ServiceKind.JOIN_CLUSTER, 3, address="h" * 100)
    assert len(large) > len(HELLO)
    frames = wire.FrameReader(len(HELLO) - 4)
    bodies = []
    for body in frames.feed(HELLO + large):
        bodies.append(body)
        frames.bound = wire.MAX_REQUEST_BYTES
    assert bodies == [HELLO[4:], large[4:]]
    with pytest.raises(FrameTooLarge):
        list(wire.FrameReader(len(HELLO) - 4).feed(HELLO + large))
