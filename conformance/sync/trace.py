"""``python -m conformance sync-trace FILE``: replay a sync-writer trace, one JSON line per op.

FILE is ``{"ops": [{"op": "put", "table": T, "origin": O, "seq": N or null, "rows": K},
{"op": "flush"}, {"op": "flush", "table": T}, ...]}``.  ``flush`` flushes table T, or
without T the table whose pending data is oldest (nothing when no data is pending).  A put with zero rows and no ``seq`` is a probe.
Each op prints ``{"op": i, "memory": {...}, "durable": {...}}`` over every origin seen
so far, or ``{"op": i, "error": "<exact message>"}`` after which replay stops.  The
flush policy does not run: traces flush only where they say so.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from spec.sync.errors import SyncError
from spec.sync.writer import SyncWriter, is_probe


class TraceFormatError(ValueError):
    """The trace file does not follow the documented format."""


def _seq(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TraceFormatError(f"seq must be an integer, a decimal string or null, got {value!r}")
    n = int(value)
    if not 0 <= n < 2**64:
        raise TraceFormatError(f"seq out of uint64 range: {value!r}")
    return n


def replay(ops: Sequence[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """The output lines of replaying ``ops`` against the spec's sync writer."""
    writer: SyncWriter[int] = SyncWriter()
    origins: list[str] = []
    for i, op in enumerate(ops):
        kind = op.get("op")
        try:
            if kind == "put":
                origin, table, rows = str(op["origin"]), str(op["table"]), int(op["rows"])
                seq = _seq(op.get("seq"))
                if rows < 0:
                    raise TraceFormatError(f"op {i}: rows must be >= 0")
                if origin not in origins:
                    origins.append(origin)
                if not is_probe(rows, seq):
                    writer.put(table=table, origin=origin, sequence=seq, rows=rows, size=rows, payload=rows, now=0.0)
            elif kind == "flush":
                flushed = str(op["table"]) if "table" in op else writer.oldest_table()
                if flushed is not None and flushed in writer.pending_tables:
                    writer.complete_flush(writer.plan_flush(flushed))
            else:
                raise TraceFormatError(f"op {i}: unknown op {kind!r}")
        except SyncError as exc:
            yield {"op": i, "error": exc.message}
            return
        yield {
            "op": i,
            "memory": {o: writer.sequences(o)[0] for o in origins},
            "durable": {o: writer.sequences(o)[1] for o in origins},
        }


def load(path: str) -> list[Mapping[str, Any]]:
    """The ops of a trace file."""
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), list):
        raise TraceFormatError('trace must be an object with an "ops" list')
    return list(doc["ops"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the CLI arguments."""
    parser.add_argument("file", help="trace JSON file")


def main(args: argparse.Namespace) -> int:
    """Print one JSON line per op; exit 2 on a malformed trace."""
    try:
        for line in replay(load(args.file)):
            print(json.dumps(line), flush=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
