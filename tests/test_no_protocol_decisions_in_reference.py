"""No protocol decision in the runtime (reference/): the endpoints and machines in spec/ decide.

The runtime may read its clock, hand ``now`` to an endpoint and sleep until the deadline it
returns (``deadline - now`` is honouring a deadline, not deciding one), and pass a timeout to a
primitive (``lock.acquire(timeout=...)``).  It may not compare times, match an error's text or
decide a retry (a backoff, a count of tries, a jitter): each is a line these rules find, so a
decision that creeps back into the runtime fails here.  Each rule is checked against lines the
runtime had before its endpoints existed, so a rule that matches nothing cannot pass unseen.

reference/sync has no exception.  Elsewhere the lines the rules find were each reviewed and are
listed in ``REVIEWED`` with the reason they decide nothing a peer sees; a new one fails here until
it moves to spec/ or is reviewed, and a reviewed line that went away must leave the list.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCOPE = ROOT / "reference"

TIME = r"(?:\bnow\b|deadline|monotonic\(\)|\.time\(\)|clock|\bstarted\b|elapsed|retry_at|last_put|insertion_time|_s\b|timeout)"
COMPARISON = r"(?:[^=!<>]=?[<>]=?[^=<>]|==|!=)"
ERROR = r"(?:\b(?:e|exc|err|error)\b|\.message\b)"

RULES: dict[str, re.Pattern[str]] = {
    "a time compared": re.compile(rf"(?:{TIME}[^#\n]*?\s(?:<=?|>=?)\s)|(?:\s(?:<=?|>=?)\s[^#\n]*?{TIME})"),
    "an error's text matched": re.compile(
        rf"(?:\b(?:str|repr)\({ERROR}\)|{ERROR})\s*(?:==|!=|\.startswith|\.endswith|\.find|\.index)"
        rf"|\bin\s+(?:str|repr)\({ERROR}\)|re\.(?:search|match|fullmatch|findall)\([^)]*{ERROR}|condition_in\("),
    "a retry decided": re.compile(
        r"\bBackoff\(|\bFlushFailures\(|\bafter_failure\(|\*\*\s*\(?\s*\w*(?:tries|attempt|failures|retries)"
        r"|for\s+\w+\s+in\s+range\([^)]*(?:tries|attempt|retries)|\bmax_retries\b|\.random\(\)\s*\*"),
}
"""What the runtime may not do, line by line (comments and docstrings aside)."""

ALLOWED_SETTING_SWITCHES = re.compile(r"\b\w+_s\s*>\s*0\b")
"""A setting of 0 that switches a task off (``maintenance_interval_s > 0``) compares no time."""

BEFORE = {
    "a time compared": [
        "            if not put.done() and now >= min(stream.deadline, self._stop_deadline) and call.end():",
        "            if time.monotonic() > deadline:",
        "        if tx is None or now - tx.last_put < self.settings.transaction_timeout_s:",
    ],
    "an error's text matched": [
        '            if "RESOURCE_EXHAUSTED" in str(error):',
        "        condition = condition_in(text)",
        "        if exc.message.startswith(\"Concurrent RPC limit\"):",
    ],
    "a retry decided": [
        "        backoff = Backoff(self.backoff_initial_s, self.backoff_max_s, started + self.deadline_s)",
        "                then = after_failure(fault, str(error))",
        "        wait = min(self.initial_backoff_s * 2 ** (failures - 1), self.max_backoff_s)",
        "        self._failures = flush_failures or FlushFailures()",
    ],
}
"""Lines reference/sync held before its decisions moved to spec/sync (or would, were they back)."""


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of ``path`` that are code: comments and docstrings (and other string-only lines) left out."""
    lines: list[tuple[int, str]] = []
    in_docstring = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        quotes = stripped.count('"""')
        if in_docstring:
            in_docstring = quotes % 2 == 0
            continue
        if stripped.startswith('"""'):
            in_docstring = quotes == 1
            continue
        code = line.split("  #", 1)[0]
        if stripped.startswith("#") or not code.strip():
            continue
        lines.append((number, code))
    return lines


def offences(line: str) -> list[str]:
    """The rules ``line`` breaks."""
    return [rule for rule, pattern in RULES.items()
            if pattern.search(line) and not (rule == "a time compared" and ALLOWED_SETTING_SWITCHES.search(line))]


@pytest.mark.parametrize("rule", sorted(BEFORE))
def test_each_rule_finds_the_decisions_the_runtime_made_before(rule: str) -> None:
    for line in BEFORE[rule]:
        assert rule in offences(line), line


