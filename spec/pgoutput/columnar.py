"""A column of pgoutput text values as Arrow in one go: what a run of inserts
(:class:`~spec.pgoutput.changes.InsertRows`) becomes, instead of a Python value per value.

Text types (and an unconstrained numeric, kept as its text) are one UTF-8 check of the column's
bytes; an integer or constrained numeric column whose every text is plain digits is one Arrow cast;
any other column reads each value with its type's reader, as the per-row path does. The result is what the per-row path's readers and ``pa.array`` make of the same
texts (tests/pgoutput/test_pgoutput_columnar.py); where a value does not read, the conversion raises
one of :data:`UNREADABLE` and the caller takes the per-row path, which names the fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spec.pgoutput.messages import RelationColumn
from spec.pgoutput.types import pg_type

TEXT_TYPES: Final = frozenset({25, 114, 1042, 1043, 3802})
"""Types whose value is their text: a column of them is one UTF-8 check of its bytes."""

PLAIN_TEXT: Final = {20: r"^-?[0-9]+$", 21: r"^-?[0-9]+$", 23: r"^-?[0-9]+$", 1700: r"^-?[0-9]+(\.[0-9]+)?$"}
"""Per type, the texts Arrow's cast reads as its reader does (``int``, ``decimal.Decimal``); Postgres prints
no other for a number (a numeric's NaN and infinities go the per-value way, which refuses them)."""

NUMERIC: Final = 1700

UNREADABLE: Final = (ValueError, ArithmeticError, TypeError, pa.ArrowException)
"""What converting a column raises when a value does not read (UnmappedValue and UnicodeDecodeError
are ValueErrors, decimal's InvalidOperation and OverflowError ArithmeticErrors)."""


def column_array(texts: Sequence[bytes | None], column: RelationColumn, arrow: pa.DataType) -> pa.Array:
    """One column's texts as Arrow ``arrow``: what the per-row path's reader and ``pa.array`` make of them."""
    oid, modifier = column.type_oid, column.type_modifier
    if oid in TEXT_TYPES or (oid == NUMERIC and arrow == pa.string()):
        return pa.array(texts, pa.binary()).cast(pa.string())
    pattern = PLAIN_TEXT.get(oid)
    if pattern is not None:
        raw = pa.array(texts, pa.binary())
        if pc.all(pc.match_substring_regex(raw, pattern)).as_py() is not False:
            return raw.cast(pa.string()).cast(arrow)
    read = pg_type(oid).read
    return pa.array([None if t is None else read(t.decode("utf-8"), modifier) for t in texts], arrow)
