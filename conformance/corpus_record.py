"""What a corpus's selection found, its generated report, and its command line (issue 43).

A selection runs every mutant on the candidates (minutes), so no test can run it. Its outcome per mutant is recorded
instead (``docs/walks/*-selection.json``), and the report (``docs/walks/*.md``) is rendered from that
record, so a test can say cheaply that either is stale: the spec's mutants now are not the ones the record judged (a
rule added, removed or changed: select again), or the report is not the record's (render it again). A rule is named
without its line (``module-tail.function: operator``), so code that only moves keeps its record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Final, Iterable, Mapping, Sequence

from conformance import vectorgen
from conformance.operator_mutants import OperatorMutant, Selection, rule_of

Record = dict[str, Any]
"""``{"candidates": n, "kept": n, "mutants": [{"module", "rule", "outcome"}, ...]}``, the mutants in selection order."""

TOLD_APART: Final = "told apart"
OUTCOMES: Final = (TOLD_APART, "broken", "survivor", "timed out")


def record_of(mutants: Sequence[OperatorMutant], selection: Selection, candidates: int) -> Record:
    """Each mutant's outcome in ``selection`` (two mutants of one name share its outcomes, one each)."""
    left = {"survivor": Counter(selection.survivors), "broken": Counter(selection.broken),
            "timed out": Counter(selection.timed_out)}
    entries = []
    for mutant in mutants:
        outcome = next((o for o, names in left.items() if names[mutant.name] > 0), TOLD_APART)
        if outcome != TOLD_APART:
            left[outcome][mutant.name] -= 1
        entries.append({"module": mutant.module, "rule": rule_of(mutant.name), "outcome": outcome})
    return {"candidates": candidates, "kept": len(selection.kept), "mutants": entries}


def unjudged_mutants(record: Record, mutants: Sequence[OperatorMutant]) -> list[OperatorMutant]:
    """The ``mutants`` a ``record`` does not judge: each entry judges one mutant of its module and rule."""
    left = Counter((entry["module"], entry["rule"]) for entry in record["mutants"])
    fresh = []
    for mutant in mutants:
        key = (mutant.module, rule_of(mutant.name))
        if left[key] > 0:
            left[key] -= 1
        else:
            fresh.append(mutant)
    return fresh


def record_with(record: Record, mutants: Sequence[OperatorMutant], fresh: Sequence[OperatorMutant],
                selection: Selection) -> Record:
    """``record`` and the outcomes ``selection`` gave the ``fresh`` mutants (:func:`unjudged_mutants`), every entry in the order
    of ``mutants`` (the spec's now); the kept walks ``selection``'s (it carried the record's)."""
    earlier: dict[tuple[str, str], list[str]] = {}
    for entry in record["mutants"]:
        earlier.setdefault((entry["module"], entry["rule"]), []).append(entry["outcome"])
    new = {id(m): entry for m, entry in zip(fresh, record_of(fresh, selection, record["candidates"])["mutants"])}
    entries = [new.get(id(m)) or {"module": m.module, "rule": rule_of(m.name),
                                  "outcome": earlier[(m.module, rule_of(m.name))].pop(0)} for m in mutants]
    return {"candidates": record["candidates"], "kept": len(selection.kept), "mutants": entries}


Rule = tuple[str, str]
"""``(module, rule)`` of a mutant (:func:`conformance.operator_mutants.rule_of`: no line), as records name it."""


def told_apart_in_record(record: Record) -> Counter[Rule]:
    """How many mutants of each rule a record (:func:`record_of`) tells apart."""
    return Counter((e["module"], e["rule"]) for e in record["mutants"] if e["outcome"] == TOLD_APART)


def told_apart_in_names(names: Iterable[str]) -> Counter[Rule]:
    """How many mutants of each rule a selection's told-apart names (``module:function:line: operator``, its
    ``killedBy``) tell apart: one each (two mutants sharing a name count once: the count errs low)."""
    return Counter((name.split(":", 1)[0], rule_of(name)) for name in names)


def told_apart_in_file(path: Path) -> Counter[Rule]:
    """What a corpus's recorded selection tells apart, by rule: a record (:func:`told_apart_in_record`), or a vector
    file whose ``selection`` names the mutants it told apart (``killedBy``: :func:`told_apart_in_names`)."""
    recorded = json.loads(path.read_text())
    if "selection" in recorded:
        return told_apart_in_names(recorded["selection"]["killedBy"])
    return told_apart_in_record(recorded)


