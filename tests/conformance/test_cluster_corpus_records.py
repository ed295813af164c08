"""The cluster corpora's reports (docs/walks/cluster*.md) are current: each corpus's recorded selection judged the
spec's mutants as they are now, and its report and vector file are that record's. A spec change that adds, removes
or changes a mutant of a corpus's code makes its ``--check`` fail until it is selected again; code that only moves
does not."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from conformance.cluster import client_walks, inputs, walks, wire_walks
from conformance.corpus_record import CorpusFiles, Record, corpus_report, record_of, record_with, stale, unjudged_mutants
from conformance.operator_mutants import OperatorMutant, Selection


@pytest.mark.parametrize("corpus", [inputs, walks, client_walks, wire_walks], ids=lambda m: m.__name__)
def test_the_report_is_the_record_of_a_selection_over_the_spec_s_mutants_now(corpus: ModuleType) -> None:
    assert corpus.main(["--check"]) == 0, f"run: nice -n 10 python -m {corpus.__name__}"


def _mutant(line: int, operator: str = "< -> <=") -> OperatorMutant:
    return OperatorMutant("spec.cluster.wire", "decode", operator, line, line, 4, 9, "x")


def _render(record: Record) -> str:
    return corpus_report("# r", "intro", ["spec.cluster.wire"], {"wire.decode: 1 -> 2": ("equivalent", "why")}, record)


def _files(tmp_path: Path, mutants: list[OperatorMutant], selection: Selection) -> CorpusFiles:
    files = CorpusFiles(tmp_path / "v.json", tmp_path / "r.json", tmp_path / "r.md")
    record = record_of(mutants, selection, 10)
    files.vectors.write_text(json.dumps({"numberOfTests": len(selection.kept)}))
    files.record.write_text(json.dumps(record))
    files.report.write_text(_render(record))
    return files


def test_a_record_is_stale_when_the_mutants_change_not_when_they_move(tmp_path: Path) -> None:
    mutants = [_mutant(3), _mutant(5, "1 -> 2"), _mutant(5, "1 -> 2")]
    selection = Selection(kept=[4], killed_by={mutants[0].name: 4}, survivors=[mutants[1].name], broken=[])
    files = _files(tmp_path, mutants, selection)
    assert stale(files, mutants, _render) == []
    assert stale(files, [_mutant(30), _mutant(50, "1 -> 2"), _mutant(50, "1 -> 2")], _render) == []
    assert "select again" in stale(files, [*mutants, _mutant(7, "> -> >=")], _render)[0]
    assert "select again" in stale(files, mutants[:2], _render)[0]
    files.report.write_text(files.report.read_text() + "edited\n")
    assert "--report" in stale(files, mutants, _render)[0]


def test_two_mutants_of_one_name_get_one_outcome_each_and_the_report_counts_both(tmp_path: Path) -> None:
    mutants = [_mutant(3), _mutant(5, "1 -> 2"), _mutant(5, "1 -> 2")]
    selection = Selection(kept=[4], killed_by={mutants[0].name: 4, mutants[1].name: 4}, survivors=[mutants[1].name],
                          broken=[])
    record = record_of(mutants, selection, 10)
    assert [e["outcome"] for e in record["mutants"]] == ["told apart", "survivor", "told apart"]
    report = _render(record)
    assert "2 / (3 - 0 - 1) = 100.0%" in report and "| spec.cluster.wire | 3 | 2 | 0 | 1 | 1 | 0 | 0 |" in report
    assert "- `wire.decode: 1 -> 2`" in report


def test_a_record_judged_again_for_its_unjudged_mutants_keeps_every_outcome_it_had(tmp_path: Path) -> None:
    """``--unjudged``: only a mutant beyond the record's entries of its rule is selected for; the record keeps its
    outcomes (two of one rule included, each its own) in the order of the spec's mutants now, the new one's added."""
    mutants = [_mutant(3), _mutant(5, "1 -> 2"), _mutant(5, "1 -> 2")]
    record = record_of(mutants, Selection(kept=[4], killed_by={mutants[0].name: 4, mutants[1].name: 4},
                                          survivors=[mutants[1].name], broken=[]), 10)
    new = _mutant(4, "> -> >=")
    now = [_mutant(30), new, _mutant(50, "1 -> 2"), _mutant(50, "1 -> 2")]
    assert unjudged_mutants(record, now) == [new]
    again = record_with(record, now, [new], Selection(kept=[4, 7], killed_by={new.name: 7}, survivors=[], broken=[]))
    assert [e["outcome"] for e in again["mutants"]] == ["told apart", "told apart", "survivor", "told apart"]
    files = CorpusFiles(tmp_path / "v.json", tmp_path / "r.json", tmp_path / "r.md")
    files.vectors.write_text(json.dumps({"numberOfTests": 2}))
    files.record.write_text(json.dumps(again))
    files.report.write_text(_render(again))
    assert again["kept"] == 2 and stale(files, now, _render) == []
