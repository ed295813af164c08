"""Delta deletion vectors (PROTOCOL.md, "Deletion Vectors" and "Deletion Vector Format") as layouts.

A deletion vector (DV) is the set of row positions of one Parquet data file that are no longer
in the table.  Its bytes are a ``RoaringBitmapArray``: a little-endian magic number, then a 64-bit
Roaring bitmap in the portable format of the RoaringFormatSpec (a bucket count, then per bucket
its high 32 bits and a portable 32-bit Roaring bitmap of the low 32 bits).  A DV is kept inline
in the log (Z85 text) or in a DV file: a version byte, then per DV a big-endian size, the
bitmap bytes and their CRC-32.  The ``deletionVector`` descriptor of an add or remove action says
where.  The layouts below are the single source of truth for these bytes; the functions turn
row positions into them and back.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from construct import (
    Array,
    Bytes,
    Check,
    Computed,
    Const,
    ConstructError,
    GreedyRange,
    If,
    IfThenElse,
    Int8ub,
    Int16ul,
    Int32ub,
    Int32ul,
    Int64ul,
    OneOf,
    Struct,
    Switch,
    Terminated,
    this,
)

from spec.errors import ProtocolError

FEATURE = "deletionVectors"
"""The table feature a table lists in both ``readerFeatures`` and ``writerFeatures``."""
MIN_READER_VERSION = 3
MIN_WRITER_VERSION = 7
ENABLE_PROPERTY = "delta.enableDeletionVectors"
"""Writers write new DVs only on tables where this property is ``true``."""

MAGIC_NUMBER = 1681511377
"""``PortableRoaringBitmapArraySerializationFormat.MAGIC_NUMBER``: the portable 64-bit format."""
DV_FILE_VERSION = 1
SERIAL_COOKIE_NO_RUNCONTAINER = 12346
SERIAL_COOKIE = 12347
NO_OFFSET_THRESHOLD = 4
"""With run containers, the offset header is present only from this many containers on."""
ARRAY_CONTAINER_MAX = 4096
"""A container of more values than this (and no run flag) is a bitmap of 2^16 bits."""
BITMAP_CONTAINER_BYTES = 8192
Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
ENCODED_UUID_LENGTH = 20


class DeletionVectorError(ProtocolError):
    """Bytes or a descriptor that are not a deletion vector as the Delta protocol defines it."""

    condition = "DELTA_DELETION_VECTOR_INVALID"


def _container_kind(ctx: Any) -> str:
    """``run``, ``bitmap`` or ``array``: a run flag wins, else more than 4096 values is a bitmap."""
    i = ctx._index
    flags = ctx.run_flags
    if flags is not None and flags[i // 8] >> (i % 8) & 1:
        return "run"
    return "bitmap" if ctx.headers[i].cardinality_minus_one + 1 > ARRAY_CONTAINER_MAX else "array"


ARRAY_CONTAINER = Struct(
    "values" / Bytes(lambda ctx: 2 * (ctx._.headers[ctx._._index].cardinality_minus_one + 1))
    * "the container's values, ascending, each a little-endian uint16",
)
BITMAP_CONTAINER = Struct("bits" / Bytes(BITMAP_CONTAINER_BYTES) * "2^16 bits, value v at bit v % 64 of word v // 64")
RUN_CONTAINER = Struct(
    "run_count" / Int16ul,
    "runs" / Bytes(2 * 2 * this.run_count) * "per run, little-endian uint16 start and length - 1",
)

ROARING32 = Struct(
    "cookie" / OneOf(Int16ul, [SERIAL_COOKIE_NO_RUNCONTAINER, SERIAL_COOKIE])
    * "12346: no run containers, a uint32 count follows; 12347: run containers may follow",
    "count_minus_one" / Int16ul * "container count - 1 (cookie 12347); 0, the cookie's high half (cookie 12346)",
    Check(lambda ctx: ctx.cookie == SERIAL_COOKIE or ctx.count_minus_one == 0),
    "count" / IfThenElse(this.cookie == SERIAL_COOKIE, Computed(this.count_minus_one + 1), Int32ul)
    * "container count (a uint32 field with cookie 12346 only)",
    "run_flags" / If(this.cookie == SERIAL_COOKIE, Bytes((this.count + 7) // 8))
    * "bit i set: container i is a run container (cookie 12347 only)",
    "headers" / Array(
        this.count,
        Struct("key" / Int16ul * "high 16 bits of the container's values",
               "cardinality_minus_one" / Int16ul * "values in the container - 1"),
    ),
    "offsets" / If(
        lambda ctx: ctx.cookie != SERIAL_COOKIE or ctx.count >= NO_OFFSET_THRESHOLD,
        Array(this.count, Int32ul * "byte offset of each container from the cookie"),
    ),
    "containers" / Array(
        this.count,
        Switch(_container_kind, {"array": ARRAY_CONTAINER, "bitmap": BITMAP_CONTAINER, "run": RUN_CONTAINER}),
    ),
)
"""A 32-bit Roaring bitmap in the portable serialisation of the RoaringFormatSpec (little-endian)."""

ROARING_BITMAP_ARRAY = Struct(
    "magic" / Const(MAGIC_NUMBER, Int32ul) * "1681511377 (portable format), little-endian",
    "bucket_count" / Int64ul * "number of 32-bit buckets",
    "buckets" / Array(this.bucket_count, Struct(
        "key" / Int32ul * "high 32 bits of the bucket's row positions; Delta requires the top bit clear",
        "bitmap" / ROARING32,
    )),
    Terminated,
)
"""A DV's bytes: row positions as a 64-bit Roaring bitmap behind Delta's magic number."""

DV_FILE_ENTRY = Struct(
    "data_size" / Int32ub * "size of the RoaringBitmapArray bytes (the descriptor's sizeInBytes)",
    "data" / Bytes(this.data_size) * "one RoaringBitmapArray",
    "checksum" / Int32ub * "CRC-32 of data",
)
"""One DV in a DV file; a descriptor's ``offset`` is the position of its ``data_size``."""

