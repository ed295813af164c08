"""Generate the deletion-vector golden vectors: ``python -m conformance.delta.vectorgen [--check]``.

Valid bytes are built by ``spec.delta.deletion_vectors`` from the positions listed; the
run-container and invalid cases are built field by field with its layouts, so they hold forms
this writer never produces (run containers, a bad magic, a set top bit).  Independent readers
check them in ``tests/sync/test_delta_dv_vectors.py``: pyroaring for the Roaring bytes, and
deltalake (delta-rs), which must return exactly the rows the DVs leave.  ``--check`` exits 1
when the committed file differs from what this generator produces.
"""

from __future__ import annotations

import sys
import uuid
import zlib
from pathlib import Path
from typing import Any, Final, Sequence

from conformance import vectorgen
from spec.delta.deletion_vectors import (
    DV_FILE_VERSION,
    MAGIC_NUMBER,
    ROARING32,
    SERIAL_COOKIE,
    DeletionVectorDescriptor,
    dv_file,
    encode_positions,
    z85_encode,
)

VECTOR_DIR: Final = Path(__file__).resolve().parent / "vectors"
VECTOR_FILE: Final = VECTOR_DIR / "deletion_vectors.json"
SCHEMA_NAME: Final = "deletion_vectors.schema.json"
GENERATOR_VERSION: Final = "1"
PROTOCOL_SOURCE: Final = "delta-io/delta PROTOCOL.md at bb1057f4367f555b01e299fd1690d85aafc0ac4c"
PROTOCOL_UUID: Final = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
"""The UUID of the protocol's own descriptor examples (JSON Examples 1 and 2)."""

NOTES: Final = {
    "Empty": "a DV that deletes nothing (no buckets)",
    "ArrayContainer": "a container of at most 4096 values, stored as sorted uint16",
    "BitmapContainer": "a container of more than 4096 values, stored as 2^16 bits",
    "RunContainer": "a container stored as runs (cookie 12347); readers must accept it, this writer never emits it",
    "SeveralBuckets": "positions at or above 2^32, in more than one 32-bit bucket",
    "ProtocolExample": "taken from the protocol's own text",
    "Malformed": "readers must refuse these bytes",
}


def _positions(values: Sequence[int]) -> list[list[str]]:
    """Positions as inclusive ranges ``[first, last]`` of decimal strings (64-bit values survive any JSON reader)."""
    ranges: list[list[int]] = []
    for v in sorted(set(values)):
        if ranges and ranges[-1][1] == v - 1:
            ranges[-1][1] = v
        else:
            ranges.append([v, v])
    return [[str(a), str(b)] for a, b in ranges]


def _run_bitmap(runs: list[tuple[int, int]], key: int = 0) -> bytes:
    """RoaringBitmapArray bytes of one bucket whose one container is the ``runs`` (start, length - 1)."""
    run_bytes = b"".join(s.to_bytes(2, "little") + n.to_bytes(2, "little") for s, n in runs)
    cardinality = sum(n + 1 for _, n in runs)
    roaring = ROARING32.build({
        "cookie": SERIAL_COOKIE, "count_minus_one": 0, "count": 1, "run_flags": b"\x01",
        "headers": [{"key": 0, "cardinality_minus_one": cardinality - 1}], "offsets": None,
        "containers": [{"run_count": len(runs), "runs": run_bytes}],
    })
    return (MAGIC_NUMBER.to_bytes(4, "little") + (1).to_bytes(8, "little") + key.to_bytes(4, "little")
            + bytes(roaring))


def _bitmap_test(comment: str, flags: list[str], positions: Sequence[int] | None, data: bytes) -> dict[str, Any]:
    return {"comment": comment, "flags": flags, "hex": data.hex(),
            "positions": None if positions is None else _positions(positions),
            "result": "invalid" if positions is None else "valid"}


