"""The committed specification is exactly what the code generates."""

from __future__ import annotations

from pathlib import Path

from spec import docs
from spec.docs import shuffle as shuffle_doc
from spec.shuffle import errors
from spec.shuffle.errors import BehaviourError, CodecError
from spec.shuffle.settings import SETTINGS


def test_committed_shuffle_spec_is_current() -> None:
    assert docs.stale() == [], "docs/spec/ is stale: run make docs"


def test_stale_or_missing_document_is_reported(tmp_path: Path) -> None:
    assert docs.stale(tmp_path) == list(docs.DOCUMENTS)
    for name, render in docs.DOCUMENTS.items():
        (tmp_path / name).write_text(render())
    (tmp_path / "shuffle.md").write_text(shuffle_doc.render().replace("int64", "int32", 1))
    assert docs.stale(tmp_path) == ["shuffle.md"]
    (tmp_path / "shuffle.md").write_text(shuffle_doc.render())
    assert docs.stale(tmp_path) == []


def test_spec_covers_every_condition_setting_and_vector_anchor() -> None:
    text = shuffle_doc.render()
    classes = shuffle_doc.conditions(CodecError) + shuffle_doc.conditions(BehaviourError)
    assert errors.ChecksumVerificationFailed in classes and errors.TruncatedInput in classes
    assert all(f"`{cls.condition}`" in text for cls in classes)
    assert all(f"`{s.key}`" in text for s in SETTINGS)
    for anchor in ("common-header", "message-data", "message-credit", "message-termination-control",
                   "message-termination-ack", "frame", "checksum"):
        assert f'<a id="{anchor}"></a>' in text
