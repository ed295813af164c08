"""Which spec modules the cluster suite's corpora judge, against what the cluster runtime runs (issue 43).

The same check as the shuffle's (conformance/corpus_scope.py): every function (or table) of every spec module
``reference/cluster`` imports (transitively) in which a mutant can change something is mutated by a cluster corpus
(:data:`CORPORA`), or is listed in :data:`JUDGED_ELSEWHERE` with the corpus of another suite that mutates it and why
the cluster's need not, or in :data:`OUT_OF_SCOPE` with why no corpus need judge it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

CORPORA: Final = ("conformance.cluster.inputs", "conformance.cluster.walks", "conformance.cluster.wire_walks",
                  "conformance.cluster.client_walks")
"""The cluster suite's corpora selected by mutants: each names its ``MODULES`` and perhaps ``FUNCTIONS_OF``."""

RUNTIME: Final = "reference.cluster"

_AUTH_PACKAGE: Final = (
    "imported with spec.auth's package, whose settings the cluster's configuration reads; the cluster service runs "
    "no handshake or cipher (its HELLO carries a shared secret, spec.shared_secret): the shuffle's connections do")
JUDGED_ELSEWHERE: Final[Mapping[str, tuple[str, str]]] = {
    "spec.auth.ciphers": ("conformance.shuffle.inputs", _AUTH_PACKAGE),
    "spec.auth.errors": ("conformance.shuffle.inputs", _AUTH_PACKAGE),
    "spec.auth.handshake": ("conformance.shuffle.inputs", _AUTH_PACKAGE),
    "spec.auth.keys": ("conformance.shuffle.inputs", _AUTH_PACKAGE),
    "spec.auth.layouts": ("conformance.shuffle.inputs", _AUTH_PACKAGE),
    "spec.auth.settings": ("conformance.shuffle.inputs", (
        "reference/cluster/config.py reads spark.authenticate with `enabled` (Scala's toBoolean), as the shuffle "
        "reads it; the secret it then takes is spec.shared_secret's, which the cluster inputs judge")),
    "spec.errors": ("conformance.shuffle.inputs", (
        "the one base of every protocol's errors (message, parameters, pickling, JSON); the cluster's errors add "
        "only their conditions and codes (spec/cluster/errors.py, judged by the wire walks)")),
    **{f"spec.admission.{name}": ("conformance.shuffle.inputs", (
        "the cluster service's reactor bounds strangers and departures only (reference/net/reactor.py); a connection "
        "table (and the rank it evicts by) is the shuffle's and the sync server's"))
       for name in ("ConnectionAdmission", "_EVICTION_RANK")},
    **{f"spec.clock.{name}": ("conformance.shuffle.walks", (
        "the machines' one clock: the cluster's machines add and subtract with after and elapsed, which the cluster "
        "inputs judge; milliseconds and periods are the shuffle writer's, and every instant's count in units "
        "(_units) runs in each, judged by the shuffle's walks"))
       for name in ("ms_after", "periods_past", "_units")},
}
"""Spec modules (or a module's class or function) the cluster runtime imports that another suite's corpus mutates:
name -> (that corpus, why)."""

OUT_OF_SCOPE: Final[Mapping[str, str]] = {}
"""Functions or tables (``module.name``) the cluster runtime imports that no corpus need judge: name -> why."""
