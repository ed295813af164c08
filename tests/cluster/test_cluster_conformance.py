"""Both backends (and the TCP service) pass the cluster conformance suite through the runner."""

from __future__ import annotations

import json
import shutil
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

from conformance.cluster import timeout_edges
from conformance.cluster.clock import DetectorClock
from conformance.cluster.controls import Controls
from conformance.cluster.etcd_server import etcd_binary
from conformance.framework import CaseOutcome, RunOptions
from conformance.runner import load_suite, run_case
from reference.cluster.memory import DEFAULT_POLICY, InProcessCluster

SUITE = load_suite("cluster")
MEMORY, HARNESS = "memory", f"exec:{sys.executable} -m conformance.cluster.reference_target"
ETCD_TEST = "test_etcd_backend_passes_every_case_but_the_clock_and_the_service_wire"
TARGET_OF_TEST = {"test_in_process_backend_passes_every_case_but_the_service_wire": MEMORY,
                  "test_cluster_service_over_tcp_passes_every_case_through_its_harness": HARNESS}
"""The whole-suite runs besides etcd's (one per parameter of ETCD_TEST), by the test that reads each."""


def run(target: str) -> dict[str, CaseOutcome]:
    options = RunOptions(suite="cluster", target=target, timeout=30.0)
    with SUITE.open_target(options) as opened:
        reports = [run_case(case, opened, options) for case in SUITE.cases]
    failed = {r.case.id: r.actual for r in reports if r.outcome in (CaseOutcome.FAIL, CaseOutcome.TIMEOUT)}
    assert not failed, "\n".join(f"{case}: {actual}" for case, actual in failed.items())  # in full: a dict is cut
    return {r.case.id: r.outcome for r in reports}


def needing(*capabilities: str) -> set[str]:
    """The cases that need any of ``capabilities``."""
    return {c.id for c in SUITE.cases if c.requires & set(capabilities)}


def test_suite_has_the_required_breadth() -> None:
    assert len(SUITE.cases) >= 20
    assert len({c.id for c in SUITE.cases}) == len(SUITE.cases)


def test_in_process_backend_passes_every_case_but_the_service_wire(
        runs: dict[str, Future[dict[str, CaseOutcome]]]) -> None:
    outcomes = runs[MEMORY].result()
    assert {c for c, o in outcomes.items() if o is CaseOutcome.UNSUPPORTED} == needing("service")
    assert set(outcomes.values()) == {CaseOutcome.PASS, CaseOutcome.UNSUPPORTED, CaseOutcome.INFO}


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest) -> Iterator[dict[str, Future[dict[str, CaseOutcome]]]]:
    """The runs of the selected targets, all at once: each has its own cluster (the in-process one, the harness's
    service, an etcd of its own) and mostly waits on its clock (leases, heartbeats, failure bounds; an etcd run took
    as long on a machine five times slower), so they wait side by side. Each test reads its own target's run; the
    etcd ones run only where etcd is installed (their tests otherwise skip or fail saying why)."""
    selected: set[str] = set()
    for item in request.session.items:
        if not isinstance(item, pytest.Function):
            continue
        if item.originalname == ETCD_TEST and etcd_binary() is not None:
            selected.add(item.callspec.params["target"])
        elif item.originalname in TARGET_OF_TEST:
            selected.add(TARGET_OF_TEST[item.originalname])
    with ThreadPoolExecutor(max(len(selected), 1), thread_name_prefix="cluster-run") as pool:
        yield {target: pool.submit(run, target) for target in sorted(selected)}


@pytest.mark.etcd
@pytest.mark.parametrize("target", ["etcd", "etcd-auth", "etcd-tls"])
def test_etcd_backend_passes_every_case_but_the_clock_and_the_service_wire(
        etcd_required: None, runs: dict[str, Future[dict[str, CaseOutcome]]], target: str) -> None:
    """Plain, with a user and password, and as deployed: TLS from a CA with client certificates
    plus a user (the CA made by openssl in the run's temporary directory). etcd's leases run on its
    own clock, which the runner cannot stop; nothing carries out the runtime's CAS writer for it."""
    outcomes = runs[target].result()
    assert {c for c, o in outcomes.items() if o is CaseOutcome.UNSUPPORTED} == needing("clock", "service", "cas", "client", "inputs")
    assert set(outcomes.values()) == {CaseOutcome.PASS, CaseOutcome.UNSUPPORTED, CaseOutcome.INFO}


def test_cluster_service_over_tcp_passes_every_case_through_its_harness(
        runs: dict[str, Future[dict[str, CaseOutcome]]]) -> None:
    """The harness embeds the service and offers clock, restart, durable and held on its stdin and
    stdout (conformance/cluster/controls.py): every case runs, and only its wire reaches the service."""
    outcomes = runs[HARNESS].result()
    assert set(outcomes.values()) == {CaseOutcome.PASS, CaseOutcome.INFO}


