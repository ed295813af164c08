"""The generated sync and cluster specifications cover what the code defines (staleness itself is
checked for every document by tests/shuffle/test_shuffle_docs.py)."""

from __future__ import annotations

import re

from spec.cluster import errors as cluster_errors
from spec.cluster import wire
from spec.docs import cluster as cluster_doc
from spec.docs import sync as sync_doc
from spec.sync import errors as sync_errors
from spec.sync.messages import FILE_DESCRIPTORS, SyncResponse


def test_sync_spec_has_every_field_number_error_and_a_hex_example_each() -> None:
    text = sync_doc.render()
    for fd in FILE_DESCRIPTORS:
        for message in fd.message_type:
            section = text.split(f'<a id="message-{message.name.lower()}"></a>')[1].split("<a id=")[0]
            assert all(f"| {f.number} | `{f.name}` |" in section for f in message.field), message.name
            assert "Example (" in section and "```\n" in section, message.name
    conditions = {cls.condition for cls in sync_errors.SyncError.__subclasses__()}
    assert conditions and all(f"`{condition}`" in text for condition in conditions)
    assert SyncResponse(accepted=True, memory_sequence_number=42, durable_sequence_number=40,
                        first=False).encode().hex() in text
    assert "```mermaid\nstateDiagram-v2" in text and "| 8 | flush t3 | A: 3 / 3 | none |" in text  # Seafowl's example
    assert "`` Invalid sync schema: Field for column name with `Changed` role must be of type boolean, got Utf8 ``" in text


def test_cluster_spec_has_every_wire_kind_error_and_operation() -> None:
    text = cluster_doc.render()
    assert all(f'<a id="wire-kind-{k.name.lower().replace("_", "-")}"></a>' in text for k in wire.ServiceKind)
    assert all(f"`{cls.condition}` | {cls.code} |" in text
               for cls in [cluster_errors.ClusterError, *cluster_errors.ClusterError.__subclasses__()])
    for anchor in ("op-join-cluster", "op-remove-from-cluster", "op-join-shard", "op-remove-from-shard",
                   "op-update-shard-log", "op-update-gossip", "failure-detector", "failure-policy", "cas", "notifications"):
        assert f'<a id="{anchor}"></a>' in text
    assert "    PFAIL --> FAIL: age > fail_after" in text  # the detector's diagram, from a fake-clock run
    ids = re.findall(r'<a id="([^"]+)"></a>', text)
    assert len(ids) == len(set(ids)), "anchors are unique"
