"""Every conformance case and vector file links to a section of the generated specification that exists."""

from __future__ import annotations

from pathlib import Path

from conformance.framework import Case, Level, Verdict
from conformance.runner import SUITES, load_suite
from conformance.spec_links import anchors, broken_links, link_problem, spec_ref, vector_files, vector_ref


def test_every_case_and_vector_links_to_an_existing_section() -> None:
    problems = broken_links((name, load_suite(name).cases) for name in SUITES)
    assert problems == [], "\n".join(problems)
    assert len(vector_files()) >= 6 and all(vector_ref(p) for p in vector_files())


def test_a_case_without_a_section_is_named_in_the_failure() -> None:
    def check(target: object, ctx: object) -> Verdict:
        return Verdict(True, "", "")

    orphan = Case("nosuch/topic-case", Level.MUST, "server", "x", check)
    wrong = Case("probe/x", Level.MUST, "server", "x", check, spec_ref="docs/spec/sync.md#no-such-anchor")
    hint = "(set Case.spec_ref, or list its topic in conformance/spec_links.py CASE_SECTIONS['sync'])"
    assert [line for line in broken_links([("sync", [orphan, wrong])]) if line.startswith("sync case")] == [
        f"sync case nosuch/topic-case: no specRef {hint}",
        f"sync case probe/x: specRef docs/spec/sync.md#no-such-anchor: docs/spec/sync.md has no anchor "
        f"#no-such-anchor {hint}",
    ]
    assert spec_ref("sync", wrong) == "docs/spec/sync.md#no-such-anchor"  # a case's own ref wins


def test_the_longest_prefix_wins_and_anchors_are_read_from_the_document(tmp_path: Path) -> None:
    def check(target: object, ctx: object) -> Verdict:
        return Verdict(True, "", "")

    assert spec_ref("sync", Case("replay/duplicate-in-one-flush", Level.MUST, "server", "x", check)) == \
        "docs/spec/sync.md#application"
    assert spec_ref("sync", Case("replay/idempotent-after-restart", Level.MUST, "server", "x", check)) == \
        "docs/spec/sync.md#restart"
    document = tmp_path / "d.md"
    document.write_text('<a id="one"></a>\n## Two words\n')
    assert anchors(document) == {"one", "two-words"}
    assert link_problem(None) == "no specRef"
