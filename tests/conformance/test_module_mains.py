"""A conformance command (``python -m conformance.X``) runs ``main()`` from its ``__main__`` guard while the module is
still being executed: a guard above a function ``main`` reaches is a NameError at run time only (the input and walk
corpora's ``select`` once called ``recorded()`` defined below it). So the guard is each module's last statement."""

from __future__ import annotations

import ast
from pathlib import Path

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"


def test_every_main_guard_is_its_module_s_last_statement() -> None:
    misplaced = []
    for path in sorted(CONFORMANCE.rglob("*.py")):
        body = ast.parse(path.read_text()).body
        for index, node in enumerate(body):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'" and index != len(body) - 1:
                misplaced.append(f"{path.relative_to(CONFORMANCE.parent)}:{node.lineno}")
    assert not misplaced
