"""Every rule the shuffle runtime runs is in some corpus's scope: a spec module ``reference/shuffle`` imports is
mutated by a shuffle corpus (so its cases are chosen by its rules) or judged by another suite's corpus, said why."""

from __future__ import annotations

import importlib

from conformance.corpus_scope import judged_functions, runtime_modules, unjudged
from conformance.shuffle.corpus_scope import CORPORA, JUDGED_ELSEWHERE, RUNTIME


def test_every_spec_module_the_shuffle_runtime_imports_is_judged_by_a_corpus() -> None:
    modules = runtime_modules(RUNTIME)
    assert {"spec.auth.handshake", "spec.admission", "spec.departure", "spec.shuffle.writer"} <= set(modules)
    assert unjudged(modules, judged_functions(CORPORA), JUDGED_ELSEWHERE) == []


def test_a_module_judged_elsewhere_is_in_that_corpus_s_modules_and_imported_by_the_runtime() -> None:
    modules = set(runtime_modules(RUNTIME))
    for module, (corpus, why) in JUDGED_ELSEWHERE.items():
        assert module in importlib.import_module(corpus).MODULES and why, module
        assert module in modules, f"{module} is no longer imported by reference/shuffle: drop it from JUDGED_ELSEWHERE"


def test_a_module_or_function_left_out_of_every_corpus_is_named() -> None:
    scope = judged_functions(CORPORA)
    assert scope["spec.shuffle.writer"] is None and scope["spec.admission"] is None
    partial = {**scope, "spec.admission": {"due_by"}}
    assert "spec.admission.StrangerAdmission" in unjudged(["spec.admission"], partial, JUDGED_ELSEWHERE)
    assert "spec.admission.due_by" not in unjudged(["spec.admission"], partial, JUDGED_ELSEWHERE)
    assert "spec.departure.Departures" in unjudged(["spec.departure"], {}, JUDGED_ELSEWHERE)
    assert unjudged(["spec.cluster.wire", "spec.shuffle"], {}, JUDGED_ELSEWHERE) == []  # elsewhere; names only
