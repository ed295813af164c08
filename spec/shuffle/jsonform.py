"""Messages as JSON: the one mapping used by the codec CLI, the golden vectors and the tests.

Field names follow the issue's contract: ``type`` (Spark's enum name), ``seq``, ``writer_id``,
``reader_id``, then ``num_messages`` (credit) or ``data_size``, ``checksum``, ``payload`` (hex).
64-bit fields (``seq``, ``checksum``) are written as decimal strings so that JSON readers with
53-bit numbers (JavaScript, many Java JSON libraries' defaults) keep them exact. On input every
integer may be a JSON number or a decimal string; unknown fields are rejected so typos surface.
The types, their fields and which may be left out are :mod:`spec.shuffle.registry`'s.
"""

from __future__ import annotations

import re
from typing import Final, Mapping

from spec.shuffle.checksum import payload_checksum
from spec.shuffle.errors import ShuffleError
from spec.shuffle.layouts import MessageType
from spec.shuffle.messages import DataMessage, Message
from spec.shuffle.registry import KINDS, int_bits, kind_of

INT32: Final = (-(2**31), 2**31 - 1)
INT64: Final = (-(2**63), 2**63 - 1)
_DECIMAL: Final = re.compile(r"-?[0-9]+")

_BOUNDS: Final[Mapping[int, tuple[int, int]]] = {32: INT32, 64: INT64}

_INTEGERS: Final[Mapping[MessageType, tuple[tuple[str, tuple[int, int]], ...]]] = {
    kind.type: tuple((name, _BOUNDS[int_bits(kind, name)]) for name in kind.field_names) for kind in KINDS.values()}
"""Each type's integer fields in output order, with their range (from the layout's width)."""


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
    kind = kind_of(message)
    out: dict[str, object] = {"type": kind.type.name}
    for name, bounds in _INTEGERS[kind.type]:
        value = getattr(message, name)
        out[name] = str(value) if bounds is INT64 else value
    if isinstance(message, DataMessage):
        out["payload"] = bytes(message.payload).hex()
    return out


def from_json(obj: object) -> Message:
    """A message from its JSON object.

    ``data_size`` may be omitted (it is the payload length) and ``checksum`` too (it is then the
    payload's CRC32C); CREDIT's ``seq`` defaults to 0 as in Spark.
    """
    if not isinstance(obj, dict):
        raise InvalidMessageJson("message", f"expected a JSON object, got {_json_type(obj)}")
    kind = KINDS[_message_type(obj.get("type"))]
    allowed = ("type",) + kind.json_fields
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise InvalidMessageJson(unknown[0], f"unknown field for {kind.type.name}; allowed: {', '.join(allowed)}")
    if not kind.carries_payload:
        message: Message = kind.message(**{name: _int(obj, name, bounds, default=kind.json_defaults.get(name))
                                           for name, bounds in _INTEGERS[kind.type]})
        return message
    return _data_from_json(obj)


def _data_from_json(obj: Mapping[str, object]) -> DataMessage:
    """A DATA: its payload as hex; ``data_size`` and ``checksum`` follow from it unless given."""
    seq, writer_id, reader_id = _int(obj, "seq", INT64), _int(obj, "writer_id", INT32), _int(obj, "reader_id", INT32)
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
