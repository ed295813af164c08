"""``python -m spec.docs [--check]``: write the generated specifications under ``docs/spec/``."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from spec.docs import DOCS_DIR, DOCUMENTS, stale


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
