"""The message-type registry is total, and every layer derives from it (issue #36).

A type is known to the codec, the framing limits, the writer's classification, the JSON form and the
observer exactly when it has a row in ``spec/shuffle/registry.py``; anything else is an error in each
of them, never handled as another type (the codec used to turn any control id it did not name into a
TERMINATION_ACK, and the writer any message that was not a CREDIT into an ack). The last test adds a
toy control type in a scratch copy of spec/ by editing three files, and every layer knows it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conformance.shuffle.observer import FRAME_KINDS
from spec.shuffle import errors
from spec.shuffle.codec import HEADER_LENGTH, decode_body, decode_frame, encode_body, encode_frame
from spec.shuffle.framing import FRAME_HEADER_LENGTH, max_frame_from_reader
from spec.shuffle.jsonform import InvalidMessageJson, from_json, to_json
from spec.shuffle.layouts import MessageType
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.registry import KINDS, MessageKind, Sender, kind_of, sent_by
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import UsageError
from spec.shuffle.transitions import READER_TABLE, WRITER_TABLE
from spec.shuffle.writer import WriterMachine

ROOT = Path(__file__).resolve().parents[2]


def example(kind: MessageKind) -> Any:
    """A message of ``kind`` with every field set (distinct small values)."""
    values: dict[str, Any] = {name: i + 1 for i, name in enumerate(kind.field_names) if name != "data_size"}
    if kind.carries_payload:
        values["payload"] = b"\x00\x00\x00\x02hi"
    return kind.message(**values)


@pytest.mark.parametrize("kind", KINDS.values(), ids=lambda k: k.type.name)
def test_every_registered_type_crosses_every_layer(kind: MessageKind) -> None:
    message = example(kind)
    assert kind_of(message) is kind and message.type is kind.type
    assert decode_body(encode_body(message)) == message
    assert decode_frame(encode_frame(message)) == message
    assert from_json(json.loads(json.dumps(to_json(message)))) == message
    assert list(to_json(message)) == ["type", *kind.json_fields]
    assert kind.type.name.removesuffix("_UNSAFE_ROW").removesuffix("_MESSAGE") in FRAME_KINDS
    assert {kind.writer_event, kind.reader_event} <= {e for _, e in WRITER_TABLE.transitions} | {
        e for _, e in READER_TABLE.transitions}


def test_the_table_is_total_and_each_end_sends_its_own() -> None:
    assert set(KINDS) == set(MessageType)
    assert [k.type for k in sent_by(Sender.READER)] == [MessageType.CREDIT_CONTROL_MESSAGE,
                                                         MessageType.TERMINATION_ACK_MESSAGE]
    assert max_frame_from_reader() == FRAME_HEADER_LENGTH + max(HEADER_LENGTH[k.type] for k in sent_by(Sender.READER))
    for kind in KINDS.values():
        receiver = kind.writer_event if kind.sender is Sender.READER else kind.reader_event
        sender_side = kind.reader_event if kind.sender is Sender.READER else kind.writer_event
        assert receiver.value != "UNEXPECTED" and sender_side.value == "UNEXPECTED", kind.type.name


def test_an_unknown_control_type_id_is_an_error_not_an_ack() -> None:
    ack = bytearray(encode_body(example(KINDS[MessageType.TERMINATION_ACK_MESSAGE])))
    ack[:4] = (5).to_bytes(4, "big")
    with pytest.raises(errors.UnexpectedMessageType):
        decode_body(bytes(ack))


def test_an_unknown_type_name_is_an_error_in_the_json_form() -> None:
    with pytest.raises(InvalidMessageJson, match="type"):
        from_json({"type": "PING_CONTROL_MESSAGE", "seq": 0, "writer_id": 0, "reader_id": 0})


@dataclass(frozen=True, kw_only=True)
class Unregistered:
    """A message-like object with no registry row."""

    seq: int = 0
    writer_id: int = 0
    reader_id: int = 0
    type: ClassVar[MessageType] = MessageType.TERMINATION_ACK_MESSAGE


def test_an_unregistered_message_class_is_an_error_for_both_machines_and_the_json_form() -> None:
    writer = WriterMachine(0, 0, 1, ShuffleSettings(), 0.0)
    with pytest.raises(UsageError, match="not a registered"):
        writer.received("conn", Unregistered(), 0.0)  # type: ignore[arg-type]
    reader = ReaderMachine(0, 0, [0], ShuffleSettings(), 0.0)
    reader.connected(0, 0.0)
    with pytest.raises(UsageError, match="not a registered"):
        reader.received(0, Unregistered(), 0.0)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not a registered"):
        to_json(Unregistered())  # type: ignore[arg-type]


TOY_EDITS = {
    "spec/shuffle/layouts.py": [
        ("    TERMINATION_ACK_MESSAGE = 4\n", "    TERMINATION_ACK_MESSAGE = 4\n    PING_CONTROL_MESSAGE = 5\n"),
        ("FIELDS_BY_TYPE = {\n", 'PING_FIELDS = Struct("writer_id" / Int32sb, "reader_id" / Int32sb, "nonce" / Int64sb)\n\n'
                                 "FIELDS_BY_TYPE = {\n    MessageType.PING_CONTROL_MESSAGE: PING_FIELDS,\n"),
    ],
    "spec/shuffle/messages.py": [
        ("Message = Union[", "@dataclass(frozen=True, slots=True, kw_only=True)\nclass PingMessage:\n"
                             "    seq: int\n    writer_id: int\n    reader_id: int\n    nonce: int\n"
                             "    type: ClassVar[MessageType] = MessageType.PING_CONTROL_MESSAGE\n\n\n"
                             "Message = Union[PingMessage, "),
    ],
    "spec/shuffle/registry.py": [
        ("    TerminationControlMessage,\n)", "    TerminationControlMessage,\n    PingMessage,\n)"),
        ("        WriterChannelEvent.ACK, ReaderChannelEvent.UNEXPECTED),\n}",
         "        WriterChannelEvent.ACK, ReaderChannelEvent.UNEXPECTED),\n"
         "    MessageType.PING_CONTROL_MESSAGE: MessageKind(\n"
         "        MessageType.PING_CONTROL_MESSAGE, PingMessage, Sender.READER,\n"
         "        WriterChannelEvent.UNEXPECTED, ReaderChannelEvent.UNEXPECTED),\n}"),
    ],
}
"""A toy control frame a reader sends (not acted on yet: a writer that receives it fails, UNEXPECTED): its
layout, its class, its row. Making it mean something adds its event (transitions.py) and the writer's
handling (writer.py); vectors, docs and the JVM bridge follow (docs/architecture.md, "Where to change what")."""

TOY_CHECKS = textwrap.dedent('''
    import json
    from spec.shuffle.codec import decode_frame, encode_frame
    from spec.shuffle.framing import max_frame_from_reader
    from spec.shuffle.jsonform import from_json, to_json
    from spec.shuffle.messages import PingMessage
    from spec.shuffle.settings import ShuffleSettings
    from spec.shuffle.writer import WriterMachine
    from conformance.shuffle.observer import FRAME_KINDS
    ping = PingMessage(seq=3, writer_id=1, reader_id=2, nonce=2**40)
    step = WriterMachine(0, 1, 3, ShuffleSettings(), 0.0).received("conn", ping, 0.0)
    print(json.dumps({"frame": decode_frame(encode_frame(ping)) == ping, "json": to_json(ping),
                      "from_json": from_json(to_json(ping)) == ping, "reader_max": max_frame_from_reader(),
                      "observed": "PING_CONTROL" in FRAME_KINDS, "writer": type(step.events[0].error).__name__}))
''')


def test_a_toy_control_type_is_three_edits_and_every_layer_knows_it(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "spec", tmp_path / "spec", ignore=shutil.ignore_patterns("__pycache__"))
    for name, edits in TOY_EDITS.items():
        path = tmp_path / name
        text = path.read_text()
        for old, new in edits:
            assert text.count(old) == 1, (name, old)
            text = text.replace(old, new)
        path.write_text(text)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    done = subprocess.run([sys.executable, "-c", TOY_CHECKS], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"frame": True, "from_json": True, "observed": True, "writer": "UnexpectedMessage",
                    "reader_max": FRAME_HEADER_LENGTH + 4 + 8 + 4 + 4 + 8,  # the ping outgrows a CREDIT
                    "json": {"type": "PING_CONTROL_MESSAGE", "seq": "3", "writer_id": 1, "reader_id": 2,
                             "nonce": str(2**40)}}


def test_a_type_without_its_row_stops_everything_at_import(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "spec", tmp_path / "spec", ignore=shutil.ignore_patterns("__pycache__"))
    layouts = tmp_path / "spec/shuffle/layouts.py"
    layouts.write_text(layouts.read_text().replace(*TOY_EDITS["spec/shuffle/layouts.py"][0]))
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    done = subprocess.run([sys.executable, "-c", "import spec.shuffle.codec"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode != 0 and "without a registry row: ['PING_CONTROL_MESSAGE']" in done.stderr
