"""The mutation harness works and its catalogue is in step with the code (the full run: ``make mutants``)."""

from __future__ import annotations


import pytest

from tests.mutants.catalogue import ALL_MUTANTS, ALL_SMOKE, CATALOGUE, Mutant
from tests.mutants.runtime import RUNTIME_CATALOGUE
from tests.mutants.harness import ROOT, PatchDoesNotApply, check_catalogue, chosen, patched, run_all

PROTOCOL_MODULES = {
    "spec/shuffle/writer.py", "spec/shuffle/reader.py", "spec/shuffle/codec.py", "spec/shuffle/framing.py",
    "spec/shuffle/settings.py", "spec/shuffle/transitions.py", "spec/sync/writer.py", "spec/sync/squash.py",
    "spec/sync/schema.py", "spec/cluster/model.py", "spec/cluster/detector.py", "spec/cluster/wire.py",
    "spec/cluster/session.py",
}


RUNTIME_AREAS = {
    "reference/net/reactor.py", "reference/shuffle/transport.py", "reference/shuffle/writer_task.py",
    "reference/shuffle/reader_task.py", "reference/shuffle/task.py", "reference/sync/transport.py",
    "reference/sync/server.py", "reference/sync/store.py", "reference/sync/client.py", "reference/cluster/service.py",
    "reference/cluster/remote.py", "reference/cluster/memory.py", "reference/cdc/source.py",
    "reference/pipeline/postgres.py", "reference/pipeline/progress.py",
}


def test_every_patch_applies_to_the_current_code() -> None:
    """Fails when a snippet moved or changed: rewrite that catalogue entry against the new code."""
    check_catalogue()


def test_the_catalogue_covers_every_module_with_protocol_logic() -> None:
    assert len(CATALOGUE) >= 60
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE), "names are unique"
    assert {m.file for m in CATALOGUE} >= PROTOCOL_MODULES
    assert all(m.description and "\n" not in m.description for m in CATALOGUE)


def test_the_runtime_catalogue_covers_every_area_and_names_its_killers() -> None:
    assert len(RUNTIME_CATALOGUE) >= 60
    assert len({m.name for m in ALL_MUTANTS}) == len(ALL_MUTANTS), "names are unique across the catalogues"
    assert {m.file for m in RUNTIME_CATALOGUE} >= RUNTIME_AREAS
    assert all(m.file.startswith("reference/") and m.tests for m in RUNTIME_CATALOGUE)
    assert all(m.description and "\n" not in m.description for m in RUNTIME_CATALOGUE)


def test_a_snippet_that_is_gone_or_ambiguous_fails_loudly() -> None:
    source = "a = 1\nb = 1\n"
    with pytest.raises(PatchDoesNotApply, match="not found"):
        patched(source, Mutant("gone", "f.py", "c = 1", "c = 2", "d"))
    with pytest.raises(PatchDoesNotApply, match="found 2 times"):
        patched(source, Mutant("twice", "f.py", " = 1", " = 2", "d"))
    assert patched(source, Mutant("once", "f.py", "b = 1", "b = 2", "d")) == "a = 1\nb = 2\n"


def test_the_smoke_mutants_are_killed_and_the_tree_is_left_alone() -> None:
    before = {m.file: (ROOT / m.file).read_bytes() for m in ALL_MUTANTS}
    outcomes = run_all(list(chosen(ALL_MUTANTS, ALL_SMOKE)), workers=2, baseline=False)
    assert [o.mutant for o in outcomes] == list(ALL_SMOKE)
    survivors = [o.mutant for o in outcomes if not o.killed]
    assert not survivors, f"survived: {survivors}"
    assert all(o.killed_by and not o.killed_by.startswith("pytest exit") for o in outcomes), outcomes
    assert {f: (ROOT / f).read_bytes() for f in before} == before