DV_FILE = Struct(
    "version" / Const(DV_FILE_VERSION, Int8ub) * "format version 1",
    "entries" / GreedyRange(DV_FILE_ENTRY),
    Terminated,
)
"""A DV file (``deletion_vector_<uuid>.bin``): a version byte, then DVs back to back (big-endian)."""


def _runs(keys: np.ndarray[Any, Any]) -> tuple[list[int], list[int]]:
    """``[start, end)`` of each run of equal values in sorted ``keys``."""
    if not len(keys):
        return [], []
    starts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    return [0, *starts.tolist()], [*starts.tolist(), len(keys)]


def _roaring32_bytes(low: np.ndarray[Any, np.dtype[np.uint32]]) -> bytes:
    """``ROARING32`` bytes of sorted distinct values: cookie 12346, array or bitmap containers, no runs.

    Built with NumPy rather than ``ROARING32.build`` (a flush encodes a DV per file it touches);
    ``tests/sync/test_delta_dv_vectors.py`` holds it to the layout.
    """
    keys = (low >> 16).astype(np.uint16)
    starts, ends = _runs(keys)
    headers = np.empty((len(starts), 2), dtype="<u2")
    containers = []
    for i, (s, e) in enumerate(zip(starts, ends)):
        values = (low[s:e] & 0xFFFF).astype("<u2")
        headers[i] = (keys[s], e - s - 1)
        if e - s > ARRAY_CONTAINER_MAX:
            bits = np.zeros(1 << 16, dtype=bool)
            bits[values] = True
            containers.append(np.packbits(bits, bitorder="little").tobytes())
        else:
            containers.append(values.tobytes())
    first = 8 + 8 * len(containers)
    offsets = (first + np.cumsum([0] + [len(c) for c in containers[:-1]])).astype("<u4")
    head = np.array([SERIAL_COOKIE_NO_RUNCONTAINER, len(containers)], dtype="<u4").tobytes()
    return head + headers.tobytes() + (offsets.tobytes() if containers else b"") + b"".join(containers)


def encode_positions(positions: Iterable[int] | np.ndarray[Any, Any]) -> bytes:
    """The RoaringBitmapArray bytes (``ROARING_BITMAP_ARRAY``) of a set of row positions (0 <= position < 2^63)."""
    values = np.unique(np.asarray(list(positions) if not isinstance(positions, np.ndarray) else positions,
                                  dtype=np.int64))
    if len(values) and (values[0] < 0):
        raise DeletionVectorError("row positions are not negative", position=int(values[0]))
    unsigned = values.astype(np.uint64)
    high = (unsigned >> np.uint64(32)).astype(np.uint32)
    starts, ends = _runs(high)
    parts = [np.array([MAGIC_NUMBER], "<u4").tobytes(), np.array([len(starts)], "<u8").tobytes()]
    for s, e in zip(starts, ends):
        parts.append(np.array([high[s]], "<u4").tobytes())
        parts.append(_roaring32_bytes((unsigned[s:e] & np.uint64(0xFFFFFFFF)).astype(np.uint32)))
    return b"".join(parts)


