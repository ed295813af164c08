"""The cluster's input edges (conformance/cluster/input_edges.py) tell apart the kinds of bug operator mutants do not
plant: every entry of the spec's error registry left out (one bug per entry, derived from the registry itself), a
split update's later frames measured without their fixed part, and the shared connection bounds the service's
reactor holds (a departure at its byte bound, a linger restarted, a deadline at its instant, a newcomer evicting
itself), and the id order a membership view's snapshot lists its shards and members in, each planted as the
sensitivity catalogue plants a bug (conformance.mutation); and through ``exec:`` the
reference harness answers every edge as the spec does."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from conformance.cluster import input_edges, inputs
from conformance.cluster.harness import open_target
from conformance.framework import RunOptions
from conformance.mutation import Mutant
from conformance.operator_mutants import fresh_modules
from spec.cluster.errors import ERRORS_BY_CODE

PREFIXES = inputs.PREFIXES
"""Imported afresh with a bug planted: the spec, the target's calls and the connection-bound policies' steps."""
REGISTERED = "cls.code: cls for cls in (ClusterError, NotAMember, UnknownNode, UnknownShard, InvalidBatch,\n" \
             "                              InvalidIdentifier, ProviderUnavailable, ProviderClosed, MalformedMembership,\n" \
             "                              FrameTooLarge, MalformedMessage, NodeIdInUse, Unauthenticated, " \
             "InvalidAddress,\n                              ClusterFull)"


def _unregistered(name: str) -> Mutant:
    """The registry of errors rebuilt off the wire without ``name``."""
    return Mutant(f"unregistered-{name}", "spec/cluster/errors.py", REGISTERED,
                  REGISTERED.replace(f" {name},", "").replace(f"\n                              {name})", ")"),
                  f"{name} not registered for errors decoded off the wire")


BUGS = [_unregistered(cls.__name__) for cls in ERRORS_BY_CODE.values() if cls.__name__ != "ClusterError"] + [
    Mutant("split-forgets-fixed-part", "spec/cluster/wire.py", "run, size = [], overhead", "run, size = [], 0",
           "a split update's later frames measured without their fixed part"),
    Mutant("departure-at-its-bound-closes", "spec/departure.py", "queued_bytes > self.max_bytes",
           "queued_bytes >= self.max_bytes", "a departure of exactly max_bytes closes at once"),
    Mutant("departure-linger-restarted", "spec/departure.py", "self._due.setdefault(peer, after(now, self.linger_s))",
           "self._due[peer] = after(now, self.linger_s)", "a departure asked again restarts its linger"),
    Mutant("deadline-at-its-instant-kept", "spec/admission.py", "if at > now:", "if at >= now:",
           "a deadline at its exact instant is not expired"),
    Mutant("newcomer-evicts-itself", "spec/admission.py", "if p not in self._proven and p != peer), next(iter(self._due)))",
           "if p not in self._proven), next(iter(self._due)))", "a newcomer among proven strangers evicts itself"),
    Mutant("held-silence-from-read-through", "spec/cluster/session.py",
           "observed = read_through if held_since is None else min(read_through, held_since)",
           "observed = read_through", "a held session judged silent for the time its reads were held"),
    Mutant("welcomed-node-keeps-hello-bound", "spec/cluster/session.py", "self.frames.bound = wire.MAX_REQUEST_BYTES",
           "self.frames.bound = wire.MAX_HELLO_BYTES", "a welcomed node's frames bounded as a stranger's"),
    Mutant("detector-unread-added", "spec/cluster/detector.py", "observed = after(now, -max(0.0, unread_for))",
           "observed = after(now, -unread_for)", "a negative unread time moves the detector's clock on"),
    Mutant("snapshot-shards-unsorted", "spec/cluster/model.py", "for s, n in sorted(shards.items())",
           "for s, n in shards.items()", "a snapshot's shards listed in the order their lowest ids came (blind round 10)"),
    Mutant("snapshot-members-unsorted", "spec/cluster/model.py", "for node_id in sorted(records):",
           "for node_id in records:", "a snapshot's members listed in the order their records came"),
    Mutant("shard-members-unsorted", "spec/cluster/model.py", "return sorted(self.shard_index.get(shard, ()))",
           "return list(self.shard_index.get(shard, ()))", "a shard's members listed in the order of their set"),
    Mutant("presented-secret-trimmed", "spec/shared_secret.py", "hmac.compare_digest(presented.encode(),",
           "hmac.compare_digest(presented.strip().encode(),",
           "a presented secret trimmed before it is compared (blind round 12)"),
    Mutant("presented-secret-case-folded", "spec/shared_secret.py", "hmac.compare_digest(presented.encode(), configured.encode())",
           "hmac.compare_digest(presented.lower().encode(), configured.lower().encode())",
           "secrets compared in one case"),
]
"""Each bug of a kind the edges are for, planted the way the sensitivity catalogue plants one."""


def _answers(bug: Mutant | None, edges: list[input_edges.Edge]) -> list[Any]:
    with fresh_modules(PREFIXES, bug):
        run = inputs.load_runner()
        return [run(edge.call) for edge in edges]


@pytest.fixture(scope="module")
def small_edges() -> list[input_edges.Edge]:
    """The edges but the 16 MiB ones (each bug above shows on smaller inputs too)."""
    return [edge for edge in input_edges.every_edge() if "MAX_FRAME_BYTES" not in edge.label]


@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: bug.name)
def test_each_bug_of_a_kind_the_edges_are_for_is_told_apart(bug: Mutant, small_edges: list[input_edges.Edge]) -> None:
    owed = _answers(None, small_edges)
    assert owed == [inputs.run_call(edge.call) for edge in small_edges]
    assert _answers(bug, small_edges) != owed, f"{bug.description}: no edge tells it apart"


def test_every_code_of_the_spec_s_error_tree_is_an_edge_and_so_are_its_neighbours() -> None:
    labels = " ".join(edge.label for edge in input_edges.error_codes())
    for code, cls in ERRORS_BY_CODE.items():
        assert f"code {code} ({cls.condition})" in labels
    assert "(not defined)" in labels


def test_the_reference_harness_answers_every_edge_as_the_spec_does_and_a_changed_answer_fails() -> None:
    options = RunOptions(suite="cluster", target=f"exec:{sys.executable} -m conformance.cluster.reference_target",
                         timeout=60)
    with open_target(options) as target:
        assert target.inputs is not None
        assert input_edges.differences(target.inputs) == []
        problems = input_edges.differences(lambda call: {"raised": "Planted"}, input_edges.error_codes()[:1])
    assert problems and "expected" in problems[0] and "Planted" in problems[0]
