"""The run's console summary, JSON report and JUnit XML, each showing failures under their root cause."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import TextIO

from conformance.framework import CaseOutcome
from conformance.report.cases import CaseReport, RunReport
from conformance.spec_links import spec_ref


def case_json(run: RunReport, r: CaseReport) -> dict[str, object]:
    return {
        "id": r.case.id, "level": r.case.level.value, "role": r.case.role, "outcome": r.outcome.value,
        "requirement": r.case.requirement, "spec_ref": spec_ref(run.suite, r.case), "expected": r.expected, "actual": r.actual,
        "awaited": [str(w) for w in r.waits], "root_cause": run.root_of.get(r.case.id),
        "dependents": [d.case.id for d in run.dependents(r.case.id)],
        "duration_ms": round(r.duration_ms, 3), "wirelog": [f.to_json() for f in r.wire],
    }


def write_json(path: Path, run: RunReport) -> None:
    document = {
        "suite": run.suite, "target": run.target, "cases": [case_json(run, r) for r in run.cases],
        "root_causes": [{"case": r.case.id, "outcome": r.outcome.value, "message": r.headline(),
                         "dependents": [d.case.id for d in run.dependents(r.case.id)]} for r in run.roots()],
        "summary": run.summary(),
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


def junit_message(run: RunReport, r: CaseReport) -> str:
    """The one-line failure message: the root cause for a dependent case, else what was expected and seen."""
    root = run.root_of.get(r.case.id)
    if root is not None:
        return f"follows from {root} (root cause); {r.headline()}"
    dependents = run.dependents(r.case.id)
    suffix = f" [root cause of {len(dependents)} dependent cases]" if dependents else ""
    return r.headline() + suffix


def write_junit(path: Path, run: RunReport) -> None:
    """JUnit XML, one testsuite per topic; a failure's ``message`` is one line (:func:`junit_message`)."""
    root = ET.Element("testsuites", name=f"conformance-{run.suite}")
    by_topic: dict[str, list[CaseReport]] = defaultdict(list)
    for report in run.cases:
        by_topic[report.case.topic].append(report)
    for topic, members in by_topic.items():
        failures = sum(r.outcome in (CaseOutcome.FAIL, CaseOutcome.TIMEOUT) for r in members)
        skipped = sum(r.outcome is CaseOutcome.UNSUPPORTED for r in members)
        node = ET.SubElement(root, "testsuite", name=topic, tests=str(len(members)),
                             failures=str(failures), skipped=str(skipped),
                             time=f"{sum(r.duration_ms for r in members) / 1000:.3f}")
        for r in members:
            case = ET.SubElement(node, "testcase", classname=topic, name=r.case.id,
                                 time=f"{r.duration_ms / 1000:.3f}")
            detail = "\n".join([f"[{r.case.level.value}] {r.case.requirement}", f"expected: {r.expected}",
                                f"actual: {r.actual}", *map(str, r.waits)])
            if r.outcome in (CaseOutcome.FAIL, CaseOutcome.TIMEOUT):
                ET.SubElement(case, "failure", message=junit_message(run, r), type=r.outcome.value).text = detail
            elif r.outcome is CaseOutcome.UNSUPPORTED:
                ET.SubElement(case, "skipped", message=r.actual)
            else:
                ET.SubElement(case, "system-out").text = f"{r.outcome.value}\n{detail}"
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def print_summary(out: TextIO, run: RunReport) -> None:
    """Human summary, printed last so it is what a terminal shows at the end: each root failure with
    its dependents under it, then one line per root cause, then the counts."""
    out.write(f"\n== {run.suite} conformance against {run.target} ==\n")
    unobserved = [r for r in run.cases if r.outcome is CaseOutcome.UNSUPPORTED]
    if unobserved:
        out.write(f"rules the target's capabilities leave unobserved ({len(unobserved)}):\n")
    for r in unobserved:
        out.write(f"{r.outcome.value:<11} {r.case.id}: {r.actual}\n            rule: {r.case.requirement}\n")
    roots = run.roots()
    for r in roots:
        out.write(f"{r.outcome.value:<11} {r.case.id} [{r.case.level.value}] {r.case.requirement}\n"
                  f"            expected: {r.expected}\n            actual:   {r.actual}\n")
        for wait in r.waits:
            out.write(f"            {wait}\n")
        for problem in r.wire_problems()[:1]:
            out.write(f"            on the wire: {problem}\n")
        for d in run.dependents(r.case.id):
            out.write(f"    follows: {d.outcome.value:<11} {d.case.id}: {d.headline()}\n")
    for r in roots:
        count = len(run.dependents(r.case.id))
        out.write(f"root cause: {r.case.id}; {count} dependent case{'' if count == 1 else 's'}\n")
    out.write(" ".join(f"{k}={v}" for k, v in run.summary().items()) + "\n")
