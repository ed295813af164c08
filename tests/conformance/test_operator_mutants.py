"""The operator mutants that choose a walk corpus: each one changes behaviour where it says, and the
selection keeps exactly the walks that tell the spec apart from them."""

from __future__ import annotations

import importlib
from typing import Any

from conformance.operator_mutants import Runner, fresh_modules, mutants_of, select

MODULE = "spec.sync.commit_time"


def _runner() -> Runner:
    rule = importlib.import_module(MODULE).commit_timestamp_ms

    def run(walk: Any) -> Any:
        return [rule(now, previous) for now, previous in walk]

    return run


def test_each_mutant_compiles_and_changes_its_span_only() -> None:
    mutants = mutants_of(MODULE)
    operators = {m.operator for m in mutants}
    assert {"max(now_ms, previous_ms + COMMIT_STEP_MS): max -> min", "previous_ms + COMMIT_STEP_MS: + -> -",
            "previous_ms is None: is -> is not"} <= operators
    original = (importlib.import_module(MODULE).__file__ or "")
    text = open(original).read()
    for mutant in mutants:
        changed = mutant.source(text)
        assert changed != text
        compile(changed, original, "exec")


def test_a_planted_mutant_is_seen_only_inside_its_context() -> None:
    (swap,) = [m for m in mutants_of(MODULE) if m.operator.endswith("max -> min")]
    with fresh_modules(["spec."], swap):
        assert _runner()([(5, 10)]) == [5]
    assert _runner()([(5, 10)]) == [11]


def test_select_keeps_the_walks_that_tell_mutants_apart_and_names_the_survivors() -> None:
    walks = [[(7, None)], [(5, 10)], [(20, 10)]]
    selection = select(walks, _runner, ["spec."], mutants_of(MODULE))
    swap = f"{MODULE}:commit_timestamp_ms:21: max(now_ms, previous_ms + COMMIT_STEP_MS): max -> min"
    assert selection.killed_by[swap] == 1
    assert set(selection.kept) <= {0, 1, 2} and 1 in selection.kept
    assert not selection.broken
    # Every mutant is either told apart or named as a survivor; none is lost.
    assert len(selection.killed_by) + len(selection.survivors) == len(mutants_of(MODULE))


def test_untraced_selection_tries_every_walk_within_max_tries() -> None:
    """``traced=False`` (a runner whose spec code runs in threads the tracer misses) makes every walk a candidate;
    ``max_tries`` bounds how many are tried before a mutant is called a survivor."""
    (swap,) = [m for m in mutants_of(MODULE) if m.operator.endswith("max -> min")]
    walks = [[(7, None)], [(5, 10)]]  # the first never reaches max(...), the second tells min apart
    assert select(walks, _runner, ["spec."], [swap], traced=False).killed_by == {swap.name: 1}
    assert select(walks, _runner, ["spec."], [swap], traced=False, max_tries=1).survivors == [swap.name]
