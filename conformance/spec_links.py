"""Which section of the generated specification (``docs/spec/*.md``) each case and vector checks.

A case names its section itself (:attr:`~conformance.framework.Case.spec_ref`) or inherits the
section of the longest case-id prefix listed in :data:`CASE_SECTIONS` (so a case added to an
existing topic is linked already); a vector file names its section in its own ``specRef`` or in
:data:`VECTOR_SECTIONS`. :func:`broken_links` lists every case or vector whose link is missing or
points at an anchor the document does not have (``tests/conformance/test_spec_links.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Final, Iterable, Mapping

from conformance.framework import Case

ROOT: Final = Path(__file__).resolve().parent.parent
CONFORMANCE_DIR: Final = ROOT / "conformance"

CASE_SECTIONS: Final[Mapping[str, Mapping[str, str]]] = {
    "shuffle": {
        "shuffle/handshake/": "docs/spec/shuffle.md#writer-machine",
        "shuffle/handshake/reader-": "docs/spec/shuffle.md#reader-machine",
        "shuffle/data/writer-": "docs/spec/shuffle.md#writer-buffers",
        "shuffle/data/reader-": "docs/spec/shuffle.md#reader-machine",
        "shuffle/sequence/": "docs/spec/shuffle.md#sequence-numbers",
        "shuffle/checksum/": "docs/spec/shuffle.md#checksum",
        "shuffle/termination/": "docs/spec/shuffle.md#termination",
        "shuffle/framing/": "docs/spec/shuffle.md#frame",
        "shuffle/backpressure/writer-": "docs/spec/shuffle.md#writer-memory",
        "shuffle/backpressure/reader-": "docs/spec/shuffle.md#reader-quota",
        "shuffle/failure/": "docs/spec/shuffle.md#failures",
        "shuffle/auth/": "docs/spec/auth.md#handshake",
        "shuffle/settings/": "docs/spec/shuffle.md#settings",
        "shuffle/framing/reader-derived-first-rule-of-two": "docs/spec/shuffle.md#message-data",
        "shuffle/handshake/writer-derived-ids-against-binding": "docs/spec/shuffle.md#channel-ids",
    },
    "sync": {
        "probe/": "docs/spec/sync.md#probe",
        "transactions/": "docs/spec/sync.md#transactions",
        "messages/": "docs/spec/sync.md#messages",
        "schema/": "docs/spec/sync.md#schema-rules",
        "durable/": "docs/spec/sync.md#durable-rule",
        "flush/": "docs/spec/sync.md#flush-policy",
        "flush/derived-lag-at-inexact-instants": "docs/spec/sync.md#time",
        "flush/derived-retry-at-inexact-instants": "docs/spec/sync.md#time",
        "admission/derived-stream-deadlines-at-inexact-instants": "docs/spec/sync.md#time",
        "restart/": "docs/spec/sync.md#restart",
        "replay/": "docs/spec/sync.md#restart",
        "replay/duplicate-in-one-flush": "docs/spec/sync.md#application",
        "squash/": "docs/spec/sync.md#squashing",
        "apply/": "docs/spec/sync.md#application",
        "confinement/": "docs/spec/sync.md#confinement",
        "atomicity/": "docs/spec/sync.md#atomicity",
        "sequence/": "docs/spec/sync.md#sequence-rule",
        "admission/": "docs/spec/sync.md#departures-from-seafowl",
        "responses/": "docs/spec/sync.md#durable-rule",
        "responses/derived-first-": "docs/spec/sync.md#probe",
        "walks/": "docs/spec/sync.md#transactions",
        "inputs/": "docs/spec/sync.md#schema-rules",
        "machines/": "docs/spec/sync.md#the-durable-rule",
        "decode/": "docs/spec/sync.md#messages",
    },
    "cluster": {
        "membership/": "docs/spec/cluster.md#model",
        "membership/join-snapshot": "docs/spec/cluster.md#op-join-cluster",
        "membership/address-bound": "docs/spec/cluster.md#op-join-cluster",
        "membership/graceful-leave": "docs/spec/cluster.md#op-remove-from-cluster",
        "membership/unknown-shard": "docs/spec/cluster.md#op-join-shard",
        "shardlog/": "docs/spec/cluster.md#op-update-shard-log",
        "shardlog/linearizable": "docs/spec/cluster.md#cas",
        "shardlog/monotone-notify": "docs/spec/cluster.md#notifications",
        "shardlog/catch-up": "docs/spec/cluster.md#op-join-shard",
        "namespace/": "docs/spec/cluster.md#namespaces",
        "gossip/": "docs/spec/cluster.md#op-update-gossip",
        "gossip/late-joiner": "docs/spec/cluster.md#op-join-cluster",
        "batch/": "docs/spec/cluster.md#values",
        "failure/": "docs/spec/cluster.md#failure-detector",
        "failure/derived-every-timeout-at-its-edge": "docs/spec/cluster.md#failure-policy",
        "failure/derived-unread-is-not-silence": "docs/spec/cluster.md#failure-policy",
        "durability/": "docs/spec/cluster.md#op-update-shard-log",
        "wire/": "docs/spec/cluster.md#wire-frame",
        "wire/resume-repeats-nothing": "docs/spec/cluster.md#wire-kind-hello",
        "wire/derived-hello-node-id-rules": "docs/spec/cluster.md#wire-kind-hello",
        "wire/derived-silence-at-its-deadline": "docs/spec/cluster.md#the-services-end-servicesession",
        "wire/derived-sessions-at-their-bound": "docs/spec/cluster.md#the-services-end-servicesession",
        "wire/derived-every-frame-moves-the-silence-deadline": "docs/spec/cluster.md#the-services-end-servicesession",
        "membership/derived-every-operation-in-delivery-order": "docs/spec/cluster.md#notifications",
        "wire/derived-every-setting-at-its-bound": "docs/spec/cluster.md#failure-policy",
        "wire/derived-admission-checks-in-order": "docs/spec/cluster.md#the-services-end-servicesession",
        "shardlog/derived-cas-writer-retries": "docs/spec/cluster.md#cas",
        "walks/": "docs/spec/cluster.md#model",
        "walks/derived-every-wire-walk": "docs/spec/cluster.md#the-services-end-servicesession",
        "walks/derived-every-client-walk": "docs/spec/cluster.md#the-clients-end-clientsession",
        "walks/derived-client-timers-at-inexact-instants": "docs/spec/cluster.md#time",
        "inputs/": "docs/spec/cluster.md#wire-layouts-of-the-cluster-service",
    },
}
"""Per suite: case-id prefix -> section; the longest matching prefix wins."""

VECTOR_SECTIONS: Final[Mapping[str, str]] = {
    "shuffle/wire_messages.json": "docs/spec/shuffle.md#common-header",
    "shuffle/traces.json": "docs/spec/shuffle.md#state-machines",
    "shuffle/walks.json": "docs/spec/shuffle.md#state-machines",
    "shuffle/inputs.json": "docs/spec/shuffle.md#common-header",
    "sync/messages.json": "docs/spec/sync.md#messages",
    "sync/schema.json": "docs/spec/sync.md#schema-rules",
    "sync/squash.json": "docs/spec/sync.md#squashing",
    "sync/traces.json": "docs/spec/sync.md#transactions",
    "sync/walks.json": "docs/spec/sync.md#transactions",
    "sync/inputs.json": "docs/spec/sync.md#schema-rules",
    "sync/decode.json": "docs/spec/sync.md#messages",
}
"""Vector files (under conformance/<protocol>/vectors/) that do not carry their own top-level ``specRef``."""


def spec_ref(suite: str, case: Case) -> str | None:
    """The section ``case`` checks: its own ``spec_ref``, else the longest listed prefix's."""
    if case.spec_ref:
        return case.spec_ref
    prefixes = [p for p in CASE_SECTIONS.get(suite, {}) if case.id.startswith(p)]
    return CASE_SECTIONS[suite][max(prefixes, key=len)] if prefixes else None


