"""The nemesis's workload keeps a transaction whose COMMIT got no answer (Postgres crashed) in its history when
Postgres says it committed: seed 9 of the Spark run saw such a value in Delta and Postgres, and the checker,
told it never committed, failed a pipeline that was right."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from benchmarks.nemesis import Workload


@dataclass
class _Result:
    rows: list[list[str]]


class _Session:
    """Answers what the workload asks; its COMMIT fails as a crash would, after Postgres committed."""

    def __init__(self, crash_at_commit: bool, status: str) -> None:
        self.crash_at_commit, self.status = crash_at_commit, status

    def query(self, sql: str) -> _Result:
        if sql == "COMMIT" and self.crash_at_commit:
            raise ConnectionError("server closed the connection unexpectedly")
        if sql.startswith("SELECT txid_current"):
            return _Result([["700"]])
        if sql.startswith("SELECT txid_status(700)"):
            return _Result([[self.status]])
        if sql.startswith("SELECT pg_current_wal_insert_lsn"):
            return _Result([["0/100"]])
        return _Result([])


class _Server:
    def __init__(self, sessions: list[_Session]) -> None:
        self.sessions = sessions

    def connect(self) -> Any:
        return self.sessions.pop(0)


def _workload(status: str) -> Workload:
    workload = Workload(_Server([_Session(True, status), _Session(False, status)]),  # type: ignore[arg-type]
                        random.Random(3), rate=1000.0, start=0.0)
    workload.rng = random.Random(0)  # the first draw commits
    conn = workload.server.connect()
    try:
        workload._one(conn, 0)
    except ConnectionError:
        pass
    workload._resolve(workload.server.connect())
    return workload


def test_a_commit_without_an_answer_that_committed_joins_the_history() -> None:
    workload = _workload("committed")
    assert [(tx["committed"], tx.get("in_doubt")) for tx in workload.transactions] == [(True, True)]
    assert workload.transactions[0]["lsn_after"] == 0x100


def test_a_commit_without_an_answer_that_aborted_does_not() -> None:
    assert _workload("aborted").transactions == []
