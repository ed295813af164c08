"""Which spec modules the shuffle suite's corpora judge, against what the shuffle runtime runs (issue 43).

The check is conformance/corpus_scope.py's: every function (or table) of every spec module ``reference/shuffle``
imports (transitively) in which a mutant can change something is mutated by a shuffle corpus (:data:`CORPORA`), or is
listed in :data:`JUDGED_ELSEWHERE` with the corpus of another suite that mutates it and why the shuffle's need not, or
in :data:`OUT_OF_SCOPE` with why no corpus need judge it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

CORPORA: Final = ("conformance.shuffle.inputs", "conformance.shuffle.walks")
"""The shuffle suite's corpora selected by mutants: each names its ``MODULES`` (every function mutated) and perhaps
``FUNCTIONS_OF`` (a module of which only the functions named are)."""
RUNTIME: Final = "reference.shuffle"

_THROUGH_THE_DIRECTORY: Final = (
    "the shuffle runtime reaches it only through its directory on a cluster provider "
    "(reference/shuffle/cluster_directory.py); the rules are the provider's, which the cluster suite judges")
JUDGED_ELSEWHERE: Final[Mapping[str, tuple[str, str]]] = {
    "spec.cluster.cas": ("conformance.cluster.walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.detector": ("conformance.cluster.walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.errors": ("conformance.cluster.wire_walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.interface": ("conformance.cluster.wire_walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.model": ("conformance.cluster.walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.session": ("conformance.cluster.wire_walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.types": ("conformance.cluster.walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.wire": ("conformance.cluster.wire_walks", _THROUGH_THE_DIRECTORY),
}
"""Spec modules the shuffle runtime imports that another suite's corpus mutates: module -> (that corpus, why)."""

OUT_OF_SCOPE: Final[Mapping[str, str]] = {
    **{f"spec.shuffle.transitions.{enum}": (
        "a state's or event's value (the spelling family changes its case) is read only by UsageError texts (a "
        "caller's bug, never a protocol answer) and the docs: no message, trace answer or error condition carries it "
        "(20 walks planted with three of them answer as the spec)")
       for enum in ("WriterChannelState", "WriterChannelEvent", "ReaderChannelState", "ReaderChannelEvent",
                    "WriterState", "ReaderState")},
    "spec.shuffle.transitions.Table": (
        "the lookup every machine's every input goes through, built at import: its rows are judged by the walk "
        "corpus's own table mutants (conformance/shuffle/walks.py table_mutants: a row dropped, sent to FAILED or kept, "
        "a failure naming another error); its constructor's one mutant (two arguments swapped) fails every walk"),
    "spec.shuffle.layouts.FIELDS_BY_TYPE": (
        "an entry dropped breaks the import (spec.shuffle.registry checks at import that every message type has its "
        "fields: AssertionError), so every case of every suite fails on it"),
}
"""Functions or tables (``module.name``) the shuffle runtime imports that no corpus need judge: name -> why."""