def _decode_roaring32(parsed: Any) -> np.ndarray[Any, np.dtype[np.uint32]]:
    parts = []
    for header, container in zip(parsed.headers, parsed.containers):
        high = np.uint32(header.key) << np.uint32(16)
        if "values" in container:
            low = np.frombuffer(container["values"], dtype="<u2")
        elif "bits" in container:
            low = np.flatnonzero(np.unpackbits(np.frombuffer(container["bits"], np.uint8), bitorder="little"))
        else:
            runs = np.frombuffer(container["runs"], dtype="<u2").reshape(-1, 2).astype(np.int64)
            low = np.concatenate([np.arange(s, s + n + 1) for s, n in runs]) if len(runs) else np.array([], np.int64)
        if len(low) != header.cardinality_minus_one + 1:
            raise DeletionVectorError("a Roaring container holds as many values as its header says",
                                      key=int(header.key), expected=header.cardinality_minus_one + 1, got=len(low))
        parts.append(high | low.astype(np.uint32))
    return np.concatenate(parts) if parts else np.array([], np.uint32)


def decode_positions(data: bytes) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The sorted row positions of RoaringBitmapArray bytes (``DeletionVectorError`` if malformed)."""
    try:
        parsed = ROARING_BITMAP_ARRAY.parse(data)
    except ConstructError as exc:
        raise DeletionVectorError(f"not a portable RoaringBitmapArray: {exc}".splitlines()[0]) from None
    parts = []
    last_key = -1
    for bucket in parsed.buckets:
        if bucket.key >= 1 << 31 or bucket.key <= last_key:
            raise DeletionVectorError("bucket keys ascend and keep their top bit clear", key=int(bucket.key))
        last_key = bucket.key
        parts.append((np.int64(bucket.key) << np.int64(32)) | _decode_roaring32(bucket.bitmap).astype(np.int64))
    return np.concatenate(parts) if parts else np.array([], np.int64)


def z85_encode(data: bytes) -> str:
    """Z85 (ZeroMQ RFC 32) text of ``data``, whose length must be a multiple of 4."""
    if len(data) % 4:
        raise DeletionVectorError("Z85 encodes whole 4-byte words", length=len(data))
    out = []
    for (word,) in np.frombuffer(data, dtype=">u4").reshape(-1, 1).tolist():
        chars = []
        for _ in range(5):
            word, digit = divmod(word, 85)
            chars.append(Z85_ALPHABET[digit])
        out.append("".join(reversed(chars)))
    return "".join(out)


def z85_decode(text: str) -> bytes:
    """The bytes of Z85 ``text`` (a multiple of 5 characters of the Z85 alphabet)."""
    if len(text) % 5 or any(c not in Z85_ALPHABET for c in text):
        raise DeletionVectorError("not Z85 text", length=len(text))
    out = bytearray()
    for i in range(0, len(text), 5):
        word = 0
        for c in text[i:i + 5]:
            word = word * 85 + Z85_ALPHABET.index(c)
        if word >= 1 << 32:
            raise DeletionVectorError("a Z85 group above 2^32", group=text[i:i + 5])
        out += word.to_bytes(4, "big")
    return bytes(out)


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """The ``deletionVector`` struct of an add or remove action."""

    storage_type: str
    """``u`` (file named by a UUID, relative to the table), ``i`` (inline) or ``p`` (absolute path)."""
    path_or_inline_dv: str
    size_in_bytes: int
    """Size of the RoaringBitmapArray bytes (before Z85 when inline)."""
    cardinality: int
    """Row positions the DV removes from its data file."""
    offset: int | None = None
    """Position of the DV's size field in its file; absent (None) inline, read as 0 when absent otherwise."""

    @classmethod
    def inline(cls, data: bytes, cardinality: int) -> DeletionVectorDescriptor:
        """An inline DV: the bytes, zero-padded to whole Z85 words, as Z85 text."""
        return cls("i", z85_encode(data + bytes(-len(data) % 4)), len(data), cardinality)

    @classmethod
    def in_file(cls, file_id: uuid.UUID, offset: int, size_in_bytes: int, cardinality: int,
                prefix: str = "") -> DeletionVectorDescriptor:
        """A DV at ``offset`` of ``<prefix>/deletion_vector_<file_id>.bin`` in the table's directory."""
        return cls("u", prefix + z85_encode(file_id.bytes), size_in_bytes, cardinality, offset)

    @property
    def unique_id(self) -> str:
        """``<storageType><pathOrInlineDv>[@<offset>]``: tells logical files of one data file apart."""
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"

    def relative_path(self) -> str:
        """Where a ``u`` DV's file is, relative to the table's directory."""
        if self.storage_type != "u" or len(self.path_or_inline_dv) < ENCODED_UUID_LENGTH:
            raise DeletionVectorError("only a 'u' descriptor names a relative file", storage_type=self.storage_type)
        prefix = self.path_or_inline_dv[:-ENCODED_UUID_LENGTH]
        file_id = uuid.UUID(bytes=z85_decode(self.path_or_inline_dv[-ENCODED_UUID_LENGTH:]))
        return f"{prefix}/deletion_vector_{file_id}.bin" if prefix else f"deletion_vector_{file_id}.bin"

    def inline_data(self) -> bytes:
        """The RoaringBitmapArray bytes of an ``i`` descriptor."""
        if self.storage_type != "i":
            raise DeletionVectorError("only an 'i' descriptor holds its bytes", storage_type=self.storage_type)
        return z85_decode(self.path_or_inline_dv)[:self.size_in_bytes]

    def to_json(self) -> dict[str, Any]:
        """The struct as the log's JSON writes it (``offset`` absent when None)."""
        out: dict[str, Any] = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline_dv}
        if self.offset is not None:
            out["offset"] = self.offset
        out.update(sizeInBytes=self.size_in_bytes, cardinality=self.cardinality)
        return out

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> DeletionVectorDescriptor:
        """The descriptor of a log action's ``deletionVector`` (``DeletionVectorError`` if malformed)."""
        try:
            kind, text = doc["storageType"], doc["pathOrInlineDv"]
            size, cardinality, offset = int(doc["sizeInBytes"]), int(doc["cardinality"]), doc.get("offset")
        except (KeyError, TypeError, ValueError) as exc:
            raise DeletionVectorError(f"a deletionVector struct lacks {exc}") from None
        if kind not in ("u", "i", "p") or (kind == "i" and offset is not None):
            raise DeletionVectorError("storageType is u, i or p; an inline DV has no offset", storage_type=kind)
        return cls(kind, str(text), size, cardinality, None if offset is None else int(offset))