def told_apart_elsewhere(left: Sequence[Rule], mutants: Sequence[OperatorMutant], others: Mapping[str, Counter[Rule]]
                         ) -> list[str | None]:
    """For each mutant a corpus ``left`` (its survivors, by rule; one entry each), the name of another corpus of the
    suite that tells it apart (``others``: name -> :func:`told_apart_in_record` or :func:`told_apart_in_names`), or
    None: what the whole suite still misses is the Nones. Records name rules, not mutants, so where a rule has several
    mutants (``mutants``: the spec's now) the count is the fewest another corpus must tell apart among those left:
    its told-apart count less the rule's mutants this corpus did not leave."""
    of_rule = Counter((m.module, rule_of(m.name)) for m in mutants)
    count = Counter(left)
    covered = {rule: max(((told[rule] - max(0, of_rule[rule] - n), name) for name, told in others.items()),
                         default=(0, ""))
               for rule, n in count.items()}
    out: list[str | None] = []
    for rule in left:
        many, name = covered[rule]
        out.append(name if many > 0 else None)
        covered[rule] = (many - 1, name)
    return out


def to_judge(record: Record | None, mutants: Sequence[OperatorMutant]) -> list[OperatorMutant]:
    """The ``mutants`` a selection tries: every one, or (``--unjudged``: a ``record``) those it does not judge."""
    return list(mutants) if record is None else unjudged_mutants(record, mutants)


def judged_record(record: Record | None, mutants: Sequence[OperatorMutant], fresh: Sequence[OperatorMutant],
                  selection: Selection, candidates: int) -> Record:
    """The record of a ``selection`` over ``fresh`` (:func:`to_judge`): every mutant's (:func:`record_of`), or
    ``record`` with the fresh ones' outcomes added (:func:`record_with`)."""
    return record_of(mutants, selection, candidates) if record is None else record_with(record, mutants, fresh,
                                                                                       selection)


def rules(mutants: Sequence[OperatorMutant]) -> list[list[str]]:
    """``[module, rule]`` of each mutant, in order: what a record must have judged to be current."""
    return [[m.module, rule_of(m.name)] for m in mutants]


@dataclass(frozen=True)
class Elsewhere:
    """What the other corpora of a suite tell apart (name -> :func:`told_apart_in_record`), and the spec's mutants now
    (for rules with several mutants: :func:`told_apart_elsewhere`)."""

    others: Mapping[str, Counter[Rule]]
    mutants: Sequence[OperatorMutant]


ELSEWHERE: Final = "elsewhere"
"""A survivor the suite tells apart all the same: another corpus tells it apart (:func:`told_apart_elsewhere`, the
``elsewhere`` of :func:`figures`), or a hand judgement names the case that does."""


def figures(modules: Sequence[str], judged_by_hand: Mapping[str, tuple[str, str]], record: Record,
            elsewhere: Elsewhere | None = None) -> tuple[str, list[str]]:
    """A selection's figure line, and its per-module table with the survivors listed by judgement
    (``judged_by_hand``: ``module.function: operator`` prefix -> (equivalent | unreachable | gap | elsewhere, why)).
    ``elsewhere`` (what the suite's other corpora tell apart, and the spec's mutants now: :func:`told_apart_elsewhere`)
    comes before any hand judgement: a survivor another corpus tells apart is no equivalent; the table gets its column."""
    per_module: dict[str, Counter[str]] = {m: Counter() for m in modules}
    judged: Counter[str] = Counter()
    survivors: dict[str, list[str]] = {}
    timed_out: list[str] = []
    left = [(e["module"], e["rule"]) for e in record["mutants"] if e["outcome"] == "survivor"]
    other = iter(told_apart_elsewhere(left, elsewhere.mutants, elsewhere.others) if elsewhere else [None] * len(left))
    for entry in record["mutants"]:
        counts, rule, outcome = per_module[entry["module"]], entry["rule"], entry["outcome"]
        counts["mutants"] += 1
        counts[outcome] += 1
        if outcome == "survivor":
            corpus = next(other)
            verdict = ((ELSEWHERE, f"told apart by the {corpus}") if corpus is not None else
                       next((v for pattern, v in judged_by_hand.items() if rule.startswith(pattern)),
                            ("gap", "not yet judged")))
            judged[verdict[0]] += 1
            counts[verdict[0]] += 1
            survivors.setdefault(f"{verdict[0]}: {verdict[1]}", []).append(rule)
        elif outcome == "timed out":
            timed_out.append(rule)
    total = sum(per_module.values(), Counter())
    told, broken, equivalent = total[TOLD_APART], total["broken"], judged["equivalent"]
    figure = (f"Told apart / (mutants - broken - equivalent): {told} / ({total['mutants']} - {broken} - {equivalent}) "
              f"= {told / max(1, total['mutants'] - broken - equivalent):.1%}.")
    if elsewhere is not None:
        figure += (f" With the survivors the suite tells apart elsewhere ({judged[ELSEWHERE]}): "
                   f"{told + judged[ELSEWHERE]} / {total['mutants'] - broken - equivalent} = "
                   f"{(told + judged[ELSEWHERE]) / max(1, total['mutants'] - broken - equivalent):.1%}.")
    if timed_out:
        figure += (f" {len(timed_out)} mutants ran past the time limit twice on every walk that did not tell them "
                   "apart (not counted as told apart: load fakes a hang): " +
                   ", ".join(f"`{r}`" for r in sorted(timed_out)) + ".")
    columns = ["equivalent", "unreachable", "gap"] + ([ELSEWHERE] if elsewhere is not None else [])
    lines = [
        "| module | mutants | told apart | broken | survivors | " + " | ".join(
            "told apart elsewhere" if c == ELSEWHERE else c for c in columns) + " |",
        "|---|---|---|---|---|" + "---|" * len(columns),
    ]
    for module, c in per_module.items():
        lines.append(f"| {module} | {c['mutants']} | {c[TOLD_APART]} | {c['broken']} | {c['survivor']} | "
                     + " | ".join(str(c[column]) for column in columns) + " |")
    lines += ["", "## Survivors, by judgement", ""]
    for heading, names in sorted(survivors.items()):
        lines += [f"### {heading} ({len(names)})", ""] + [f"- `{n}`" for n in sorted(names)] + [""]
    return figure, lines