def anchors(document: Path) -> set[str]:
    """The anchors a Markdown document defines (``<a id=...>`` and heading slugs)."""
    text = document.read_text()
    ids = set(re.findall(r'<a id="([^"]+)"></a>', text))
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.M):
        ids.add(re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-"))
    return ids


def link_problem(ref: str | None) -> str | None:
    """Why ``ref`` does not resolve (None when it does)."""
    if not ref:
        return "no specRef"
    path, _, anchor = ref.partition("#")
    document = ROOT / path
    if not document.is_file():
        return f"specRef {ref}: no document {path}"
    if anchor and anchor not in anchors(document):
        return f"specRef {ref}: {path} has no anchor #{anchor}"
    return None


def vector_files() -> list[Path]:
    """Every vector file of the protocols with a generated spec (``docs/spec/<protocol>.md``, the ones
    :data:`CASE_SECTIONS` lists); JSON Schemas beside them, which declare ``$schema``, excluded."""
    return sorted(p for protocol in CASE_SECTIONS for p in (CONFORMANCE_DIR / protocol / "vectors").glob("*.json")
                  if "$schema" not in json.loads(p.read_text()))


def vector_name(path: Path) -> str:
    """``<protocol>/<file>``: how :data:`VECTOR_SECTIONS` and messages name a vector file."""
    return f"{path.parent.parent.name}/{path.name}"


def vector_ref(path: Path) -> str | None:
    own = json.loads(path.read_text()).get("specRef")
    return str(own) if own else VECTOR_SECTIONS.get(vector_name(path))


def broken_links(suites: Iterable[tuple[str, Iterable[Case]]]) -> list[str]:
    """One line per case or vector file whose specRef is missing or does not resolve."""
    out = []
    for suite, cases in suites:
        for case in cases:
            problem = link_problem(spec_ref(suite, case))
            if problem is not None:
                out.append(f"{suite} case {case.id}: {problem} (set Case.spec_ref, or list its topic in "
                           f"conformance/spec_links.py CASE_SECTIONS['{suite}'])")
    for path in vector_files():
        problem = link_problem(vector_ref(path))
        if problem is not None:
            out.append(f"vectors {vector_name(path)}: {problem} (add a top-level \"specRef\" or an "
                       "entry in conformance/spec_links.py VECTOR_SECTIONS)")
    return out
