"""Messages as JSON: the one mapping used by the codec CLI, the golden vectors and the tests.

Field names follow the issue's contract: ``type`` (Spark's enum name), ``seq``, ``writer_id``,
``reader_id``, then ``num_messages`` (credit) or ``data_size``, ``checksum``, ``payload`` (hex).
64-bit fields (``seq``, ``checksum``) are written as decimal strings so that JSON readers with
53-bit numbers (JavaScript, many Java JSON libraries' defaults) keep them exact. On input every
integer may be a JSON number or a decimal string; unknown fields are rejected so typos surface.
"""

from __future__ import annotations

import re
from typing import Final, Mapping

from spec.shuffle.checksum import payload_checksum
from spec.shuffle.errors import ShuffleError
from spec.shuffle.layouts import MessageType
from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)

INT32: Final = (-(2**31), 2**31 - 1)
INT64: Final = (-(2**63), 2**63 - 1)
_DECIMAL: Final = re.compile(r"-?[0-9]+")

_FIELDS: Final[Mapping[MessageType, tuple[str, ...]]] = {
    MessageType.DATA_MESSAGE_UNSAFE_ROW: ("seq", "writer_id", "reader_id", "data_size", "checksum", "payload"),
    MessageType.CREDIT_CONTROL_MESSAGE: ("seq", "writer_id", "reader_id", "num_messages"),
    MessageType.TERMINATION_CONTROL_MESSAGE: ("seq", "writer_id", "reader_id"),
    MessageType.TERMINATION_ACK_MESSAGE: ("seq", "writer_id", "reader_id"),
}
"""The JSON fields of each type after ``type``, in output order."""


class InvalidHex(ShuffleError):
    """Text given as bytes is not hexadecimal (whitespace between digits is allowed)."""

    condition = "INVALID_HEX"

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what} is not valid hex: {reason}", what=what)


class InvalidMessageJson(ShuffleError):
    """A JSON message is malformed: missing or unknown field, wrong type, or value out of range."""

    condition = "INVALID_MESSAGE_JSON"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}", field=field)
        self.field = field


def parse_hex(text: str, what: str = "input") -> bytes:
    """Bytes from hex digits; spaces and line breaks between byte pairs are ignored."""
    compact = "".join(text.split())
    if compact[:2].lower() == "0x":
        compact = compact[2:]
    if len(compact) % 2:
        raise InvalidHex(what, f"odd number of hex digits ({len(compact)})")
    try:
        return bytes.fromhex(compact)
    except ValueError:
        bad = next(c for c in compact if c not in "0123456789abcdefABCDEF")
        raise InvalidHex(what, f"unexpected character {bad!r}") from None


def to_json(message: Message) -> dict[str, object]:
    """The message as a JSON object (64-bit fields as decimal strings, payload as hex)."""
    out: dict[str, object] = {"type": message.type.name, "seq": str(message.seq),
                              "writer_id": message.writer_id, "reader_id": message.reader_id}
    if isinstance(message, DataMessage):
        out["data_size"] = message.data_size
        out["checksum"] = str(message.checksum)
        out["payload"] = bytes(message.payload).hex()
    elif isinstance(message, CreditMessage):
        out["num_messages"] = message.num_messages
    return out


def from_json(obj: object) -> Message:
    """A message from its JSON object.

    ``data_size`` may be omitted (it is the payload length) and ``checksum`` too (it is then the
    payload's CRC32C); CREDIT's ``seq`` defaults to 0 as in Spark.
    """
    if not isinstance(obj, dict):
        raise InvalidMessageJson("message", f"expected a JSON object, got {_json_type(obj)}")
    kind = _message_type(obj.get("type"))
    allowed = ("type",) + _FIELDS[kind]
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise InvalidMessageJson(unknown[0], f"unknown field for {kind.name}; allowed: {', '.join(allowed)}")
    if kind is MessageType.CREDIT_CONTROL_MESSAGE:
        return CreditMessage(writer_id=_int(obj, "writer_id", INT32), reader_id=_int(obj, "reader_id", INT32),
                             num_messages=_int(obj, "num_messages", INT32), seq=_int(obj, "seq", INT64, default=0))
    seq, writer_id, reader_id = _int(obj, "seq", INT64), _int(obj, "writer_id", INT32), _int(obj, "reader_id", INT32)
    if kind is MessageType.TERMINATION_CONTROL_MESSAGE:
        return TerminationControlMessage(seq=seq, writer_id=writer_id, reader_id=reader_id)
    if kind is MessageType.TERMINATION_ACK_MESSAGE:
        return TerminationAckMessage(seq=seq, writer_id=writer_id, reader_id=reader_id)
    if "payload" not in obj:
        raise InvalidMessageJson("payload", "missing (hex string of the payload bytes)")
    if not isinstance(obj["payload"], str):
        raise InvalidMessageJson("payload", f"expected a hex string, got {_json_type(obj['payload'])}")
    try:
        payload = parse_hex(obj["payload"], "payload")
    except InvalidHex as exc:
        raise InvalidMessageJson("payload", exc.message) from None
    if "data_size" in obj and _int(obj, "data_size", INT32) != len(payload):
        raise InvalidMessageJson("data_size", f"is {obj['data_size']} but the payload holds {len(payload)} bytes")
    checksum = _int(obj, "checksum", INT64, default=payload_checksum(payload))
    return DataMessage(seq=seq, writer_id=writer_id, reader_id=reader_id, checksum=checksum, payload=payload)


def _message_type(value: object) -> MessageType:
    names = ", ".join(t.name for t in MessageType)
    if value is None:
        raise InvalidMessageJson("type", f"missing; one of {names}")
    if not isinstance(value, str) or value not in MessageType.__members__:
        raise InvalidMessageJson("type", f"{value!r} is not one of {names}")
    return MessageType[value]


def _int(obj: Mapping[str, object], field: str, bounds: tuple[int, int], default: int | None = None) -> int:
    """An integer field given as a JSON number or a decimal string, within ``bounds``."""
    if field not in obj:
        if default is None:
            raise InvalidMessageJson(field, "missing")
        return default
    value = obj[field]
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise InvalidMessageJson(field, f"expected an integer or a decimal string, got {value!r}")
    low, high = bounds
    if not low <= number <= high:
        width = "int32" if bounds == INT32 else "int64"
        raise InvalidMessageJson(field, f"{number} is outside the {width} range [{low}, {high}]")
    return number


def _json_type(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")
