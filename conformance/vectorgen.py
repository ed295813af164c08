"""Generators of the golden vectors under ``conformance/<protocol>/vectors/``, each a ``python -m`` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence


def render(document: dict[str, Any]) -> str:
    """A vector file's exact text: 2-space JSON, one trailing newline."""
    return json.dumps(document, indent=2) + "\n"


def write_or_check(module: str, description: str | None, path: Path, text: Callable[[], str],
                   argv: Sequence[str] | None) -> int:
    """``python -m <module> [--check]``: write ``path``, or with ``--check`` exit 1 when it is stale."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    args = parser.parse_args(argv)
    wanted = text()
    if args.check:
        if not path.exists() or path.read_text() != wanted:
            print(f"{path} is stale: run python -m {module}", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(wanted)
    print(f"wrote {path} ({json.loads(wanted)['numberOfTests']} tests)")
    return 0
