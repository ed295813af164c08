"""The cluster inputs corpus (conformance/cluster/vectors/inputs.json): valid against its schema, every call's
recorded answer still what the spec's functions give (a spec change that alters behaviour forces a regeneration),
every comment naming the rule it was kept for, and its replay through ``exec:`` able to fail."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import jsonschema

from conformance.cluster import inputs
from conformance.cluster.harness import open_target
from conformance.framework import RunOptions


def recorded_tests() -> list[dict[str, Any]]:
    corpus: dict[str, Any] = json.loads(inputs.INPUTS_FILE.read_text())
    return [t for g in corpus["testGroups"] for t in g["tests"]]


def test_the_corpus_matches_its_schema_and_counts() -> None:
    corpus = json.loads(inputs.INPUTS_FILE.read_text())
    jsonschema.validate(corpus, json.loads((inputs.INPUTS_FILE.parent / inputs.SCHEMA_NAME).read_text()))
    numbers = [t["tcId"] for t in recorded_tests()]
    assert corpus["numberOfTests"] == len(numbers) and numbers == list(range(1, len(numbers) + 1))
    assert corpus["seed"] == inputs.SEED and corpus["generatorVersion"] == inputs.GENERATOR_VERSION


def test_every_recorded_answer_is_the_spec_s_answer_now() -> None:
    """Regenerate with ``nice -n 10 python -m conformance.cluster.inputs`` when this fails."""
    modules = {m.rsplit(".", 1)[-1] for m in inputs.MODULES}
    for test in recorded_tests():
        assert inputs.run_call(inputs.call_of(test)) == test["answer"], f"tcId {test['tcId']} is stale"
        assert test["comment"].split(".", 1)[0] in modules and ": " in test["comment"]


def test_a_call_answered_otherwise_fails_its_replay_through_exec() -> None:
    options = RunOptions(suite="cluster", target=f"exec:{sys.executable} -m conformance.cluster.reference_target",
                         timeout=60)
    changed = copy.deepcopy(recorded_tests()[0])
    changed["answer"] = {"raised": "Planted"}
    with open_target(options) as target:
        assert [p for t in recorded_tests() for p in inputs.replay_through(target, t)] == []
        problems = inputs.replay_through(target, changed)
    assert problems and "expected" in problems[0] and "Planted" in problems[0]
