"""Every rule the cluster runtime runs is in some corpus's scope: a spec module ``reference/cluster`` imports is
mutated by a cluster corpus (so its cases are chosen by its rules) or judged by another suite's corpus, said why."""

from __future__ import annotations

import importlib

from conformance.cluster.corpus_scope import CORPORA, JUDGED_ELSEWHERE, RUNTIME
from conformance.corpus_scope import judged_functions, runtime_modules, unjudged


def test_every_spec_module_the_cluster_runtime_imports_is_judged_by_a_corpus() -> None:
    modules = runtime_modules(RUNTIME)
    assert {"spec.cluster.session", "spec.admission", "spec.departure", "spec.shared_secret"} <= set(modules)
    assert unjudged(modules, judged_functions(CORPORA), JUDGED_ELSEWHERE) == []


def test_a_name_judged_elsewhere_is_in_that_corpus_s_modules_and_imported_by_the_runtime() -> None:
    modules = set(runtime_modules(RUNTIME))
    for name, (corpus, why) in JUDGED_ELSEWHERE.items():
        module = name if name in modules else name.rsplit(".", 1)[0]
        assert module in importlib.import_module(corpus).MODULES and why, name
        assert module in modules, f"{name} is no longer imported by reference/cluster: drop it from JUDGED_ELSEWHERE"


def test_what_a_corpus_mutates_of_a_module_in_part_is_told_from_the_rest() -> None:
    scope = judged_functions(CORPORA)
    assert scope["spec.cluster.session"] is None and scope["spec.admission"] == {"due_by", "StrangerAdmission"}
    assert unjudged(["spec.admission"], scope, {}) == ["spec.admission.ConnectionAdmission"]
    assert unjudged(["spec.admission"], scope, {"spec.admission.ConnectionAdmission": ""}) == []
    assert unjudged(["spec.departure"], {"spec.departure": {"Departures.leaving"}}, {}) == ["spec.departure.Departures"]
    assert unjudged(["spec.departure"], {"spec.departure": {"Departures"}}, {}) == []
