"""Postgres column types as Arrow types, and Postgres's text output of a value as that type's value.

pgoutput sends values in their type's text output (the source asks for text, not binary), and
``SELECT`` in the simple query protocol does too, so one mapping reads both the stream and the
verification query. The session must use ``DateStyle=ISO``, ``TimeZone=UTC``,
``bytea_output=hex`` and ``extra_float_digits=3`` (:data:`SESSION_SETTINGS`): under them the text
forms below are exact. A type or a value with no faithful Arrow counterpart (``numeric`` NaN or
beyond 38 digits with a declared precision, ``infinity`` dates) is refused, never approximated.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from dataclasses import dataclass
from typing import Callable, Final, Mapping

import pyarrow as pa

SESSION_SETTINGS: Final = {"DateStyle": "ISO", "TimeZone": "UTC", "bytea_output": "hex", "extra_float_digits": "3",
                           "IntervalStyle": "postgres", "client_encoding": "UTF8"}
"""The session settings under which the text forms of :data:`TYPES` are read."""


class UnmappedValue(ValueError):
    """A type or value this mapping cannot represent faithfully (the caller names the table and column)."""


@dataclass(frozen=True, slots=True)
class PgType:
    """A Postgres type by OID: its name, its Arrow type for a type modifier, and its text reader."""

    name: str
    arrow: Callable[[int], pa.DataType]
    read: Callable[[str, int], object]


def _numeric_precision(type_modifier: int) -> tuple[int, int] | None:
    """``numeric(p, s)`` from atttypmod (``((p << 16) | s) + 4``); None for an unconstrained numeric."""
    if type_modifier < 4:
        return None
    packed = type_modifier - 4
    return (packed >> 16) & 0xFFFF, packed & 0xFFFF


def _numeric_arrow(type_modifier: int) -> pa.DataType:
    ps = _numeric_precision(type_modifier)
    if ps is None:
        return pa.string()  # unconstrained: any number of digits; kept exactly as Postgres prints it
    precision, scale = ps
    if precision > 38:
        raise UnmappedValue(f"numeric({precision},{scale}) has more than the 38 digits of a Delta decimal")
    return pa.decimal128(precision, scale)


def _read_numeric(text: str, type_modifier: int) -> object:
    if _numeric_precision(type_modifier) is None:
        return text
    if text in ("NaN", "Infinity", "-Infinity"):
        raise UnmappedValue(f"numeric value {text} has no decimal form")
    return decimal.Decimal(text)


def _read_bool(text: str, _: int) -> bool:
    if text not in ("t", "f"):
        raise UnmappedValue(f"boolean text {text!r}")
    return text == "t"


def _read_bytea(text: str, _: int) -> bytes:
    if not text.startswith("\\x"):
        raise UnmappedValue("bytea not in hex output (bytea_output=hex)")
    return bytes.fromhex(text[2:])


def _read_date(text: str, _: int) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UnmappedValue(f"date {text} is outside what Arrow's date holds") from None


def _read_timestamp(text: str, _: int) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise UnmappedValue(f"timestamp {text} is outside what Arrow's timestamp holds") from None


def _read_timestamptz(text: str, _: int) -> dt.datetime:
    value = _read_timestamp(text, _)
    if value.utcoffset() != dt.timedelta(0):
        raise UnmappedValue(f"timestamptz {text} not in UTC (TimeZone=UTC)")
    return value


def _read_uuid(text: str, _: int) -> str:
    return str(uuid.UUID(text))


def _read_float(text: str, _: int) -> float:
    return float(text)


def _read_int(text: str, _: int) -> int:
    return int(text)


def _read_text(text: str, _: int) -> str:
    return text


def _fixed(arrow: pa.DataType) -> Callable[[int], pa.DataType]:
    return lambda _: arrow


TYPES: Final[Mapping[int, PgType]] = {
    16: PgType("boolean", _fixed(pa.bool_()), _read_bool),
    17: PgType("bytea", _fixed(pa.binary()), _read_bytea),
    20: PgType("bigint", _fixed(pa.int64()), _read_int),
    21: PgType("smallint", _fixed(pa.int16()), _read_int),
    23: PgType("integer", _fixed(pa.int32()), _read_int),
    25: PgType("text", _fixed(pa.string()), _read_text),
    114: PgType("json", _fixed(pa.string()), _read_text),
    700: PgType("real", _fixed(pa.float32()), _read_float),
    701: PgType("double precision", _fixed(pa.float64()), _read_float),
    1042: PgType("character", _fixed(pa.string()), _read_text),
    1043: PgType("character varying", _fixed(pa.string()), _read_text),
    1082: PgType("date", _fixed(pa.date32()), _read_date),
    1114: PgType("timestamp without time zone", _fixed(pa.timestamp("us")), _read_timestamp),
    1184: PgType("timestamp with time zone", _fixed(pa.timestamp("us", tz="UTC")), _read_timestamptz),
    1700: PgType("numeric", _numeric_arrow, _read_numeric),
    2950: PgType("uuid", _fixed(pa.string()), _read_uuid),
    3802: PgType("jsonb", _fixed(pa.string()), _read_text),
}
"""Postgres type OID -> how it maps. uuid and json(b) are their canonical text (Delta has no such types)."""


def pg_type(type_oid: int) -> PgType:
    """The mapping of ``type_oid``; UnmappedValue for a type outside :data:`TYPES`."""
    found = TYPES.get(type_oid)
    if found is None:
        raise UnmappedValue(f"type oid {type_oid} is not mapped (mapped: {', '.join(t.name for t in TYPES.values())})")
    return found


def read_text(type_oid: int, type_modifier: int, text: str) -> object:
    """The Python value (as Arrow takes it) of one value in its type's text output."""
    try:
        return pg_type(type_oid).read(text, type_modifier)
    except UnmappedValue:
        raise
    except ValueError as exc:
        raise UnmappedValue(f"{pg_type(type_oid).name} text {text[:40]!r}: {exc}") from None