def _bitmaps() -> list[dict[str, Any]]:
    scattered = [7, 1000, 65535, 65536, 131071, 200000, 1 << 20]
    one = encode_positions([5])
    bad_key = bytearray(encode_positions([5]))
    bad_key[12:16] = (1 << 31).to_bytes(4, "little")
    return [
        _bitmap_test("no rows deleted", ["Empty"], [], encode_positions([])),
        _bitmap_test("row 0 only", ["ArrayContainer"], [0], encode_positions([0])),
        _bitmap_test("the rows of the protocol's inline example (3, 4, 7, 11, 18, 29)", ["ArrayContainer"],
                     [3, 4, 7, 11, 18, 29], encode_positions([3, 4, 7, 11, 18, 29])),
        _bitmap_test("positions across several 16-bit containers", ["ArrayContainer"],
                     scattered, encode_positions(scattered)),
        _bitmap_test("4096 values: the largest array container", ["ArrayContainer"],
                     range(4096), encode_positions(range(4096))),
        _bitmap_test("4097 values: the smallest bitmap container", ["BitmapContainer"],
                     range(4097), encode_positions(range(4097))),
        _bitmap_test("a bitmap container and an array container", ["BitmapContainer", "ArrayContainer"],
                     [*range(10, 5010), 70000], encode_positions([*range(10, 5010), 70000])),
        _bitmap_test("positions in buckets 0, 1 and 2^31 - 1", ["SeveralBuckets"],
                     [1, (1 << 32) + 2, ((1 << 31) - 1 << 32) + 3],
                     encode_positions([1, (1 << 32) + 2, ((1 << 31) - 1 << 32) + 3])),
        _bitmap_test("rows 100..199 and 300 as a run container", ["RunContainer"],
                     [*range(100, 200), 300], _run_bitmap([(100, 99), (300, 0)])),
        _bitmap_test("rows 0..4999 as one run", ["RunContainer"], range(5000), _run_bitmap([(0, 4999)])),
        _bitmap_test("the native format's magic (1681511376), which is not the portable one", ["Malformed"],
                     None, (MAGIC_NUMBER - 1).to_bytes(4, "little") + one[4:]),
        _bitmap_test("a bucket key with its top bit set", ["Malformed"], None, bytes(bad_key)),
        _bitmap_test("cut short inside the container", ["Malformed"], None, one[:-1]),
        _bitmap_test("a trailing byte", ["Malformed"], None, one + b"\x00"),
        _bitmap_test("cookie 12346 with a non-zero high half", ["Malformed"], None,
                     one[:18] + b"\x01\x00" + one[20:]),
    ]


def _files() -> list[dict[str, Any]]:
    def test(comment: str, flags: list[str], dvs: list[list[int]] | None, data: bytes,
             offsets: list[int] | None) -> dict[str, Any]:
        return {"comment": comment, "flags": flags, "hex": data.hex(),
                "dvs": None if dvs is None else [_positions(d) for d in dvs], "offsets": offsets,
                "result": "invalid" if dvs is None else "valid"}

    one, one_offsets = dv_file([encode_positions([2, 3])])
    two_dvs = [[1], [0, 65536, 70000]]
    two, two_offsets = dv_file([encode_positions(d) for d in two_dvs])
    bad_crc = bytearray(one)
    bad_crc[-1] ^= 0xFF
    return [
        test("one DV (rows 2 and 3); its offset is 1, where its size field starts", [], [[2, 3]], one, one_offsets),
        test("two DVs back to back, each with its own size and CRC-32", [], two_dvs, two, two_offsets),
        test("a CRC-32 that does not match the DV's bytes", ["Malformed"], None, bytes(bad_crc), None),
        test(f"a version byte other than {DV_FILE_VERSION}", ["Malformed"], None, b"\x02" + one[1:], None),
        test("a size field larger than the bytes that follow", ["Malformed"], None,
             one[:1] + (len(one)).to_bytes(4, "big") + one[5:], None),
    ]