def dv_file(bitmaps: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """``DV_FILE`` bytes holding ``bitmaps`` (RoaringBitmapArray bytes) and the offset of each.

    Joined directly rather than through ``DV_FILE.build`` (a flush writes one entry per file it
    touches); the vectors hold it to the layout.
    """
    parts, offsets, offset = [DV_FILE_VERSION.to_bytes(1, "big")], [], 1
    for bitmap in bitmaps:
        parts += [len(bitmap).to_bytes(4, "big"), bitmap, zlib.crc32(bitmap).to_bytes(4, "big")]
        offsets.append(offset)
        offset += 4 + len(bitmap) + 4
    return b"".join(parts), offsets


def read_dv_entry(data: bytes, size_in_bytes: int) -> bytes:
    """The RoaringBitmapArray bytes of the DV file entry at the start of ``data`` (its size and CRC checked)."""
    try:
        entry = DV_FILE_ENTRY.parse(data)
    except ConstructError:
        raise DeletionVectorError("a DV file entry is cut short", size_in_bytes=size_in_bytes) from None
    if entry.data_size != size_in_bytes:
        raise DeletionVectorError("the DV's size in its file differs from its descriptor's",
                                  expected=size_in_bytes, got=entry.data_size)
    if zlib.crc32(entry.data) != entry.checksum:
        raise DeletionVectorError("the DV's CRC-32 does not match its bytes", expected=entry.checksum)
    return bytes(entry.data)


def read_dv_file(data: bytes) -> list[bytes]:
    """Every DV of a whole DV file, in order, each checked against its CRC-32."""
    try:
        entries = DV_FILE.parse(data).entries
    except ConstructError as exc:
        raise DeletionVectorError(f"not a DV file: {exc}".splitlines()[0]) from None
    for entry in entries:
        if zlib.crc32(entry.data) != entry.checksum:
            raise DeletionVectorError("the DV's CRC-32 does not match its bytes", expected=entry.checksum)
    return [bytes(e.data) for e in entries]