def corpus_report(heading: str, intro: str, modules: Sequence[str], judged_by_hand: Mapping[str, tuple[str, str]],
                  record: Record, elsewhere: Elsewhere | None = None) -> str:
    """A corpus's generated report: ``heading``, ``intro`` (how it was generated), its figure and its per-module
    table with the survivors by judgement (:func:`figures`)."""
    figure, table = figures(modules, judged_by_hand, record, elsewhere)
    return "\n".join([heading, "", intro, "", figure, "", *table]).rstrip() + "\n"


@dataclass(frozen=True)
class CorpusFiles:
    """Where a corpus is written: its vector file, the record of its selection and its report."""

    vectors: Path
    record: Path
    report: Path


def stale(files: CorpusFiles, mutants: Sequence[OperatorMutant], render: Callable[[Record], str]) -> list[str]:
    """What is stale, each with how to bring it up to date ([] when nothing is)."""
    if not files.record.exists():
        return [f"{files.record} is missing: select again"]
    record = json.loads(files.record.read_text())
    problems = []
    if [[e["module"], e["rule"]] for e in record["mutants"]] != rules(mutants):
        problems.append(f"{files.record} judged other mutants than the spec's now: select again")
    if json.loads(files.vectors.read_text())["numberOfTests"] != record["kept"]:
        problems.append(f"{files.vectors} is not the selection {files.record} records: select again")
    if not files.report.exists() or files.report.read_text() != render(record):
        problems.append(f"{files.report} is not the report of {files.record}: rewrite it with --report")
    return problems


def write_corpus(command: str, doc: str, files: CorpusFiles, select: Callable[[], tuple[dict[str, Any], Record]],
                 mutants: Callable[[], Sequence[OperatorMutant]], render: Callable[[Record], str],
                 argv: Sequence[str] | None,
                 select_unjudged: Callable[[Record], tuple[dict[str, Any], Record]] | None = None) -> int:
    """A generator's command line: run the selection (minutes: under nice) and write the corpus, the record and the
    report; ``--report``: rewrite the report from the record; ``--check``: exit 1 when any of the three is stale
    (:func:`stale`: no selection runs); ``--unjudged`` (a corpus with ``select_unjudged``): select for only the mutants
    the record does not judge (a new family's), carrying every walk it kept, and add their outcomes to it."""
    parser = argparse.ArgumentParser(prog=f"python -m {command}", description=doc.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true",
                        help="exit 1 if the record judged other mutants than the spec's, or the corpus or report is "
                             "not the record's")
    action.add_argument("--report", action="store_true", help="rewrite the report from the recorded selection")
    if select_unjudged is not None:
        action.add_argument("--unjudged", action="store_true",
                            help="select for only the mutants the record does not judge, carrying its walks")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale(files, mutants(), render)
        for problem in problems:
            print(f"{problem} (python -m {command})", file=sys.stderr)
        return 1 if problems else 0
    if not args.report:
        started = time.monotonic()
        if select_unjudged is not None and args.unjudged:
            document, record = select_unjudged(json.loads(files.record.read_text()))
        else:
            document, record = select()
        print(f"selection took {time.monotonic() - started:.0f} s", file=sys.stderr)
        files.vectors.write_text(vectorgen.render(document))
        files.record.parent.mkdir(parents=True, exist_ok=True)
        files.record.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {files.vectors} ({document['numberOfTests']} tests) and {files.record}")
    files.report.write_text(render(json.loads(files.record.read_text())))
    print(f"wrote {files.report}")
    return 0
