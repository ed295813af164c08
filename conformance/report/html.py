"""The HTML report: one self-contained file (inline style and script, nothing fetched), in the manner
of Autobahn|Testsuite's reports.

At the top the root causes (each with its dependent cases) and the outcome counts per topic and
level; then every case with its requirement, expected vs actual, what was awaited, and its wire log
as a two-column timeline: the peer's frames on the left, the implementation's on the right, one row
per frame in the order the frames completed (open for a failed case). A checkbox hides the cases
that passed.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Final

from conformance.framework import CaseOutcome
from conformance.report.cases import IMPL_TO_PEER, CaseReport, RunReport
from conformance.report.wirelog import WireFrame
from conformance.spec_links import spec_ref

HEX_BYTES_SHOWN: Final = 96
"""Bytes of a frame's hex shown in the timeline (the JSON report holds every byte)."""

STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}h3{font-size:1em;margin:.2em 0}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top;text-align:left}
.badge{display:inline-block;min-width:7em;padding:0 4px;border-radius:3px;color:#fff;font-weight:600}
.PASS{background:#2e7d32}.INFO{background:#546e7a}.NON_STRICT{background:#ef6c00}.FAIL{background:#c62828}
.TIMEOUT{background:#6a1b9a}.UNSUPPORTED{background:#9e9e9e}
.case{border:1px solid #ddd;border-radius:4px;padding:.5em .8em;margin:.6em 0}
.case dl{display:grid;grid-template-columns:8em 1fr;margin:.4em 0}.case dt{font-weight:600}.case dd{margin:0}
.timeline td.frame{width:45%}.timeline code{display:block;word-break:break-all;color:#555;font-size:12px}
.problem{color:#c62828;font-weight:600}.num{text-align:right}
body.only-failed .case.passed{display:none}
"""

SCRIPT: Final = """
const toggle = document.getElementById('only-failed');
toggle.addEventListener('change', () => document.body.classList.toggle('only-failed', toggle.checked));
document.body.dataset.cases = document.querySelectorAll('article.case').length;
document.body.dataset.failed = document.querySelectorAll('article.case.failed').length;
"""


def anchor(case_id: str) -> str:
    """The element id of a case's section."""
    return "case-" + re.sub(r"[^A-Za-z0-9_-]+", "-", case_id)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _summary_table(run: RunReport) -> str:
    outcomes = list(CaseOutcome)
    head = "".join(f"<th>{o.value}</th>" for o in outcomes)
    rows = []
    for (topic, level), counts in run.by_topic_and_level().items():
        cells = "".join(f'<td class="num">{counts.get(o, 0) or ""}</td>' for o in outcomes)
        rows.append(f"<tr><td>{_e(topic)}</td><td>{level.value}</td>{cells}</tr>")
    return f'<table class="summary"><tr><th>topic</th><th>level</th>{head}</tr>{"".join(rows)}</table>'


def _root_causes(run: RunReport) -> str:
    roots = run.roots()
    if not roots:
        return "<p>No failures.</p>"
    items = []
    for r in roots:
        dependents = run.dependents(r.case.id)
        links = ", ".join(f'<a href="#{anchor(d.case.id)}">{_e(d.case.id)}</a>' for d in dependents)
        items.append(f'<li><span class="badge {r.outcome.value}">{r.outcome.value}</span> '
                     f'<a href="#{anchor(r.case.id)}">{_e(r.case.id)}</a>: {_e(r.headline())}'
                     f"<br>{len(dependents)} dependent case{'' if len(dependents) == 1 else 's'}"
                     f"{': ' + links if links else ''}</li>")
    return f'<ul class="root-causes">{"".join(items)}</ul>'


def _frame_cell(frame: WireFrame) -> str:
    raw = frame.hex[:HEX_BYTES_SHOWN * 2]
    more = len(frame.hex) // 2 - HEX_BYTES_SHOWN
    problem = f'<div class="problem">{_e(frame.problem)}</div>' if frame.problem else ""
    return (f'<td class="frame"><div>{_e(frame.label)}</div>{problem}'
            f"<code>{raw}{f' … {more} more bytes' if more > 0 else ''}</code></td>")


def _timeline(report: CaseReport) -> str:
    if not report.wire:
        return ""
    rows = []
    for frame in report.wire:
        cell, empty = _frame_cell(frame), "<td></td>"
        left, right = (empty, cell) if frame.direction == IMPL_TO_PEER else (cell, empty)
        rows.append(f'<tr><td class="num">{frame.t_ms:.1f}</td>{left}{right}</tr>')
    shown = " open" if report.failed else ""
    return (f"<details{shown}><summary>wire log: {len(report.wire)} frames</summary>"
            '<table class="timeline"><tr><th>t (ms)</th><th>peer → implementation</th>'
            f'<th>implementation → peer</th></tr>{"".join(rows)}</table></details>')


def _case(run: RunReport, r: CaseReport) -> str:
    state = "failed" if r.failed else "passed"
    facts = [("requirement", _e(r.case.requirement)), ("expected", _e(r.expected)), ("actual", _e(r.actual))]
    facts += [("awaited", _e(w)) for w in r.waits]
    ref = spec_ref(run.suite, r.case)
    if ref:
        facts.append(("specification", f"<code>{_e(ref)}</code>"))
    root = run.root_of.get(r.case.id)
    if root is not None:
        facts.append(("root cause", f'<a href="#{anchor(root)}">{_e(root)}</a>'))
    dependents = run.dependents(r.case.id)
    if dependents:
        facts.append(("dependents", ", ".join(f'<a href="#{anchor(d.case.id)}">{_e(d.case.id)}</a>'
                                              for d in dependents)))
    rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    return (f'<article class="case {state}" id="{anchor(r.case.id)}" data-outcome="{r.outcome.value}">'
            f'<h3><span class="badge {r.outcome.value}">{r.outcome.value}</span> {_e(r.case.id)} '
            f"[{r.case.level.value}, {_e(r.case.role)}] <small>{r.duration_ms:.0f} ms</small></h3>"
            f"<dl>{rows}</dl>{_timeline(r)}</article>")


def render(run: RunReport) -> str:
    title = f"{run.suite} conformance against {run.target}"
    counts = " ".join(f"{k}={v}" for k, v in run.summary().items())
    cases = "".join(_case(run, r) for r in run.cases)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head><body><h1>{_e(title)}</h1>"
            f'<p class="counts">{counts}</p>'
            f'<section id="root-causes"><h2>Root causes</h2>{_root_causes(run)}</section>'
            f'<section id="summary"><h2>Outcomes by topic and level</h2>{_summary_table(run)}</section>'
            f'<section id="cases"><h2>Cases</h2><label><input type="checkbox" id="only-failed"> '
            f"only failures</label>{cases}</section><script>{SCRIPT}</script></body></html>\n")


def write_html(path: Path, run: RunReport) -> None:
    path.write_text(render(run), encoding="utf-8")
