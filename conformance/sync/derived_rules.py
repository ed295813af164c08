"""Sync cases derived from the rules a put is validated by: each rule at its smallest violating input and
its nearest valid one, as rows of tables rather than case by case.

Every row is one put (its own origin and table, sequence 1, flushed after it) and what it must get:
refused with a status, or accepted (``memory=1``). The rows walk, for each rule of ``spec.sync.schema``
(Seafowl's), ``spec.sync.admission.admit_schema`` / ``admit_rows`` (what no table can store),
``spec.sync.confinement`` (table names and store locations) and the command's own fields, the input just
past the rule's bound and the one just inside it, so a rule checked one off, or not at all, or by a
prefix instead of a boundary, fails a row (docs/conformance.md, "The sync checklist").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf import any_pb2

from conformance.framework import CaseContext, Verdict
from spec.sync.confinement import MAX_NAME_BYTES, MAX_SEGMENT_BYTES
from spec.sync.messages import ColumnDescriptor, ColumnRole, StorageLocation, SyncCommand, TableFormat

if TYPE_CHECKING:
    from conformance.sync.suite import PutOutcome, SyncTarget

OLD, NEW, CHANGED, VALUE = (int(r) for r in (ColumnRole.OLD_PK, ColumnRole.NEW_PK, ColumnRole.CHANGED, ColumnRole.VALUE))
INVALID: Final = pa.ArrowInvalid
"""INVALID_ARGUMENT as a Flight client sees it."""


def _descs(*pairs: tuple[int, str]) -> tuple[ColumnDescriptor, ...]:
    return tuple(ColumnDescriptor(role=role, name=name) for role, name in pairs)


BASE_DESCS: Final = _descs((OLD, "id"), (NEW, "id"), (VALUE, "v"))


def _base(key_type: pa.DataType = pa.int64(), old: object = None, new: object = 1) -> dict[str, pa.Array]:
    return {"old_id": pa.array([old], key_type), "new_id": pa.array([new], key_type), "v": pa.array(["a"])}


@dataclass(frozen=True)
class Row:
    """One put and its verdict: ``refused`` (the exception a Flight client gets) or None for accepted."""

    rule: str
    input: str
    descs: tuple[ColumnDescriptor, ...]
    columns: dict[str, pa.Array]
    refused: type[Exception] | None
    text: str = ""
    path: Callable[[str], str] | None = None
    """The table path from the row's own fresh path (None: that path)."""
    command: Callable[[SyncCommand, SyncTarget], SyncCommand] | None = None
    """The command from the plain one (a format, a store location); None: the plain one."""
    raw: Callable[[SyncCommand], bytes] | None = None
    """The descriptor's ``cmd`` bytes from the command (None: the command encoded as it should be)."""
    sequence: int = 1
    """The put's sequence number, what ``memory`` must be once it is accepted."""


def _wrapped(type_url: str) -> Callable[[SyncCommand], bytes]:
    """The command in an ``Any`` naming ``type_url``."""
    return lambda cmd: any_pb2.Any(type_url=type_url, value=cmd.encode()).SerializeToString()


def _extra(name: str, array: pa.Array, role: int = VALUE) -> tuple[tuple[ColumnDescriptor, ...], dict[str, pa.Array]]:
    """The base put with one more column (batch name ``x_col``, descriptor ``name``)."""
    return BASE_DESCS + _descs((role, name)), {**_base(), "x_col": array}


def _value_row(rule: str, what: str, name: str, array: pa.Array, refused: type[Exception] | None) -> Row:
    descs, columns = _extra(name, array)
    return Row(rule, what, descs, columns, refused)


def _unsigned_rows() -> list[Row]:
    """Each unsigned width at the largest value its signed type holds (kept) and one above (refused)."""
    rows = []
    for kind in (pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()):
        top = 2 ** (kind.bit_width - 1) - 1
        rows.append(_value_row("unsigned value within its signed type", f"{kind} {top}", "x", pa.array([top], kind), None))
        rows.append(_value_row("unsigned value within its signed type", f"{kind} {top + 1}", "x",
                               pa.array([top + 1], kind), INVALID))
    rows.append(_value_row("unsigned value within its signed type", "uint64 all null", "x", pa.array([None], pa.uint64()),
                           None))
    return rows


