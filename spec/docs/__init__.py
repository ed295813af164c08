"""The generated specifications under ``docs/spec/``, one renderer per protocol reading that
protocol's tables (layouts, errors, settings, transition tables, models) from spec/.

The documents are generated from the code, so they cannot drift: ``python -m spec.docs`` writes
them and ``--check`` exits 1 when a committed document is stale. The renderers live here, not in
the protocol packages, so that a protocol package holds only the protocol.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Final, Mapping

from spec.docs import auth, cluster, pgoutput, shuffle, shuffle_dissector, sync

DOCS_DIR: Final = Path(__file__).resolve().parents[2] / "docs" / "spec"

DOCUMENTS: Final[Mapping[str, Callable[[], str]]] = {
    "shuffle.md": shuffle.render,
    "sync.md": sync.render,
    "cluster.md": cluster.render,
    "pgoutput.md": pgoutput.render,
    "auth.md": auth.render,
    shuffle_dissector.FILE_NAME: shuffle_dissector.render,
}
"""File name under docs/spec/ -> function rendering its whole text."""


def stale(docs_dir: Path = DOCS_DIR) -> list[str]:
    """Names of the documents whose committed text differs from what the code generates."""
    return [name for name, render in DOCUMENTS.items()
            if not (docs_dir / name).exists() or (docs_dir / name).read_text() != render()]
