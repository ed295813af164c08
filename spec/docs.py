"""``python -m spec.docs [--check]``: write the generated specifications under ``docs/spec/``.

The documents are generated from the code in spec/ (layouts, errors, settings, transition
tables), so they cannot drift; ``--check`` exits 1 when a committed document is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Final, Mapping, Sequence

from spec.cluster import docgen as cluster_docgen
from spec.pgoutput import docgen as pgoutput_docgen
from spec.shuffle import docgen as shuffle_docgen
from spec.sync import docgen as sync_docgen

DOCS_DIR: Final = Path(__file__).resolve().parent.parent / "docs" / "spec"

DOCUMENTS: Final[Mapping[str, Callable[[], str]]] = {
    "shuffle.md": shuffle_docgen.render,
    "sync.md": sync_docgen.render,
    "cluster.md": cluster_docgen.render,
    "pgoutput.md": pgoutput_docgen.render,
}
"""File name under docs/spec/ -> function rendering its whole text."""


def stale(docs_dir: Path = DOCS_DIR) -> list[str]:
    """Names of the documents whose committed text differs from what the code generates."""
    return [name for name, render in DOCUMENTS.items()
            if not (docs_dir / name).exists() or (docs_dir / name).read_text() != render()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spec.docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated document is stale")
    args = parser.parse_args(argv)
    if args.check:
        names = stale()
        for name in names:
            print(f"{DOCS_DIR / name} is stale: run python -m spec.docs (make docs)", file=sys.stderr)
        return 1 if names else 0
    DOCS_DIR.mkdir(parents=True, exist_ok=True)
    for name, render in DOCUMENTS.items():
        (DOCS_DIR / name).write_text(render())
        print(f"wrote {DOCS_DIR / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
