"""The snapshot's rules: chunk queries in key order after the last key, numbers below the slot's
point, the progress record (a torn last line ignored) and where a resumed snapshot starts."""

from __future__ import annotations

import pytest

from spec.pgoutput.messages import Relation, RelationColumn
from spec.pgoutput.snapshot import (
    SNAPSHOT_NUMBERS,
    SnapshotProgress,
    SnapshotRefused,
    SnapshotTable,
    chunk_number,
    chunk_transaction,
    resume_plan,
)
from spec.pgoutput.transactions import TransactionAssembler

PAIRS = SnapshotTable(Relation(7, "public", "pairs", "d", (
    RelationColumn(True, "a", 23, -1), RelationColumn(True, "b", 25, -1), RelationColumn(False, "v", 20, -1))),
    (("a", "integer"), ("b", "text")), row_filter="v > 0")
ONE = SnapshotTable(Relation(8, "s", "it's", "d", (RelationColumn(True, "id", 20, -1),)), (("id", "bigint"),))


def test_chunk_queries() -> None:
    assert PAIRS.chunk_query(None, 10) == 'SELECT "a", "b", "v" FROM "public"."pairs" WHERE (v > 0) ORDER BY "a", "b" LIMIT 10'
    assert PAIRS.chunk_query(("5", "x'y"), 10) == ('SELECT "a", "b", "v" FROM "public"."pairs" WHERE (v > 0) AND '
                                                  "(\"a\", \"b\") > ('5'::integer, 'x''y'::text) ORDER BY \"a\", \"b\" LIMIT 10")
    assert ONE.chunk_query(("9",), 3) == 'SELECT "id" FROM "s"."it\'s" WHERE "id" > \'9\'::bigint ORDER BY "id" LIMIT 3'
    assert PAIRS.last_key([("1", "a", "3"), ("2", "b", None)]) == ("2", "b")


def test_a_chunk_is_a_transaction_of_inserts_under_its_number() -> None:
    tx = chunk_transaction(PAIRS, [("1", "a", "3"), ("2", "b", None)], 99, TransactionAssembler())
    assert tx.commit_lsn == 99 and tx.row_count == 2
    (changes,) = tx.changes.values()
    assert [(c.new_key, c.values) for c in changes] == [((1, "a"), (3,)), ((2, "b"), (None,))]


def test_numbers_stay_below_the_consistent_point() -> None:
    point = 0x1_6B3_7A8
    assert chunk_number(point, 0) == point - SNAPSHOT_NUMBERS and chunk_number(point, SNAPSHOT_NUMBERS - 1) == point - 1
    with pytest.raises(SnapshotRefused):
        chunk_number(point, SNAPSHOT_NUMBERS)


def test_progress_and_resume() -> None:
    text = (SnapshotProgress.chunk_line(10, "public/pairs", ("1", "a")) + SnapshotProgress.chunk_line(11, "public/pairs", ("2", "b"))
            + SnapshotProgress.chunk_line(12, "s/it's", ("5",)) + '{"chunk": 13, "tab')
    progress = SnapshotProgress.parse(text)
    assert [n for n, _, _ in progress.chunks] == [10, 11, 12] and not progress.done(12)
    assert progress.resume_after(None) is None and progress.resume_after(9) is None
    assert progress.resume_after(11) == ("public/pairs", ("2", "b"))
    assert resume_plan([PAIRS, ONE], progress.resume_after(11)) == [(PAIRS, ("2", "b")), (ONE, None)]
    assert resume_plan([PAIRS, ONE], progress.resume_after(12)) == [(ONE, ("5",))]
    done = SnapshotProgress.parse(text.rsplit("\n", 1)[0] + "\n" + SnapshotProgress.complete_line(12))
    assert done.done(12) and not done.done(11) and SnapshotProgress.parse(SnapshotProgress.complete_line(None)).done(None)
