"""What another corpus of a suite tells apart of one corpus's survivors (``corpus_record.told_apart_elsewhere``): the
whole suite's true gaps are what no corpus tells apart."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from conformance.corpus_record import (told_apart_elsewhere, told_apart_in_file, told_apart_in_names,
                                      told_apart_in_record)
from conformance.operator_mutants import OperatorMutant, rule_of


def _mutant(line: int, operator: str) -> OperatorMutant:
    return OperatorMutant("spec.sync.squash", "merge", operator, line, line, 4, 9, "x")


def test_a_survivor_is_told_apart_elsewhere_only_when_another_corpus_must_have_told_that_mutant_apart() -> None:
    lone, pair_a, pair_b, other = _mutant(3, "< -> <="), _mutant(5, "1 -> 2"), _mutant(6, "1 -> 2"), _mutant(7, "+ -> -")
    mutants = [lone, pair_a, pair_b, other]
    rule = ("spec.sync.squash", rule_of(pair_a.name))
    # this corpus left the lone rule, one of the pair (told the other apart) and `other`
    left = [("spec.sync.squash", rule_of(lone.name)), rule, ("spec.sync.squash", rule_of(other.name))]
    inputs = told_apart_in_names([lone.name, pair_a.name])  # which of the pair is unknown by rule: maybe ours
    record = {"mutants": [{"module": "spec.sync.squash", "rule": rule_of(pair_b.name), "outcome": "told apart"},
                          {"module": "spec.sync.squash", "rule": rule_of(pair_a.name), "outcome": "told apart"},
                          {"module": "spec.sync.squash", "rule": rule_of(other.name), "outcome": "survivor"}]}
    assert told_apart_elsewhere(left, mutants, {"inputs": inputs}) == ["inputs", None, None]
    both = told_apart_in_record(record)
    assert both == Counter({rule: 2})
    assert told_apart_elsewhere(left, mutants, {"inputs": inputs, "machines": both}) == ["inputs", "machines", None]
    assert told_apart_elsewhere(left, mutants, {}) == [None, None, None]


def test_a_corpus_file_is_read_as_a_record_or_as_vectors_naming_what_they_told_apart(tmp_path: Path) -> None:
    record = {"mutants": [{"module": "spec.sync.squash", "rule": "squash.merge: 1 -> 2", "outcome": "told apart"},
                          {"module": "spec.sync.squash", "rule": "squash.merge: + -> -", "outcome": "survivor"}]}
    vectors = {"selection": {"killedBy": {"spec.sync.squash:merge:5: 1 -> 2": 0}}, "testGroups": []}
    (tmp_path / "record.json").write_text(json.dumps(record))
    (tmp_path / "vectors.json").write_text(json.dumps(vectors))
    told = Counter({("spec.sync.squash", "squash.merge: 1 -> 2"): 1})
    assert told_apart_in_file(tmp_path / "record.json") == told == told_apart_in_file(tmp_path / "vectors.json")
