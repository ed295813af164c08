"""A run's results: one :class:`CaseReport` per case, and the :class:`RunReport` that groups them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Final, Mapping, Sequence

from conformance.framework import Blame, Case, Level, CaseOutcome, Wait
from conformance.report.wirelog import WireFrame

FAILED_OUTCOMES: Final = frozenset({CaseOutcome.FAIL, CaseOutcome.TIMEOUT, CaseOutcome.NON_STRICT})
"""Outcomes that say the implementation did not do what a case requires (at the case's level)."""
HEADLINE_CHARS: Final = 400
IMPL_TO_PEER: Final = "impl->peer"


@dataclass(frozen=True, slots=True)
class CaseReport:
    """How one case ended: outcome, expected vs actual, what was awaited, the decoded wire log."""

    case: Case
    outcome: CaseOutcome
    expected: str
    actual: str
    duration_ms: float
    wire: Sequence[WireFrame] = ()
    waits: Sequence[Wait] = ()
    blames: Sequence[Blame] = ()

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED_OUTCOMES

    def wire_problems(self) -> list[str]:
        """Frames from the implementation that the decoder found wrong (a checksum that is not CRC32C,
        a body that does not decode); the peer's deliberate faults are not listed."""
        return [f"{f.label}: {f.problem}" for f in self.wire
                if f.problem and f.direction == IMPL_TO_PEER]

    def headline(self) -> str:
        """The failure in one line: what was awaited and what came, or else expected vs actual."""
        text = f"expected {self.expected}; actual {self.actual}"
        if self.waits:
            text = f"{self.waits[0]} (expected {self.expected})"
        text = " ".join(text.split())
        return text if len(text) <= HEADLINE_CHARS else text[:HEADLINE_CHARS - 1] + "…"


@dataclass(frozen=True)
class RunReport:
    """Every case of one run against one target, failures grouped by root cause."""

    suite: str
    target: str
    cases: Sequence[CaseReport]
    root_of: Mapping[str, str] = field(default_factory=dict)
    """A failed case that follows from an earlier failure -> that root failure's case id."""

    def dependents(self, case_id: str) -> list[CaseReport]:
        return [r for r in self.cases if self.root_of.get(r.case.id) == case_id]

    def roots(self) -> list[CaseReport]:
        """Failed cases that do not follow from another failure, in run order."""
        return [r for r in self.cases if r.failed and r.case.id not in self.root_of]

    def summary(self) -> dict[str, int]:
        counts = Counter(r.outcome for r in self.cases)
        return {o.value: counts.get(o, 0) for o in CaseOutcome} | {"total": len(self.cases)}

    def by_topic_and_level(self) -> dict[tuple[str, Level], Counter[CaseOutcome]]:
        """CaseOutcome counts per (topic, level), in catalogue order."""
        out: dict[tuple[str, Level], Counter[CaseOutcome]] = {}
        for r in self.cases:
            out.setdefault((r.case.topic, r.case.level), Counter())[r.outcome] += 1
        return out