SEAFOWL_ROWS: Final[tuple[Row, ...]] = (
    Row("a descriptor's role is a known one", "role 4", _descs((OLD, "id"), (NEW, "id"), (4, "v")), _base(), INVALID,
        "Failed parsing role"),
    Row("a descriptor's role is a known one", "role 3 (VALUE)", BASE_DESCS, _base(), None),
    Row("old and new key columns are present", "no NEW_PK column", _descs((OLD, "id"), (VALUE, "x"), (VALUE, "v")),
        {"old_id": pa.array([None], pa.int64()), "x": pa.array([1], pa.int64()), "v": pa.array(["a"])}, INVALID,
        "Change requested but batches do not contain old/new PK columns"),
    Row("old and new key columns are the same", "same names, types int32 and int64", BASE_DESCS,
        {**_base(), "old_id": pa.array([None], pa.int32())}, INVALID,
        "Change requested but old and new PK columns are not the same"),
    Row("old and new key columns are the same", "two-column keys differing in the second name",
        _descs((OLD, "id"), (OLD, "k"), (NEW, "id"), (NEW, "j"), (VALUE, "v")),
        {"old_id": pa.array([None], pa.int64()), "old_k": pa.array([None], pa.int64()),
         "new_id": pa.array([1], pa.int64()), "new_j": pa.array([1], pa.int64()), "v": pa.array(["a"])}, INVALID,
        "Change requested but old and new PK columns are not the same"),
    Row("a CHANGED column is boolean and names a VALUE column", "CHANGED v (boolean) with VALUE v",
        BASE_DESCS + _descs((CHANGED, "v")), {**_base(), "changed_v": pa.array([True])}, None),
    *(Row("the command names its type, compared exactly", f"type_url {url}", BASE_DESCS, _base(), INVALID,
          raw=_wrapped(url))
      for url in ("DataSyncCommandX", "XDataSyncCommand", "/DataSyncCommand", "type.googleapis.com/DataSyncCommand")),
    Row("sequence numbers are uint64", "sequence 2^64-1 closes a transaction", BASE_DESCS, _base(), None,
        sequence=2**64 - 1),
    Row("sequence numbers are uint64", "sequence 0 closes a transaction", BASE_DESCS, _base(), None, sequence=0),
)
"""Seafowl's rules (``spec.sync.schema.SyncSchema.validate``, the command's decoding): MUST."""

STORABLE_ROWS: Final[tuple[Row, ...]] = (
    _value_row("a column name is not empty", "VALUE named ''", "", pa.array([1]), INVALID),
    _value_row("a column name holds no control character", "VALUE named 'x\\x00'", "x\x00", pa.array([1]), INVALID),
    _value_row("a column name holds no control character", "VALUE named 'x\\x1f'", "x\x1f", pa.array([1]), INVALID),
    _value_row("a column name holds no control character", "VALUE named 'x\\x7f'", "x\x7f", pa.array([1]), INVALID),
    _value_row("a column name holds no control character", "VALUE named 'x\\x9f'", "x\x9f", pa.array([1]), INVALID),
    _value_row("a column name holds no control character", "VALUE named 'x y'", "x y", pa.array([1]), None),
    _value_row("two columns of one role have two names", "VALUE v and VALUE V", "V", pa.array(["b"]), INVALID),
    _value_row("two columns of one role have two names", "VALUE v and VALUE w", "w", pa.array(["b"]), None),
    _value_row("a VALUE column is not named like a key column", "VALUE ID beside key id", "ID", pa.array([1]), INVALID),
    _value_row("a VALUE column is not named like a key column", "VALUE idx beside key id", "idx", pa.array([1]), None),
    _value_row("no column has the null type", "VALUE of type null", "x", pa.array([None], pa.null()), INVALID),
    _value_row("no column has a nested type", "list<int64>", "x", pa.array([[1]], pa.list_(pa.int64())), INVALID),
    _value_row("no column has a nested type", "large_list<int64>", "x", pa.array([[1]], pa.large_list(pa.int64())),
               INVALID),
    _value_row("no column has a nested type", "fixed_size_list<int64, 1>", "x",
               pa.array([[1]], pa.list_(pa.int64(), 1)), INVALID),
    _value_row("no column has a nested type", "map<string, int64>", "x",
               pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64())), INVALID),
    *_unsigned_rows(),
    Row("a key is not NaN", "new key NaN", BASE_DESCS, _base(pa.float64(), None, float("nan")), INVALID),
    Row("a key is not NaN", "old key NaN", BASE_DESCS, _base(pa.float64(), float("nan"), 1.0), INVALID),
    Row("a key is not NaN", "new key 1.5", BASE_DESCS, _base(pa.float64(), None, 1.5), None),
)
"""What no table can store, refused at put time (``spec.sync.admission``; ours, Seafowl takes them): SHOULD."""


def _named(name: str) -> Callable[[str], str]:
    return lambda path: name


def _below(suffix: str) -> Callable[[str], str]:
    return lambda path: path + suffix


def _name_of_bytes(total: int) -> Callable[[str], str]:
    """A name of exactly ``total`` bytes below the row's path, in segments of at most the segment bound."""
    def name(path: str) -> str:
        segments, left = [], total - len(path)
        while left > 0:
            take = min(MAX_SEGMENT_BYTES, left - 1)  # one byte for the '/' before it
            segments.append("n" * take)
            left -= take + 1
        return "/".join([path, *segments])
    return name


