"""The corpus report's judgement of a survivor another corpus of the same suite tells apart: caught by the suite,
so listed apart, never as a gap; a survivor neither judges nor tells apart stays a gap."""

from __future__ import annotations

from conformance.mutant_report import render_report

OUTCOME = {"mutants": [{"module": "spec.m", "name": f"spec.m:f:{n}: op{n}"} for n in (1, 2, 3)],
           "killedBy": {"spec.m:f:1: op1": 0}, "broken": [], "survivors": ["spec.m:f:2: op2", "spec.m:f:3: op3"]}


def test_a_survivor_another_corpus_tells_apart_is_no_gap() -> None:
    alone = render_report(OUTCOME, ["# r"], (), "the contract")
    assert "gaps (not judged): 2." in alone and "`op2`" in alone
    shared = render_report(OUTCOME, ["# r"], (), "the contract", ("the other corpus", frozenset({"spec.m:f:2: op2"})))
    assert "told apart by the other corpus instead: 1; gaps (not judged): 1." in shared
    gaps = shared.split("## Gaps")[1]
    assert "`op3`" in gaps and "`op2`" not in gaps
    assert "## Survivors told apart by the other corpus\n\n- `m.f` (1)" in shared
