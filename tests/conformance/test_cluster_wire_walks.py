"""The cluster wire walk corpus (conformance/cluster/vectors/wire_walks.json): valid against its schema,
every walk's recorded answers still what the spec's session answers on the harness (a spec change that
alters behaviour forces a regeneration), every comment naming the rule it was kept for, and its replay
through ``exec:`` able to fail."""

from __future__ import annotations

import copy
import json
import sys
import time
from typing import Any

import jsonschema

from conformance.cluster import wire_walks
from conformance.cluster.harness import open_target
from conformance.framework import CaseContext, RunOptions


def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(wire_walks.WALKS_FILE.read_text())
    return loaded


def test_the_corpus_matches_its_schema_and_counts() -> None:
    corpus = document()
    jsonschema.validate(corpus, json.loads((wire_walks.WALKS_FILE.parent / wire_walks.SCHEMA_NAME).read_text()))
    tests = [t for g in corpus["testGroups"] for t in g["tests"]]
    assert corpus["numberOfTests"] == len(tests) and [t["tcId"] for t in tests] == list(range(1, len(tests) + 1))
    assert corpus["seed"] == wire_walks.SEED and corpus["generatorVersion"] == wire_walks.GENERATOR_VERSION


def test_every_recorded_answer_is_the_spec_s_answer_now() -> None:
    """Regenerate with ``nice -n 10 python -m conformance.cluster.wire_walks`` when this fails."""
    modules = {m.rsplit(".", 1)[-1] for m in wire_walks.MODULES}
    for group in document()["testGroups"]:
        for test in group["tests"]:
            assert wire_walks.run_walk({"steps": test["steps"]}) == test["answer"], f"tcId {test['tcId']} is stale"
            assert test["comment"].split(".", 1)[0] in modules and ": " in test["comment"]


def test_a_walk_answered_otherwise_fails_its_replay_through_exec() -> None:
    tests = document()["testGroups"][0]["tests"]
    options = RunOptions(suite="cluster", target=f"exec:{sys.executable} -m conformance.cluster.reference_target",
                         timeout=60)
    changed = copy.deepcopy(tests[0])
    changed["answer"][0] = changed["answer"][0][:-1] + [{"kind": "OK", "id": 77}]
    with open_target(options) as target:
        ctx = CaseContext(options=options, deadline=time.monotonic() + 60)
        assert [p for t in tests for p in wire_walks.replay_through(target, ctx, t)] == []
        problems = wire_walks.replay_through(target, ctx, changed)
    assert problems and "expected" in problems[0] and "'id': 77" in problems[0]
