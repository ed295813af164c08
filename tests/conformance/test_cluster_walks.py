"""The cluster walk corpus (conformance/cluster/vectors/walks.json): valid against its schema, every
walk's recorded answers still the spec's (a spec change that alters behaviour forces a regeneration),
every comment naming the rule it was kept for, and its replay able to fail."""

from __future__ import annotations

import copy
import json
import sys
import time
from typing import Any

import jsonschema

from conformance.cluster import walks
from conformance.cluster.harness import open_target
from conformance.cluster.vector_suite import replay_detector, replay_trace
from conformance.framework import CaseContext, RunOptions


def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(walks.WALKS_FILE.read_text())
    return loaded


def test_the_corpus_matches_its_schema_and_counts() -> None:
    corpus = document()
    jsonschema.validate(corpus, json.loads((walks.WALKS_FILE.parent / walks.SCHEMA_NAME).read_text()))
    assert corpus["numberOfTests"] == sum(len(g["tests"]) for g in corpus["testGroups"])
    assert corpus["seed"] == walks.SEED and corpus["generatorVersion"] == walks.GENERATOR_VERSION
    assert [t["tcId"] for g in corpus["testGroups"] for t in g["tests"]] == list(range(1, corpus["numberOfTests"] + 1))


def test_every_recorded_answer_is_the_spec_s_answer_now() -> None:
    """Regenerate with ``nice -n 10 python -m conformance.cluster.walks`` when this fails."""
    for group in document()["testGroups"]:
        for test in group["tests"]:
            walk = walks.walk_of(test, group["type"])
            assert walks.run_walk(walk) == walks.answers_of(test, group["type"]), f"tcId {test['tcId']} is stale"
            assert walks.as_vector(walk, walks.run_walk(walk), test["comment"]) | {"tcId": test["tcId"]} == test
            module_function, operator = test["comment"].split(": ", 1)
            assert module_function.split(".", 1)[0] in {m.rsplit(".", 1)[-1] for m in walks.MODULES} and operator


def test_a_walk_answered_otherwise_fails_its_replay() -> None:
    groups = {g["type"]: g["tests"] for g in document()["testGroups"]}
    trace = copy.deepcopy(next(t for t in groups["ModelTrace"] if any("error" in s["result"] for s in t["steps"])))
    step = next(s for s in trace["steps"] if "error" in s["result"])
    step["result"] = {"error": "NO_SUCH_CONDITION"}
    options = RunOptions(suite="cluster", target="memory", timeout=60)
    with open_target(options) as target:
        result = replay_trace(target, options, trace)
    assert not result.passed and "expected {'error': 'NO_SUCH_CONDITION'}" in result.detail
    detector = copy.deepcopy(groups["DetectorTrace"][0])
    tick = next(e for e in detector["events"] if e["event"] == "tick")
    tick["verdicts"] = {"n9": "FAIL"}
    assert not replay_detector(detector).passed


def test_session_policy_and_cas_walks_answered_otherwise_fail_through_the_harness() -> None:
    """Session walks need the service's wire and a stopped clock, policy walks a service started on
    request, CAS walks the runtime's writer carried out: the harness through ``exec:``."""
    groups = {g["type"]: g["tests"] for g in document()["testGroups"]}
    walk = copy.deepcopy(next(t for t in groups["SessionWalk"] if any("revision" in s["result"] for s in t["steps"])))
    step = next(s for s in walk["steps"] if "revision" in s["result"])
    step["result"] = {"error": "CAS_REVISION_MISMATCH"}
    options = RunOptions(suite="cluster", target=f"exec:{sys.executable} -m conformance.cluster.reference_target",
                         timeout=60)
    with open_target(options) as target:
        ctx = CaseContext(options=options, deadline=time.monotonic() + 60)
        assert walks.replay_session_walk(target, ctx, groups["SessionWalk"][0]) == []
        problems = walks.replay_session_walk(target, ctx, walk)
        policy = copy.deepcopy(groups["PolicyWalk"][0])
        assert walks.replay_policy_walk(target, policy) == []
        policy["answer"] = {"refused": True} if "welcome" in policy["answer"] else {"welcome": None}
        assert walks.replay_policy_walk(target, policy) != []
        cas = copy.deepcopy(groups["CasWalk"][0])
        assert walks.replay_cas_walk(target, ctx, cas) == []
        cas["answer"]["sends"] += 1
        assert walks.replay_cas_walk(target, ctx, cas) != []
    assert problems and "expected {'error': 'CAS_REVISION_MISMATCH'}" in problems[0]
