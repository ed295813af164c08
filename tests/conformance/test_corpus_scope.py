"""Every rule a suite's runtime runs is in some corpus's scope: a spec module its runtime package imports is mutated by
one of the suite's corpora (so its cases are chosen by its rules) or judged by another suite's corpus, said why. The
shuffle's and the cluster's scopes (conformance/{shuffle,cluster}/corpus_scope.py) by the one check."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from conformance.cluster import corpus_scope as cluster_scope
from conformance.corpus_scope import judged_functions, runtime_modules, unjudged
from conformance.shuffle import corpus_scope as shuffle_scope

SCOPES = {
    shuffle_scope: {"spec.auth.handshake", "spec.admission", "spec.departure", "spec.shuffle.writer"},
    cluster_scope: {"spec.cluster.session", "spec.admission", "spec.departure", "spec.shared_secret"},
}
"""Each suite's scope and spec modules its runtime is known to import (so an empty import list cannot pass)."""


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.RUNTIME)
def test_every_spec_module_the_runtime_imports_is_judged_by_a_corpus(scope: ModuleType) -> None:
    modules = runtime_modules(scope.RUNTIME)
    assert SCOPES[scope] <= set(modules)
    assert unjudged(modules, judged_functions(scope.CORPORA), {**scope.JUDGED_ELSEWHERE, **scope.OUT_OF_SCOPE}) == []


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.RUNTIME)
def test_a_name_judged_elsewhere_is_in_that_corpus_s_modules_and_imported_by_the_runtime(scope: ModuleType) -> None:
    modules = set(runtime_modules(scope.RUNTIME))
    for name, (corpus, why) in scope.JUDGED_ELSEWHERE.items():
        module = name if name in modules else name.rsplit(".", 1)[0]  # a module, or a class or function of one
        assert module in importlib.import_module(corpus).MODULES and why, name
        assert module in modules, f"{name} is no longer imported by {scope.RUNTIME}: drop it from JUDGED_ELSEWHERE"


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.RUNTIME)
def test_a_name_out_of_scope_says_why_and_is_a_name_with_mutants_the_runtime_imports(scope: ModuleType) -> None:
    modules = set(runtime_modules(scope.RUNTIME))
    named = {name.rsplit(".", 1)[0] for name in scope.OUT_OF_SCOPE}
    with_mutants = {name for module in named for name in unjudged([module], {}, {})}
    for name, why in scope.OUT_OF_SCOPE.items():
        assert name.rsplit(".", 1)[0] in modules and why, name
        assert name in with_mutants, f"{name} has no mutant now: drop it from OUT_OF_SCOPE"


def test_a_module_or_function_left_out_of_every_corpus_is_named() -> None:
    scope = judged_functions(shuffle_scope.CORPORA)
    assert scope["spec.shuffle.writer"] is None and scope["spec.admission"] is None
    partial = {**scope, "spec.admission": {"due_by"}}
    elsewhere = shuffle_scope.JUDGED_ELSEWHERE
    assert "spec.admission.StrangerAdmission" in unjudged(["spec.admission"], partial, elsewhere)
    assert "spec.admission.due_by" not in unjudged(["spec.admission"], partial, elsewhere)
    assert "spec.departure.Departures" in unjudged(["spec.departure"], {}, elsewhere)
    assert unjudged(["spec.cluster.wire", "spec.shuffle"], {}, elsewhere) == []  # elsewhere; names only


def test_what_a_corpus_mutates_of_a_module_in_part_is_told_from_the_rest() -> None:
    scope = judged_functions(cluster_scope.CORPORA)
    assert scope["spec.cluster.session"] is None and scope["spec.admission"] == {"due_by", "StrangerAdmission"}
    assert unjudged(["spec.admission"], scope, {}) == ["spec.admission.ConnectionAdmission",
                                                       "spec.admission._EVICTION_RANK"]  # a table: every family's
    assert unjudged(["spec.admission"], scope, dict.fromkeys(unjudged(["spec.admission"], scope, {}), "")) == []
    assert unjudged(["spec.departure"], {"spec.departure": {"Departures.leaving"}}, {}) == ["spec.departure.Departures"]
    assert unjudged(["spec.departure"], {"spec.departure": {"Departures"}}, {}) == []
