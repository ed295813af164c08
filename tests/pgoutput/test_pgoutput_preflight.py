"""The check of each published table before streaming: keys, types, and read access where values are read back."""

from __future__ import annotations

from spec.pgoutput.preflight import PublishedColumn, PublishedTable, problems

TEXT = PublishedColumn("v", 25, -1, "text")


def _table(identity: str, *, pk: bool = True, index: bool = False, readable: bool = True,
           columns: tuple[PublishedColumn, ...] = (TEXT,)) -> PublishedTable:
    return PublishedTable("public", "t", identity, pk, index, readable, columns)


def test_keys_by_replica_identity() -> None:
    assert not problems(_table("d"), reads_back=True)
    assert not problems(_table("f"), reads_back=True)
    assert not problems(_table("i", pk=False, index=True), reads_back=True)
    for table in (_table("n"), _table("d", pk=False), _table("f", pk=False), _table("i", index=False)):
        assert [p.split(" (")[0] for p in problems(table, reads_back=False)] == ["public/t has no replica identity key"]


def test_types_without_an_arrow_form_and_too_wide_numerics() -> None:
    columns = (TEXT, PublishedColumn("d", 1700, ((40 << 16) | 2) + 4, "numeric(40,2)"),
               PublishedColumn("n", 1700, ((38 << 16) | 2) + 4, "numeric(38,2)"), PublishedColumn("i", 1186, -1, "interval"))
    assert [p.split(",")[0] for p in problems(_table("d", columns=columns), reads_back=False)] == [
        "public/t: column d has type numeric(40", "public/t: column i has type interval"]


def test_read_access_matters_only_where_values_are_read_back() -> None:
    assert not problems(_table("d", readable=False), reads_back=False)
    assert problems(_table("d", readable=False), reads_back=True) == [
        "public/t cannot be read by the source's role, which reads unchanged TOAST values back from it "
        "(GRANT SELECT ON public.t TO the role)"]