def _descriptors() -> list[dict[str, Any]]:
    def test(comment: str, flags: list[str], d: DeletionVectorDescriptor, path: str | None,
             positions: list[int] | None) -> dict[str, Any]:
        return {"comment": comment, "flags": flags, "descriptor": d.to_json(), "uniqueId": d.unique_id,
                "relativePath": path, "positions": None if positions is None else _positions(positions),
                "result": "valid"}

    inline_rows = [3, 4, 7, 11, 18, 29]
    inline = DeletionVectorDescriptor.inline(encode_positions(inline_rows), len(inline_rows))
    odd = DeletionVectorDescriptor.inline(encode_positions([9]), 1)
    example1 = DeletionVectorDescriptor.in_file(PROTOCOL_UUID, 4, 40, 6, prefix="ab")
    example2 = DeletionVectorDescriptor("p", f"s3://mytable/deletion_vector_{PROTOCOL_UUID}.bin", 40, 6, 4)
    return [
        test("JSON Example 1: a relative file with the random prefix 'ab'", ["ProtocolExample"], example1,
             f"ab/deletion_vector_{PROTOCOL_UUID}.bin", None),
        test("a relative file without a prefix, first DV at offset 1", [],
             DeletionVectorDescriptor.in_file(PROTOCOL_UUID, 1, 36, 2), f"deletion_vector_{PROTOCOL_UUID}.bin", None),
        test("JSON Example 2: an absolute path", ["ProtocolExample"], example2, None, None),
        test("inline, rows 3, 4, 7, 11, 18, 29 (size a multiple of 4)", [], inline, None, inline_rows),
        test("inline, zero-padded to whole Z85 words; sizeInBytes is the unpadded size", [], odd, None, [9]),
    ]


def _z85() -> list[dict[str, Any]]:
    hello = bytes.fromhex("864fd26fb559f75b")
    return [
        {"comment": "the Z85 specification's example (ZeroMQ RFC 32)", "flags": [], "hex": hello.hex(),
         "text": "HelloWorld", "result": "valid"},
        {"comment": "a UUID is 16 bytes, 20 characters", "flags": ["ProtocolExample"], "hex": PROTOCOL_UUID.bytes.hex(),
         "text": z85_encode(PROTOCOL_UUID.bytes), "result": "valid"},
        {"comment": "'#####' is above 2^32 - 1", "flags": ["Malformed"], "hex": None, "text": "#####",
         "result": "invalid"},
    ]


def document() -> dict[str, Any]:
    """The whole vector file."""
    groups = [("RoaringBitmapArray", _bitmaps()), ("DeletionVectorFile", _files()),
              ("DeletionVectorDescriptor", _descriptors()), ("Z85", _z85())]
    tc = 0
    test_groups = []
    for kind, tests in groups:
        numbered = []
        for t in tests:
            tc += 1
            numbered.append({"tcId": tc, **t})
        test_groups.append({"type": kind, "tests": numbered})
    return {
        "algorithm": "delta-deletion-vectors",
        "schema": SCHEMA_NAME,
        "generatorVersion": GENERATOR_VERSION,
        "numberOfTests": tc,
        "header": [
            f"Delta deletion vectors per {PROTOCOL_SOURCE} (Deletion Vectors; Deletion Vector Format).",
            "RoaringBitmapArray: hex of the DV bytes (little-endian magic 1681511377, uint64 bucket count,",
            "per bucket a uint32 key and a portable 32-bit Roaring bitmap) and the row positions they hold.",
            "DeletionVectorFile: a version byte 1, then per DV a big-endian size, the bytes and their CRC-32;",
            "offsets are where each DV's size field starts (the descriptor's offset).",
            "Positions are inclusive ranges [first, last] of decimal strings. 'invalid' bytes must be refused by a reader.",
        ],
        "notes": NOTES,
        "testGroups": test_groups,
    }


def render() -> str:
    return vectorgen.render(document())


def main(argv: Sequence[str] | None = None) -> int:
    return vectorgen.write_or_check("conformance.delta.vectorgen", __doc__, VECTOR_FILE, render, argv)


if __name__ == "__main__":
    sys.exit(main())
