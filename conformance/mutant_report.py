"""The generated report of a corpus selected by operator mutants (``docs/walks/*.md``): per module how many mutants
were told apart, broke or survived, and every survivor judged equivalent (why), unreachable through the contract
(which input it lacks), or listed as a gap the generator should close."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from conformance.operator_mutants import rule_of

Judgement = tuple[str, str, str, str]
"""(``module-tail.function``, a part of the operator ("" = every one), ``equivalent`` or ``unreachable``, why)."""


def judged(name: str, table: Sequence[Judgement]) -> tuple[str, str] | None:
    """(class, why) of a surviving mutant, or None when it is a gap."""
    function, operator = rule_of(name).split(": ", 1)
    for where, part, verdict, why in table:
        if where == function and part in operator:
            return verdict, why
    return None


def per_module(outcome: Mapping[str, Any]) -> dict[str, Counter[str]]:
    """Mutants, told apart, broken and survivors of each module, in the order the selection listed them."""
    per: dict[str, Counter[str]] = {}
    for m in outcome["mutants"]:
        c = per.setdefault(m["module"], Counter())
        c["mutants"] += 1
        c["told apart"] += m["name"] in outcome["killedBy"]
        c["broken"] += m["name"] in outcome["broken"]
        c["survivors"] += m["name"] in outcome["survivors"]
    return per


def render_report(outcome: Mapping[str, Any], intro: Sequence[str], table: Sequence[Judgement], contract: str,
                  elsewhere: tuple[str, frozenset[str]] = ("", frozenset())) -> str:
    """The report: ``intro`` (its heading and how it was generated), the table of modules, the figure
    told apart / (mutants - broken - equivalent), and the survivors by judgement; ``contract`` names the interface
    the inputs go through (for "unreachable through ..."). ``elsewhere`` names another corpus of the same suite and
    the mutants its recorded selection tells apart: a survivor judged by no entry that it tells apart is caught by
    the suite all the same, so it is listed apart, not as a gap."""
    lines = [*intro, "| module | mutants | told apart | broken | survivors |", "|---|---:|---:|---:|---:|"]
    total: Counter[str] = Counter()
    for module, c in per_module(outcome).items():
        total.update(c)
        lines.append(f"| {module} | {c['mutants']} | {c['told apart']} | {c['broken']} | {c['survivors']} |")
    lines.append(f"| **all** | {total['mutants']} | {total['told apart']} | {total['broken']} | {total['survivors']} |")
    verdicts = {name: judged(name, table) for name in outcome["survivors"]}
    equivalent = sum(1 for v in verdicts.values() if v is not None and v[0] == "equivalent")
    unreachable = sum(1 for v in verdicts.values() if v is not None and v[0] == "unreachable")
    other, other_told = elsewhere
    caught_there = [name for name, v in verdicts.items() if v is None and name in other_told]
    gaps = [name for name, v in verdicts.items() if v is None and name not in other_told]
    told = total["told apart"]
    judged_total = total["mutants"] - total["broken"] - equivalent
    lines += ["", f"Survivors judged equivalent: {equivalent}; unreachable through {contract}: {unreachable}; "
              + (f"told apart by {other} instead: {len(caught_there)}; " if other else "")
              + f"gaps (not judged): {len(gaps)}.",
              f"Told apart / (mutants - broken - equivalent): {told} / {judged_total} = {told / judged_total:.1%}; "
              f"leaving out the unreachable too: {told} / {judged_total - unreachable} = "
              f"{told / (judged_total - unreachable):.1%}."]
    timed_out = outcome.get("timedOut", [])
    if timed_out:  # a time limit is never a kill (operator_mutants.Selection.timed_out): counted as not told apart
        lines += [f"Ran past the time limit twice on every candidate that did not tell them apart (neither told apart "
                  f"nor a survivor): {len(timed_out)}: " + ", ".join(f"`{rule_of(n)}`" for n in timed_out) + "."]
    for verdict in ("equivalent", "unreachable"):
        lines += ["", f"## Survivors judged {verdict}", ""]
        reasons: dict[str, list[str]] = {}
        for name, v in verdicts.items():
            if v is not None and v[0] == verdict:
                reasons.setdefault(v[1], []).append(rule_of(name))
        for why, rules in reasons.items():
            functions = Counter(r.split(": ", 1)[0] for r in rules)
            lines.append(f"- {why}: " + ", ".join(f"`{f}` ({n})" for f, n in functions.items()))
    if other:
        lines += ["", f"## Survivors told apart by {other}", ""]
        lines += [f"- `{function}` ({n})" for function, n in _by_function(caught_there).items()]
    lines += ["", "## Gaps: survivors not judged, by function", ""]
    grouped: dict[str, list[str]] = {}
    for name in gaps:
        function, operator = rule_of(name).split(": ", 1)
        grouped.setdefault(function, []).append(operator)
    for function in sorted(grouped, key=lambda f: (-len(grouped[f]), f)):
        lines.append(f"- `{function}` ({len(grouped[function])}):")
        lines += [f"  - `{op}`" for op in grouped[function]]
    return "\n".join(lines) + "\n"


def _by_function(names: Sequence[str]) -> dict[str, int]:
    """How many of ``names`` each function has, most first."""
    counted = Counter(rule_of(name).split(": ", 1)[0] for name in names)
    return dict(sorted(counted.items(), key=lambda item: (-item[1], item[0])))
