"""The walk corpus: the recorded walks are the seeded candidates they name, the file follows its schema, the
report is the one the file renders, and a walk runs the same on the in-process target as recorded."""

from __future__ import annotations

import json
import os
import threading

import jsonschema
import pytest

from conformance.sync import walks
from conformance.sync.vector_suite import VECTOR_DIR, load_vectors


def test_walk_file_matches_its_schema_and_its_seed() -> None:
    doc = load_vectors("walks.json")
    jsonschema.validate(doc, json.loads((VECTOR_DIR / doc["schema"]).read_text()))
    selection = doc["selection"]
    generated = walks.candidates(selection["seed"], selection["candidates"])
    for test in doc["testGroups"][0]["tests"]:
        assert test["steps"] == generated[test["walk"]]["steps"], test["tcId"]
        assert test["shape"] == generated[test["walk"]]["shape"]
        assert test["killed"] == sum(i == test["walk"] for i in selection["killedBy"].values())
    assert sorted(set(selection["killedBy"].values())) == [t["walk"] for t in doc["testGroups"][0]["tests"]]
    assert walks.REPORT_FILE.read_text() == walks.report(doc), "run python -m conformance.sync.walks"


def test_the_recorded_selection_judges_every_mutant_of_the_spec_now() -> None:
    """Stale when a rule is added, changed or removed, not when code only moves (by rule, without lines); some 1.5 s:
    it plants nothing but lists every family's mutants of the nine modules."""
    problems = walks.record_problems(load_vectors("walks.json")["selection"])
    assert not problems, "python -m conformance.sync.walks select-unjudged --out PART, then record PART"


def test_every_kept_walk_tells_its_cases_apart_in_groups_the_suite_runs() -> None:
    ids = [i for _, group in walks.groups() for i in group]
    assert sorted(ids) == list(range(1, load_vectors("walks.json")["numberOfTests"] + 1))


def test_a_walk_answers_on_the_in_process_target_as_recorded() -> None:
    test = next(t for t in walks.recorded() if "restart" not in t["requires"])
    assert walks.run_in_process(test) == test["expected"]


def test_the_selection_runs_a_walk_as_the_flight_path_does() -> None:
    """The selection's runner hands each put straight to the reference driver (``SyncServer.on_put``): the same
    answers as over Flight, an error as its gRPC status where Flight names the client's exception class; a walk of
    each seeded shape and of each derived one."""
    generated = walks.candidates(walks.SEED, len(walks.SHAPES), 3)
    seeded = len(walks.SHAPES) + 3
    first_derived = {w["shape"]: w for w in reversed(generated[seeded:])}  # one of each derived shape
    for walk in generated[:seeded] + list(first_derived.values()):
        direct, flight = walks.run_directly(walk), walks.run_in_process(walk)
        assert [_words(a) for a in direct] == [_words(a) for a in flight], walk["shape"]


def _words(answer: object) -> object:
    if isinstance(answer, dict) and "error" in answer:
        return answer["error"].split(": ", 1)[1]
    return answer


def test_a_walk_target_holds_no_descriptor_once_stopped_even_when_its_server_never_stops(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A selection plants hundreds of mutants in one process, a target or two each: what a target opened must be closed
    when its walk ends, even when its server's shutdown never ends (a mutant's flusher caught in a loop), or the
    process runs out of descriptors (each stopped server kept its event loop's selector and self-pipe)."""
    from reference.sync.server import SyncServer

    stuck = threading.Event()
    monkeypatch.setattr(SyncServer, "_flush_task", lambda self: stuck.wait())  # a flusher that never returns
    monkeypatch.setattr(walks, "CLOSE_WAIT_S", 0.0)  # the target leaves its server behind at once
    counts = []
    try:
        for _ in range(3):
            with walks.in_process() as target:
                server = target.server
            server.serve()  # returns once its transport stopped: the shutdown waits on the flusher after that
            counts.append(len(os.listdir("/proc/self/fd")))
    finally:
        stuck.set()
    assert counts[2] == counts[1], counts  # the first may start what the process keeps (gRPC's poller)
