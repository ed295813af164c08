"""The cluster corpora selected by mutation and replayed through ``exec:``: the client walks, the pure-function
inputs and the wire walks (conformance/cluster/vectors/client_walks.json, inputs.json, wire_walks.json). Each is
valid against its schema, every recorded answer is still what the spec gives (a spec change that alters
behaviour forces a regeneration), every comment names the rule it was kept for, and its replay through ``exec:``
is able to fail."""

from __future__ import annotations

import copy
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import jsonschema
import pytest

from conformance.cluster import client_walks, inputs, wire_walks
from conformance.cluster.harness import open_target
from conformance.framework import CaseContext, RunOptions
from conformance.cluster import bugs as cluster_bugs
from conformance.mutation import Mutant
from conformance.operator_mutants import fresh_modules

Vector = dict[str, Any]


@dataclass(frozen=True)
class Corpus:
    """One corpus: its generator module and file, the spec's answer to one of its tests now, a test changed so that
    its replay must fail with the text the failure must show, its replay through a target, and how many test groups
    that replay plays (None: all)."""

    module: ModuleType
    file: Path
    answer_now: Callable[[Vector], Any]
    planted: Callable[[Vector], tuple[Vector, str]]
    replay: Callable[[Any, RunOptions, Vector], list[str]]
    replayed: int | None = None


def _client_walk_now(test: Vector) -> Any:
    return client_walks.run_walk({"settings": test["settings"], "steps": test["steps"]})


def _late_deadline(test: Vector) -> tuple[Vector, str]:
    changed = copy.deepcopy(test)
    changed["answer"][-1]["deadline"] = 123456.0
    return changed, "123456.0"


def _planted_raise(test: Vector) -> tuple[Vector, str]:
    changed = copy.deepcopy(test)
    changed["answer"] = {"raised": "Planted"}
    return changed, "Planted"


def _planted_ok(test: Vector) -> tuple[Vector, str]:
    changed = copy.deepcopy(test)
    changed["answer"][0] = changed["answer"][0][:-1] + [{"kind": "OK", "id": 77}]
    return changed, "'id': 77"


def _wire_walk_replay(target: Any, options: RunOptions, test: Vector) -> list[str]:
    return wire_walks.replay_through(target, CaseContext(options=options, deadline=time.monotonic() + 60), test)


CORPORA = {
    "client_walks": Corpus(client_walks, client_walks.WALKS_FILE, _client_walk_now, _late_deadline,
                           lambda target, _, test: client_walks.replay_through(target, test)),
    "inputs": Corpus(inputs, inputs.INPUTS_FILE, lambda test: inputs.run_call(inputs.call_of(test)), _planted_raise,
                     lambda target, _, test: inputs.replay_through(target, test)),
    "wire_walks": Corpus(wire_walks, wire_walks.WALKS_FILE, lambda test: wire_walks.run_walk({"steps": test["steps"]}),
                         _planted_ok, _wire_walk_replay, replayed=1),  # each walk a session: the first group
}


def recorded_tests(corpus: Corpus, groups: int | None = None) -> list[Vector]:
    document: dict[str, Any] = json.loads(corpus.file.read_text())
    return [t for g in document["testGroups"][:groups] for t in g["tests"]]


@pytest.fixture(params=sorted(CORPORA))
def corpus(request: pytest.FixtureRequest) -> Corpus:
    return CORPORA[request.param]


def test_the_corpus_matches_its_schema_and_counts(corpus: Corpus) -> None:
    document = json.loads(corpus.file.read_text())
    jsonschema.validate(document, json.loads((corpus.file.parent / corpus.module.SCHEMA_NAME).read_text()))
    numbers = [t["tcId"] for t in recorded_tests(corpus)]
    assert document["numberOfTests"] == len(numbers) and numbers == list(range(1, len(numbers) + 1))
    assert document["seed"] == corpus.module.SEED and document["generatorVersion"] == corpus.module.GENERATOR_VERSION


def test_every_recorded_answer_is_the_spec_s_answer_now(corpus: Corpus) -> None:
    """Regenerate with ``nice -n 10 python -m conformance.cluster.<corpus>`` when this fails."""
    modules = {m.rsplit(".", 1)[-1] for m in corpus.module.MODULES}
    for test in recorded_tests(corpus):
        assert corpus.answer_now(test) == test["answer"], f"tcId {test['tcId']} is stale"
        assert test["comment"].split(".", 1)[0] in modules and ": " in test["comment"]


def test_a_test_answered_otherwise_fails_its_replay_through_exec(corpus: Corpus) -> None:
    options = RunOptions(suite="cluster", target=f"exec:{sys.executable} -m conformance.cluster.reference_target",
                         timeout=60)
    tests = recorded_tests(corpus, corpus.replayed)
    changed, shown = corpus.planted(tests[0])
    with open_target(options) as target:
        assert [p for t in tests for p in corpus.replay(target, options, t)] == []
        problems = corpus.replay(target, options, changed)
    assert problems and "expected" in problems[0] and shown in problems[0]


GOSSIP_TO_ALL = next(bug for bug in cluster_bugs.BUGS if bug.name == "model-shard-gossip-to-all")
"""The catalogue's own entry: SHARD gossip told to every member (argued equivalent: the RFC's minimum)."""


def _model_answers(mutant: Mutant) -> list[tuple[Any, Any]]:
    """Each recorded model call's answer under ``mutant`` beside the recorded one."""
    tests = [t for t in recorded_tests(CORPORA["inputs"]) if t["call"] == "model"]
    with fresh_modules(inputs.PREFIXES, mutant):
        run = inputs.load_runner()
        return [(run(inputs.call_of(t)), t["answer"]) for t in tests]


def test_shard_gossip_told_beyond_its_shard_is_the_spec_s_answer_and_told_to_none_is_not() -> None:
    """The RFC makes SHARD scope a minimum (flag WiderGossip; etcd tells every member): a model telling every member
    answers every recorded call as the spec does, while one telling no member fails one."""
    assert all(got == wanted for got, wanted in _model_answers(GOSSIP_TO_ALL))
    to_none = replace(GOSSIP_TO_ALL, name="model-shard-gossip-to-none",
                      replace="recipients = [] if scope is Scope.SHARD else sorted(self.members)")
    assert any(got != wanted for got, wanted in _model_answers(to_none))


REVISIONS_BY_TWO = Mutant("model-revisions-by-two", "spec/cluster/model.py", "        self.revision += 1\n",
                          "        self.revision += 2\n", "the model's revisions step by two, as a provider's may")


def test_a_service_whose_revisions_skip_numbers_answers_every_wire_walk_as_recorded() -> None:
    """docs/spec/cluster.md promises revisions that grow, by any step (etcd's global revision moves for every key):
    a service counting by two answers every recorded wire walk as the spec does (a resume just above a revision
    means the next one the walk named; 0.8 s: 50 walks, a service each)."""
    tests = [t for group in json.loads(wire_walks.WALKS_FILE.read_text())["testGroups"] for t in group["tests"]]
    with fresh_modules(wire_walks.PREFIXES, REVISIONS_BY_TWO):
        run = wire_walks.load_runner()
        assert [run({"steps": t["steps"]}) for t in tests] == [t["answer"] for t in tests]


def test_a_resume_around_a_revision_names_no_number_the_step_decides() -> None:
    symbols = wire_walks.Symbols()
    for revision in (10, 14):
        symbols.name("r", revision)
    assert [symbols.revision("r1", plus) for plus in (-1, 0, 1)] == [9, 10, 14]
    assert symbols.revision("r2", 1) == 15  # none named after it: just above
