"""Grouping failures by root cause.

While a case runs, the peer blames the implementation for each requirement it saw broken, naming
the case that judges it (:class:`~conformance.framework.Blame`). A failed case whose first blame
names another failed case follows from that failure: a writer that computes CRC32 instead of
CRC32C fails nearly every writer case, but only ``checksum/writer-crc32c`` is the fault. Chains are
followed to their root; a case blaming one that passed or did not run stands on its own. Failed
cases that follow from no other failure but failed with the identical ``actual`` text share one cause.
"""

from __future__ import annotations

from typing import Sequence

from conformance.report.cases import CaseReport


def root_causes(reports: Sequence[CaseReport]) -> dict[str, str]:
    """For each failed case that follows from another failure: its id -> the root failure's id."""
    failed = {r.case.id for r in reports if r.failed}
    parent = {}
    for report in reports:
        if report.failed and report.blames and report.blames[0].case_id in failed - {report.case.id}:
            parent[report.case.id] = report.blames[0].case_id
    roots: dict[str, str] = {}
    for case_id in parent:
        seen = {case_id}
        root = parent[case_id]
        while root in parent and parent[root] not in seen:
            seen.add(root)
            root = parent[root]
        if root in parent:  # cases blaming each other in a cycle each stand on their own
            continue
        roots[case_id] = root
    _group_identical(reports, roots)
    return roots


def _group_identical(reports: Sequence[CaseReport], roots: dict[str, str]) -> None:
    """Failed cases that follow from no other failure but failed the same way (the same ``actual``, for
    example a refused connection) share one cause: the first of them in run order is the root, the rest
    depend on it, along with whatever depended on them."""
    first_with: dict[str, str] = {}
    for report in reports:
        if report.failed and report.case.id not in roots:
            first = first_with.setdefault(" ".join(report.actual.split()), report.case.id)
            if first != report.case.id:
                roots[report.case.id] = first
    for case_id, root in roots.items():
        roots[case_id] = roots.get(root, root)
