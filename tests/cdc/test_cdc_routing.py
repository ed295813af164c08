"""The pipeline routes every change of a row to one sink; a key change across sinks becomes a delete
at the old key's sink and an insert of the whole row at the new one's."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa
import pytest

from reference.pipeline.postgres import route_key, routed
from reference.pipeline.routing import owner
from spec.pgoutput.changes import Op, RowChange, TableImage
from spec.pgoutput.errors import UnresolvedToast

IMAGE = TableImage("public/t", (("id", pa.int64()),), (("v", pa.string()),))


def _move(old: int, new: int, changed: bool = True) -> RowChange:
    return RowChange(IMAGE, Op.UPDATE, (old,), (new,), ("x" if changed else None,), (changed,))


def _keys_with(readers: int, same: bool) -> tuple[int, int]:
    for new in range(1, 1000):
        if (owner(route_key("public/t", (0,)), readers) == owner(route_key("public/t", (new,)), readers)) == same:
            return 0, new
    raise AssertionError("no such key")


def test_a_key_change_within_one_sink_travels_whole() -> None:
    old, new = _keys_with(4, same=True)
    [(reader, change)] = routed(_move(old, new, changed=False), 4)
    assert change.changes_key and reader == owner(route_key("public/t", (new,)), 4)


def test_a_key_change_across_sinks_is_a_delete_and_an_insert() -> None:
    old, new = _keys_with(4, same=False)
    (r1, delete), (r2, insert) = routed(_move(old, new), 4)
    assert (r1, delete.op, delete.old_key) == (owner(route_key("public/t", (old,)), 4), Op.DELETE, (old,))
    assert (r2, insert.op, insert.new_key, insert.values) == (owner(route_key("public/t", (new,)), 4), Op.INSERT,
                                                             (new,), ("x",))
    with pytest.raises(UnresolvedToast, match="public/t: column v"):
        routed(_move(old, new, changed=False), 4)


def test_routing_is_the_same_in_every_process() -> None:
    """A restarted run must send each change to the sink (and sync origin) it went to before."""
    keys = [("public/t", (1,)), ("public/t", ("a", 2)), ("s/u", (Decimal("1.50"), dt.date(2024, 1, 2)))]
    code = ("import datetime; from decimal import Decimal; from reference.pipeline.postgres import route_key; "
            f"print([route_key(p, k) for p, k in {keys!r}])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "123"}).stdout.strip()
    assert other == str([route_key(p, k) for p, k in keys])
