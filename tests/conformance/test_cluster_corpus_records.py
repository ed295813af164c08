"""The cluster corpora's reports (docs/walks/cluster*.md) are current: each corpus's recorded selection judged the
spec's mutants as they are now, and its report and vector file are that record's. A spec change that adds, removes
or changes a mutant of a corpus's code makes its ``--check`` fail until it is selected again; code that only moves
does not."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest

from conformance.cluster import client_walks, input_edges, inputs, walks, wire_walks
from conformance.corpus_record import (CorpusFiles, Elsewhere, Record, corpus_report, record_of, record_with, stale,
                                      told_apart_elsewhere, told_apart_in_record, unjudged_mutants)
from conformance.operator_mutants import OperatorMutant, Selection, fresh_modules, rule_of
from spec.cluster import wire
from spec.cluster.errors import ERRORS_BY_CODE, ClusterError, InvalidIdentifier, RevisionMismatch
from spec.cluster.wire import ServiceKind


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


def test_a_survivor_another_corpus_tells_apart_is_listed_as_its_before_any_hand_judgement() -> None:
    """A survivor another corpus's record tells apart (``Elsewhere``) is caught by the suite all the same, so the report
    lists it under that corpus (even when argued equivalent by hand: the argument is wrong)."""
    mutants = [_mutant(3), _mutant(5, "1 -> 2")]
    record = record_of(mutants, Selection(kept=[], killed_by={}, survivors=[m.name for m in mutants], broken=[]), 10)
    other = told_apart_in_record({"mutants": [{"module": "spec.cluster.wire", "rule": "wire.decode: 1 -> 2",
                                               "outcome": "told apart"}]})
    report = corpus_report("# r", "intro", ["spec.cluster.wire"], {"wire.decode: 1 -> 2": ("equivalent", "why")},
                           record, Elsewhere({"other corpus": other}, mutants))
    assert "| spec.cluster.wire | 2 | 0 | 0 | 2 | 0 | 0 | 1 | 1 |" in report
    assert "### elsewhere: told apart by the other corpus (1)" in report and "equivalent: why" not in report
    assert "(1): 1 / 2 = 50.0%" in report


def test_an_error_s_condition_and_a_cas_failure_s_text_reach_the_suite_through_errorfrom_not_the_wire() -> None:
    """What makes the wire walks' judgement of these survivors true (wire_walks.JUDGED, "elsewhere"): ERROR carries
    the code and the message, CAS_ERROR no message at all, and a message never holds the condition; the case
    inputs/derived-every-edge decodes every code of the error tree and both CAS_ERRORs with the target's errorFrom,
    whose answers name the condition and carry RevisionMismatch's message; every class of the tree is registered, so
    each code decodes to its own condition (INVALID_IDENTIFIER's too, which a remote Core once saw as CLUSTER_ERROR)."""
    assert [s.name for s in wire.PAYLOADS[ServiceKind.ERROR].subcons] == ["code", "message"]
    assert "message" not in [s.name for s in wire.PAYLOADS[ServiceKind.CAS_ERROR].subcons]
    assert all(cls.condition not in ClusterError("text").message for cls in ERRORS_BY_CODE.values())
    calls = [edge.call for edge in input_edges.error_codes()]
    answers = [inputs.run_call(call)["value"] for call in calls]
    by_code = {wire.decode(bytes.fromhex(call["body"])).payload.get("code"): answer["condition"]
               for call, answer in zip(calls, answers)}
    assert {cls.code: cls.condition for cls in ERRORS_BY_CODE.values()}.items() <= by_code.items()
    assert by_code[InvalidIdentifier.code] == InvalidIdentifier.condition
    assert {answer["message"] for answer in answers if answer["condition"] == RevisionMismatch.condition} == {
        "key 'k': expected absent, found absent", "key 'k': expected revision 3, found revision 4"}


@pytest.mark.parametrize("corpus, mutants", [(walks, walks.walk_mutants), (wire_walks, wire_walks.wire_mutants)],
                         ids=["walks", "wire_walks"])
def test_every_hand_judgement_judges_a_survivor_no_other_corpus_tells_apart(
        corpus: ModuleType, mutants: Callable[[], list[OperatorMutant]]) -> None:
    """An argument by hand that another corpus's record contradicts (it tells the mutant apart), or that judges nothing
    any more, is dropped: the report lists such a survivor as the other corpus's, so the argument would be dead."""
    record = json.loads(corpus.FILES.record.read_text())
    survivors = [(e["module"], e["rule"]) for e in record["mutants"] if e["outcome"] == "survivor"]
    elsewhere = walks.suite_elsewhere(corpus.FILES, mutants())
    caught = told_apart_elsewhere(survivors, elsewhere.mutants, elsewhere.others)
    left = [rule for (_, rule), other in zip(survivors, caught) if other is None]
    assert [key for key in corpus.JUDGED if not any(rule.startswith(key) for rule in left)] == []


@pytest.mark.parametrize("told_apart, kept, edges", [
    (wire_walks._SHOWN_TEXT, wire_walks._KEPT_ID, input_edges.hello_refusals),
    (wire_walks._CLIENT_REQUEST, None, input_edges.update_requests)], ids=["hello refusals", "client requests"])
def test_what_the_wire_walks_leave_to_the_input_edges_is_told_apart_by_them_planted(
        told_apart: tuple[str, str], kept: tuple[str, str] | None, edges: Callable[[], list[input_edges.Edge]]) -> None:
    """What wire_walks.JUDGED says of these survivors, each planted (a fresh import of the spec each, 0.25 s: a reason
    is checked on the code it names): a refusal's text, which the wire carries but a wire walk records by its
    condition, and a client's request from typed ops, which no wire walk builds, are told apart by
    inputs/derived-every-edge; the cut of the id a refusal keeps in its parameters changes no refusal's frame."""
    def judged(mutant: OperatorMutant) -> tuple[str, str] | None:
        return next((v for key, v in wire_walks.JUDGED.items() if rule_of(mutant.name).startswith(key)), None)

    planted = [m for m in wire_walks.wire_mutants() if judged(m) == told_apart or kept is not None and judged(m) == kept]
    calls = [edge.call for edge in edges()]
    owed = [inputs.run_call(call) for call in calls]
    assert any(judged(m) == told_apart for m in planted)
    for mutant in planted:
        with fresh_modules(inputs.PREFIXES, mutant):
            run = inputs.load_runner()
            answers: list[Any] = []
            for call in calls:
                try:
                    answers.append(run(call))
                except Exception as error:  # noqa: BLE001 - a crash is an answer the spec never gives
                    answers.append(f"raised {type(error).__name__}")
        assert (answers != owed) == (judged(mutant) == told_apart), mutant.name