def _sent_as(total: int, spelled: Callable[[str], str]) -> Callable[[str], str]:
    """A name of exactly ``total`` bytes, sent spelled another way that normalizes to it (a bound applies to the
    normalized name, not to the path as sent)."""
    return lambda path: spelled(_name_of_bytes(total)(path))


def _format(value: int) -> Callable[[SyncCommand, SyncTarget], SyncCommand]:
    return lambda cmd, t: SyncCommand(**{**vars(cmd), "format": value})


NAME_ROWS: Final[tuple[Row, ...]] = (
    Row("a path holds no control character", "U+001F", BASE_DESCS, _base(), INVALID, path=_below("\x1f")),
    Row("a path holds no control character", "U+007F", BASE_DESCS, _base(), INVALID, path=_below("\x7f")),
    Row("a path holds no backslash", "a\\b", BASE_DESCS, _base(), INVALID, path=_below("\\b")),
    Row("a path is relative", "scheme://", BASE_DESCS, _base(), INVALID, path=lambda p: "file://" + p),
    Row("a path is relative", "drive letter", BASE_DESCS, _base(), INVALID, path=lambda p: "c:" + p),
    Row("a path has no '..' segment", "a '..' in the middle", BASE_DESCS, _base(), INVALID, path=_below("/../x")),
    Row("a path is not empty", "'.'", BASE_DESCS, _base(), INVALID, path=_named(".")),
    Row("a path is not empty", "'/'-only", BASE_DESCS, _base(), INVALID, path=_named("//")),
    Row("a segment is letters, digits, '_' and '-'", "a '.' inside a segment", BASE_DESCS, _base(), INVALID,
        path=_below(".x")),
    Row("a segment is letters, digits, '_' and '-'", "a space (not a control character)", BASE_DESCS, _base(),
        INVALID, "may hold only", path=_below(" x")),
    Row("a segment is letters, digits, '_' and '-'", "a segment starting with '-'", BASE_DESCS, _base(), None,
        path=_below("/-x")),
    Row("a segment does not start with '_'", "second segment '_x'", BASE_DESCS, _base(), INVALID, path=_below("/_x")),
    Row("a segment does not start with '_'", "'x_' (inside)", BASE_DESCS, _base(), None, path=_below("/x_")),
    Row("a name is at most 1,024 bytes", f"{MAX_NAME_BYTES} bytes", BASE_DESCS, _base(), None,
        path=_name_of_bytes(MAX_NAME_BYTES)),
    Row("a name is at most 1,024 bytes", f"{MAX_NAME_BYTES + 1} bytes", BASE_DESCS, _base(), INVALID,
        path=_name_of_bytes(MAX_NAME_BYTES + 1)),
    Row("a name is normalized", "'a//b/' (empty segments dropped)", BASE_DESCS, _base(), None, path=_below("//b/")),
    Row("a name is bounded once normalized", f"{MAX_NAME_BYTES} bytes and a trailing '/'", BASE_DESCS, _base(), None,
        path=_sent_as(MAX_NAME_BYTES, lambda name: name + "/")),
    Row("a name is bounded once normalized", f"{MAX_NAME_BYTES} bytes with one '/' doubled", BASE_DESCS, _base(),
        None, path=_sent_as(MAX_NAME_BYTES, lambda name: name.replace("/", "//", 1))),
    Row("a name is bounded once normalized", f"{MAX_NAME_BYTES + 1} bytes and a trailing '/'", BASE_DESCS, _base(),
        INVALID, path=_sent_as(MAX_NAME_BYTES + 1, lambda name: name + "/")),
    Row("the format is Delta", "ICEBERG", BASE_DESCS, _base(), flight.FlightInternalError, command=_format(TableFormat.ICEBERG)),
    Row("the format is Delta", "format 2 (unknown)", BASE_DESCS, _base(), flight.FlightInternalError, command=_format(2)),
)
"""Table names (``spec.sync.confinement.table_name``) and the command's format: MUST."""

ALLOWED: Final = "allowed"


def _location(relative: str) -> Callable[[SyncCommand, SyncTarget], SyncCommand]:
    def command(cmd: SyncCommand, t: SyncTarget) -> SyncCommand:
        return SyncCommand(**{**vars(cmd), "store": StorageLocation(location=f"{t.store}/{relative}")})
    return command