def test_the_runtime_may_honour_deadlines_and_pass_timeouts() -> None:
    for line in (
        "        self._event.wait(max(0.0, deadline - self._clock.now()))",
        "        if not self._lock.acquire(timeout=self._endpoint.settings.write_lock_timeout_s):",
        "            ending = None if put.done() else stream.ending(self._loop.time(), self._stop_deadline)",
        "        if maintenance_interval_s > 0:",
        "            wait = tries.wait(self._clock.now(), _JITTER.random())",
    ):
        assert offences(line) == [], line


HONOURS_DEADLINE = "a driver calls its machine's tick once the machine's own deadline has come"
PACING = "how often the runtime looks (a lookup, a probe, a progress line), not what it answers a peer"
LOCAL_WAIT = "a bounded wait for this process's own setup or Spark's scheduling, ending in a typed error; no peer sees it"
REVIEWED: dict[str, dict[str, str]] = {
    "reference/shuffle/reader_task.py": {
        "if self._deadline is not None and now >= self._deadline:": HONOURS_DEADLINE,
        "if discovering and now - self._last_lookup >= coordination.POLL_INTERVAL_S:": PACING,
    },
    "reference/shuffle/writer_task.py": {"if self._deadline is not None and now >= self._deadline:": HONOURS_DEADLINE},
    "reference/shuffle/task.py": {"if now - self._last_failure_poll < FAILURE_POLL_S:": PACING},
    "reference/cluster/service.py": {"if asked > self._silence_judged or now - self._silence_checked >= POLL_S:": PACING},
    "reference/pipeline/postgres.py": {
        "if time.monotonic() - asked < IDLE_S:": PACING,
        "if time.monotonic() > deadline:": LOCAL_WAIT,
    },
    "reference/pipeline/sink.py": {
        "if not force and now - self._last_progress < self.config.progress_interval_s:": PACING,
        "if time.monotonic() > deadline:": LOCAL_WAIT,
    },
    "reference/shuffle/cluster_directory.py": {
        "if failure is not None or time.monotonic() >= deadline:": LOCAL_WAIT,
        "elif time.monotonic() >= deadline:": LOCAL_WAIT,
    },
    "reference/cdc/source.py": {"if time.monotonic() > deadline:": LOCAL_WAIT},
    "reference/spark/exchange.py": {"if time.monotonic() > deadline:": LOCAL_WAIT},
    "reference/spark/runs.py": {"if time.monotonic() > deadline:": LOCAL_WAIT},
    "reference/net/reactor.py": {
        "if (self.max_pending < 1 or self.bind_timeout_s <= 0 or self.receive_buffer < 1":
            "a setting's validation at construction",
        "or self.linger_bytes < 0 or self.linger_s <= 0):": "a setting's validation at construction",
    },
    "reference/pipeline/source.py": {
        "if rate > 0 and (ahead := emitted / rate - (time.monotonic() - started)) > 0:":
            "the demo workload's offered rate, not a protocol",
    },
    "reference/cluster/remote.py": {
        "def __init__(self, url: str, timeout: float = 5.0, backoff: Backoff = Backoff(),":
            "spec/cluster's Backoff handed to the session machine as a default, not a policy of its own",
    },
    "reference/shuffle/attempt_launches.py": {
        'for attempt in range(self._launched + 1, int(attempts_record(entry)["next"])):':
            "Spark's task attempt numbers being launched, not a retry",
    },
}
"""Lines outside reference/sync that the rules find, each reviewed: why it decides nothing a peer sees."""


def _found() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(SCOPE.rglob("*.py")):
        for _, line in _code_lines(path):
            if offences(line):
                found.setdefault(str(path.relative_to(ROOT)), set()).add(line.strip())
    return found


def test_no_file_of_the_runtime_decides_a_protocol_outcome() -> None:
    unreviewed = [f"{path}: {line}" for path, lines in _found().items()
                  for line in sorted(lines - REVIEWED.get(path, {}).keys())]
    assert unreviewed == [], "\n".join(unreviewed)
    assert not any(path.startswith("reference/sync/") for path in REVIEWED), "reference/sync has no exception"


def test_every_reviewed_line_is_still_there() -> None:
    found = _found()
    gone = [f"{path}: {line}" for path, lines in REVIEWED.items() for line in lines if line not in found.get(path, set())]
    assert gone == [], "reviewed lines that left the runtime leave REVIEWED too:\n" + "\n".join(gone)