def test_the_harness_answers_every_control_line_in_one_line(tmp_path: Path) -> None:
    """The contract of conformance/cluster/controls.py, on an in-process cluster: each line one answer,
    a malformed line or a control that fails an ERROR line, never a traceback."""
    clock = DetectorClock()
    cluster = InProcessCluster(data_dir=tmp_path / "journal", clock=clock)
    controls = Controls(cluster, clock)
    try:
        assert controls.answer("CLOCK STOP 0\n") == "CLOCKED 500 1000" and clock.stopped
        assert controls.answer("DURABLE") == "WRITTEN 0" and controls.answer("HELD") == "HOLDING 0"
        assert controls.answer("SESSIONS") == "ERROR ValueError: no cluster service here"
        assert controls.answer("PAUSE n1") == "ERROR ValueError: no cluster service here"
        assert controls.answer("RESUME").startswith("ERROR unknown control line")
        assert controls.answer("RESTART") == "OK"
        assert controls.answer("CLOCK RUN") == "CLOCKED 500 1000" and not clock.stopped
        for line in ("CLOCK STOP -1", "CLOCK", "HELLO", "", "SERVE 1000 2000 4", "SERVE 1000 2000 4 secret"):
            assert controls.answer(line).startswith("ERROR unknown control line")
        assert controls.answer("SERVE 1000 1999 4 -").startswith("REFUSED ValueError: fail_after")
        assert controls.answer("SERVE 1000 2000 4 hex:20").startswith("REFUSED EmptySecret: ")
        assert controls.answer("SERVE 1000 2000 4 hex:73") == f"SERVING {controls.configured and controls.configured.port}"
        assert controls.answer("UNSERVE") == "OK" and controls.configured is None
        assert controls.answer("CAS 1") == f"CAS_WRITTEN 2 {b'r1+w'.hex()}"
        assert controls.answer("CAS 32") == "CAS_KEPT_CHANGING 32" and controls.answer("CAS x").startswith("ERROR")
        assert controls.answer("CAS 0 STALE") == f"CAS_WRITTEN 2 {b'+w'.hex()}"
        assert controls.answer("CAS 31 STALE") == "CAS_KEPT_CHANGING 32"
        assert controls.answer("CAS 0 GONE").startswith("ERROR unknown control line")
        walk = {"settings": {"node": "n1", "secret": "", "timeoutMs": 500, "backoffFirstMs": 50, "backoffLimitMs": 100},
                "steps": [{"at": 0, "tick": True}, {"at": 0, "request": "RENEW"}]}
        ran = controls.answer("CLIENT " + json.dumps(walk))
        assert ran.startswith("CLIENT_RAN ") and json.loads(ran[len("CLIENT_RAN "):])[1] == {
            "raised": "ProviderUnavailable", "deadline": 0.0}
        assert controls.answer("CLIENT").startswith("ERROR ") and controls.answer("CLIENT {").startswith("ERROR ")
        call = {"call": "checkId", "kind": "node", "text": {"repeat": "a", "times": 129}}
        assert controls.answer("INPUTS " + json.dumps(call)) == 'INPUTS_RAN {"raised": "InvalidIdentifier"}'
        assert controls.answer("INPUTS {").startswith("ERROR ") and controls.answer("INPUTS {}").startswith("ERROR ")
        shutil.rmtree(tmp_path / "journal")
        (tmp_path / "journal").write_text("a file where the journal's directory was\n")  # the reload fails
        answer = controls.answer("RESTART")
        assert answer.startswith("ERROR ") and "\n" not in answer
    finally:
        cluster.close()


def test_every_timeout_of_the_settings_table_is_judged_at_its_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator of conformance/cluster/timeout_edges.py: every timeout of the spec's settings table one
    tick before, at and one tick past (ttl, a bound from below only: not past); a setting nobody judged
    a period or a timeout stops it."""
    timeouts = timeout_edges.timeout_ms(DEFAULT_POLICY)
    assert timeouts == {"pfail_after": 500, "fail_after": 1000, "fail_bound": 1200, "ttl": 1000}
    instants = timeout_edges.edge_instants(timeouts)
    assert sorted(e for edges in instants.values() for e in edges) == sorted(
        (name, offset) for name in timeouts for offset in (-1, 0, 1) if (name, offset) != ("ttl", 1))
    assert all(at == timeouts[name] + offset for at, edges in instants.items() for name, offset in edges)
    assert list(instants) == sorted(instants)
    assert all(offset for edges in timeout_edges.edge_instants(timeouts, exact=False).values() for _, offset in edges)
    monkeypatch.setattr(timeout_edges, "policy_settings", lambda policy: {"grace": 1.0, "fail_after": 1.0})
    with pytest.raises(ValueError, match="grace"):
        timeout_edges.timeout_ms(DEFAULT_POLICY)
