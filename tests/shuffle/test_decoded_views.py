"""The reader's hot path decodes DATA into views (no message object); on every vector it must decode,
fail and drive the reader machine exactly as the typed messages do."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from conformance.shuffle import vector_traces
from conformance.shuffle.vector_suite import load
from spec.shuffle import codec
from spec.shuffle.codec import DATA_VIEW_FIELDS, DataView, encode_frame, message_of
from spec.shuffle.errors import ShuffleError
from spec.shuffle.framing import FrameDecoder
from spec.shuffle.jsonform import from_json
from spec.shuffle.messages import DataMessage, Message
from spec.shuffle.reader import ReaderMachine

WIRE = load("wire_messages.json")
FRAMES = [(group, test) for group in WIRE["testGroups"] for test in group["tests"]]
READER_TRACES = [t for t in load("traces.json")["tests"] if t["role"] == "reader"]


def _streamed(frame: bytes, chunk: int, max_frame: int, views: bool) -> list[Message | DataView] | tuple[str, str]:
    """Everything a decoder makes of ``frame`` fed in ``chunk``-byte pieces, or the error it raised."""
    decoder = FrameDecoder(max_frame, lent=True)
    out: list[Message | DataView] = []
    try:
        for start in range(0, len(frame), chunk):
            piece = memoryview(frame[start:start + chunk])
            got: Sequence[Message | DataView] = decoder.feed_views(piece) if views else decoder.feed(piece)
            out += [bytes_owned(m) for m in got]  # a lent chunk's views are used before the next feed
        decoder.close()
    except ShuffleError as error:
        return type(error).__name__, str(error)
    return out


def bytes_owned(decoded: Message | DataView) -> Message | DataView:
    if isinstance(decoded, tuple):
        return decoded[:-1] + (bytes(decoded[-1]),)
    if isinstance(decoded, DataMessage):
        return DataMessage(seq=decoded.seq, writer_id=decoded.writer_id, reader_id=decoded.reader_id,
                           checksum=decoded.checksum, payload=bytes(decoded.payload))
    return decoded


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_views_decode_and_reject_every_wire_vector_as_the_typed_path_does(chunk: int | None) -> None:
    compared = data_views = 0
    for group, test in FRAMES:
        frame = bytes.fromhex(test["frame"])
        size = chunk or max(len(frame), 1)
        typed = _streamed(frame, size, int(group["maxFrameLength"]), views=False)
        viewed = _streamed(frame, size, int(group["maxFrameLength"]), views=True)
        if isinstance(typed, tuple):
            assert viewed == typed, test["tcId"]
            compared += 1
            continue
        assert not isinstance(viewed, tuple), (test["tcId"], viewed)
        assert [message_of(v) for v in viewed] == typed, test["tcId"]
        for view, message in zip(viewed, typed):
            if isinstance(view, tuple):  # the view's fields are the layout's, in the layout's order
                assert dict(zip(DATA_VIEW_FIELDS, view)) == {name: getattr(message, name) for name in DATA_VIEW_FIELDS}
                data_views += 1
        compared += 1
    assert compared == len(FRAMES) and data_views >= 5


def view_answers(test: dict[str, Any], inputs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reader trace replayed as the runtime feeds it: each received message framed, then decoded into views."""
    machine = vector_traces.new_machine("reader", test)
    assert isinstance(machine, ReaderMachine)
    answers = []
    for step in inputs:
        if step["input"] == "received":
            (decoded,) = FrameDecoder(lent=True).feed_views(encode_frame(from_json(step["message"])))
            now = int(step.get("t", 0)) / 1000.0
            answers.append(vector_traces.answer_json(machine.received_all(int(step.get("peer", 0)), [decoded], now)))
        else:
            answers.append(vector_traces.answer_json(vector_traces.apply_input(machine, step)))
    return answers


def test_every_reader_trace_vector_gets_its_recorded_answers_from_views() -> None:
    assert len(READER_TRACES) >= 10
    failures = {t["name"]: vector_traces.check_trace(t, view_answers) for t in READER_TRACES}
    assert {name: detail for name, detail in failures.items() if detail is not None} == {}


def test_a_data_view_is_not_a_message_object() -> None:
    frame = encode_frame(DataMessage(seq=0, writer_id=1, reader_id=2, checksum=0, payload=b"\0\0\0\1x"))
    (view,) = FrameDecoder().feed_views(frame)
    assert type(view) is tuple and dict(zip(DATA_VIEW_FIELDS, view))["data_size"] == 5


def _decoded_or_error(frame: bytes, max_frame: int) -> list[Message] | tuple[str, str]:
    try:
        return [message_of(bytes_owned(m)) for m in FrameDecoder(max_frame).feed_views(frame)]
    except ShuffleError as error:
        return type(error).__name__, str(error)


def test_a_remembered_control_body_decodes_as_a_first_one_and_errors_are_never_remembered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Short bodies (control messages) are decoded once and remembered: on every wire vector, decoding with an
    empty memo, then again with every body remembered, then with the memo emptied when full, gives the same."""
    memo: dict[bytes, Any] = {}
    monkeypatch.setattr(codec, "_decoded_controls", memo)
    frames = [(bytes.fromhex(test["frame"]), int(group["maxFrameLength"])) for group, test in FRAMES]
    first = [_decoded_or_error(frame, max_frame) for frame, max_frame in frames]
    remembered = len(memo)
    assert remembered >= 5 and all(not isinstance(m, tuple) for m in memo.values())
    assert [_decoded_or_error(frame, max_frame) for frame, max_frame in frames] == first
    assert len(memo) == remembered  # nothing new: the failing bodies were not kept either
    memo.clear()
    monkeypatch.setattr(codec, "DECODED_CONTROLS_KEPT", 1)
    assert [_decoded_or_error(frame, max_frame) for frame, max_frame in frames] == first
    assert len(memo) == 1