LOCATION_ROWS: Final[tuple[Row, ...]] = tuple(
    Row("a store location is the allowed one or below it", relative, BASE_DESCS, _base(),
        None if ok else flight.FlightUnauthorizedError, command=_location(relative))
    for relative, ok in (
        (ALLOWED, True), (f"{ALLOWED}/", True), (f"{ALLOWED}/sub", True), (f"{ALLOWED}-evil", False),
        (f"{ALLOWED}x", False), (f"{ALLOWED}/../x", False), (f"{ALLOWED}/sub/../../x", False), (".", False),
        (f"{ALLOWED}/../x://y", False),
    )
)
"""Store locations against the allow-list (``spec.sync.confinement.check_store_location``; target capability
``store-locations``: ``{store}/allowed`` is allowed): SHOULD (Seafowl takes any)."""


def _judge(row: Row, out: PutOutcome) -> str | None:
    """What is wrong with ``out`` for ``row`` (None: as the row says)."""
    from conformance.sync.suite import _numbers

    if row.refused is None:
        got = _numbers(out)
        return None if got.startswith(f"accepted=True memory={row.sequence} ") else f"accepted wanted, got {got}"
    if isinstance(out.error, row.refused) and row.text in out.error_text:
        return None
    got = f"{type(out.error).__name__}: {out.error_text[:120]}" if out.error else _numbers(out)
    return f"{row.refused.__name__} {row.text!r} wanted, got {got}"


def rows_case(rows: Sequence[Row]) -> Callable[[SyncTarget, CaseContext], Verdict]:
    """Each row's put, on its own origin and table; every row as it says."""
    def check(t: SyncTarget, ctx: CaseContext) -> Verdict:
        from conformance.sync.suite import _cmd, _ids

        problems = []
        for row in rows:
            origin, path = _ids()
            cmd = _cmd(row.path(path) if row.path else path, origin, row.sequence, row.descs)
            if row.command is not None:
                cmd = row.command(cmd, t)
            raw = row.raw(cmd) if row.raw is not None else None
            out = t.put(ctx, cmd, pa.table(row.columns), raw_cmd=raw)
            problem = _judge(row, out)
            if problem is not None:
                problems.append(f"{row.rule} [{row.input}]: {problem}")
        refused = sum(r.refused is not None for r in rows)
        return Verdict(not problems, f"{len(rows)} rows ({refused} smallest violating inputs refused, "
                       f"{len(rows) - refused} nearest valid ones accepted)",
                       f"{len(problems)} rows differ: " + "; ".join(problems[:3]) if problems else "every row as it says")
    return check


EVOLVED_DESCS: Final = BASE_DESCS + _descs((VALUE, "w"))


def _evolved(rows: Sequence[tuple[int, str | None, object]], w_type: pa.DataType = pa.int64()) -> pa.Table:
    """Upserts of ``(id, v, w)`` (old key null), w of ``w_type``."""
    return pa.table({"old_id": pa.array([None] * len(rows), pa.int64()),
                     "new_id": pa.array([r[0] for r in rows], pa.int64()),
                     "v": pa.array([r[1] for r in rows], pa.string()),
                     "x_col": pa.array([r[2] for r in rows], w_type)})


def schema_evolution_accepted(t: SyncTarget, ctx: CaseContext) -> Verdict:
    """Every valid evolution of a table (k, v) is taken: a put bringing a value column w the table lacks (the
    table gains w, its earlier rows null), also with w first among the values, then a put leaving w out (w's
    stored values kept); the nearest invalid one, w again of another type, is refused and writes nothing."""
    from conformance.sync.suite import _cmd, _ids, _numbers

    origin, path = _ids()
    w_first = _descs((OLD, "id"), (NEW, "id"), (VALUE, "w"), (VALUE, "v"))
    puts = [("the table (id, v)", BASE_DESCS, pa.table(_base()), True),
            ("a new value column w", EVOLVED_DESCS, _evolved([(2, "b", 7)]), True),
            ("w first among the values", w_first, _evolved([(3, "c", 8)]).select(["old_id", "new_id", "x_col", "v"]),
             True),
            ("w left out", BASE_DESCS, pa.table({**_base(), "new_id": pa.array([2], pa.int64()),
                                                 "v": pa.array(["b2"])}), True),
            ("w as a string (nearest invalid)", EVOLVED_DESCS, _evolved([(4, "d", "x")], pa.string()), False)]
    got, problems = [], []
    for seq, (what, descs, batch, taken) in enumerate(puts, start=1):
        answer = _numbers(t.put(ctx, _cmd(path, origin, seq, descs), batch))
        got.append(f"{what}: {answer.split(' durable=')[0]}")
        if answer.startswith(f"accepted=True memory={seq} ") != taken or (
                not taken and "TABLE_SCHEMA_MISMATCH" not in answer):
            problems.append(what)
    rows = t.table(path)
    want = [{"id": 1, "v": "a", "w": None}, {"id": 2, "v": "b2", "w": 7}, {"id": 3, "v": "c", "w": 8}]
    return Verdict(not problems and rows == want, f"the four valid puts taken, the string w refused; rows {want}",
                   "; ".join(got) + f"; rows {rows}")
