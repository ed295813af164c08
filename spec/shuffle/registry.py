"""Every message type of the streaming shuffle in one table: its layout, message class, sender, JSON
form and the event each machine classifies it as.

The codec (:mod:`spec.shuffle.codec`), the framing limits (:mod:`spec.shuffle.framing`), both machines'
classification of what they receive (:mod:`spec.shuffle.writer`, :mod:`spec.shuffle.reader`), the JSON form
(:mod:`spec.shuffle.jsonform`) and the traffic observer (``conformance/shuffle/observer.py``) all
derive from :data:`KINDS`, so a type is known everywhere or nowhere: a type id, class or name
missing here is an error in each of them, never handled as another type
(``tests/shuffle/test_message_registry.py`` checks every layer). Adding a control frame is a row
here and its parts (docs/architecture.md, "Where to change what").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, Mapping

from construct import FormatField, Struct

from spec.shuffle.layouts import COMMON_HEADER, FIELDS_BY_TYPE, MessageType
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)
from spec.shuffle.steps import UsageError
from spec.shuffle.transitions import ReaderChannelEvent, WriterChannelEvent


MessageClass = type[Any]
"""A class of :mod:`spec.shuffle.messages` (its fields keyword-only, named as the layout's)."""


class Sender(str, Enum):
    """Which end of a channel sends a message type (the other end receives it)."""

    WRITER = "writer"
    READER = "reader"


@dataclass(frozen=True, slots=True)
class MessageKind:
    """One message type: everything each layer needs to know of it."""

    type: MessageType
    message: MessageClass
    """Its class in :mod:`spec.shuffle.messages`."""
    sender: Sender
    writer_event: WriterChannelEvent
    """What the writer machine classifies it as when it arrives (UNEXPECTED: a writer never receives it)."""
    reader_event: ReaderChannelEvent
    """What the reader machine classifies it as when it arrives (UNEXPECTED: a reader never receives it)."""
    json_defaults: Mapping[str, int] = field(default_factory=dict)
    """JSON fields that may be left out, and their value (everything else is required)."""

    @property
    def fields(self) -> Struct:
        """The layout after the common header (:data:`spec.shuffle.layouts.FIELDS_BY_TYPE`)."""
        return FIELDS_BY_TYPE[self.type]

    @property
    def carries_payload(self) -> bool:
        """A body of fixed fields followed by ``data_size`` payload bytes (only DATA)."""
        return "data_size" in self.field_names

    @property
    def field_names(self) -> tuple[str, ...]:
        """The body's fields after the type id, in wire order: the header's, then the type's."""
        return tuple(s.name for s in COMMON_HEADER.subcons if s.name != "type_id") + tuple(
            s.name for s in self.fields.subcons)

    @property
    def json_fields(self) -> tuple[str, ...]:
        """The JSON form's fields after ``type``, in output order: the wire fields, then the payload."""
        return self.field_names + (("payload",) if self.carries_payload else ())


KINDS: Final[Mapping[MessageType, MessageKind]] = {
    MessageType.DATA_MESSAGE_UNSAFE_ROW: MessageKind(
        MessageType.DATA_MESSAGE_UNSAFE_ROW, DataMessage, Sender.WRITER,
        WriterChannelEvent.UNEXPECTED, ReaderChannelEvent.DATA),
    MessageType.CREDIT_CONTROL_MESSAGE: MessageKind(
        MessageType.CREDIT_CONTROL_MESSAGE, CreditMessage, Sender.READER,
        WriterChannelEvent.CREDIT, ReaderChannelEvent.UNEXPECTED, json_defaults={"seq": 0}),
    MessageType.TERMINATION_CONTROL_MESSAGE: MessageKind(
        MessageType.TERMINATION_CONTROL_MESSAGE, TerminationControlMessage, Sender.WRITER,
        WriterChannelEvent.UNEXPECTED, ReaderChannelEvent.TERMINATION),
    MessageType.TERMINATION_ACK_MESSAGE: MessageKind(
        MessageType.TERMINATION_ACK_MESSAGE, TerminationAckMessage, Sender.READER,
        WriterChannelEvent.ACK, ReaderChannelEvent.UNEXPECTED),
}
"""Every message type, by its wire id."""

BY_CLASS: Final[Mapping[MessageClass, MessageKind]] = {kind.message: kind for kind in KINDS.values()}

WRITER_EVENTS: Final[Mapping[MessageClass, WriterChannelEvent]] = {k.message: k.writer_event for k in KINDS.values()}
READER_EVENTS: Final[Mapping[MessageClass, ReaderChannelEvent]] = {k.message: k.reader_event for k in KINDS.values()}
"""Each class's event at the writer and the reader, for the per-message paths (one lookup, no call)."""


def kind_of(message: Message) -> MessageKind:
    """The registered kind of ``message``; a class not registered is a caller's bug (UsageError)."""
    kind = BY_CLASS.get(type(message))
    if kind is None:
        raise UsageError(f"{type(message).__name__} is not a registered streaming-shuffle message type")
    return kind


def sent_by(sender: Sender) -> tuple[MessageKind, ...]:
    """The kinds one end sends, in wire-id order."""
    return tuple(kind for kind in KINDS.values() if kind.sender is sender)


def int_bits(kind: MessageKind, name: str) -> int:
    """The width (32 or 64) of the integer field ``name`` of ``kind``, read off its layout."""
    for sub in (*COMMON_HEADER.subcons, *kind.fields.subcons):
        if sub.name == name:
            inner: Any = sub
            while not isinstance(inner, FormatField):
                inner = inner.subcon
            return 8 * int(inner.sizeof())
    raise KeyError(f"{kind.type.name} has no field {name!r}")


def _check() -> None:
    """The table is total and consistent: every wire id has a row, every row its layout and class."""
    missing = set(MessageType) - set(KINDS)
    if missing:
        raise AssertionError(f"message types without a registry row: {sorted(t.name for t in missing)}")
    for type_id, kind in KINDS.items():
        if kind.type is not type_id or kind.message.type is not type_id or type_id not in FIELDS_BY_TYPE:
            raise AssertionError(f"registry row {type_id.name} disagrees with its class or layout")
    payloads = [kind for kind in KINDS.values() if kind.carries_payload]
    if [kind.type for kind in payloads] != [MessageType.DATA_MESSAGE_UNSAFE_ROW]:
        raise AssertionError("only DATA carries a payload (the codec's DataView is DATA's)")


_check()
