"""Each spec package names its public surface in ``__all__``, and nothing outside spec/ reaches into
a private (underscore) module of it."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["spec.shuffle", "spec.sync", "spec.cluster", "spec.pgoutput", "spec.auth"]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_class_and_function_is_the_packages_own_and_documented(name: str) -> None:
    package = importlib.import_module(name)
    assert len(set(package.__all__)) == len(package.__all__)
    for exported in package.__all__:
        value = getattr(package, exported)
        if isinstance(value, type) or inspect.isfunction(value):
            assert value.__module__.startswith(name + "."), f"{name}.{exported} comes from {value.__module__}"
            assert inspect.getdoc(value), f"{name}.{exported} has no docstring"


def test_nothing_outside_spec_imports_a_private_spec_module() -> None:
    offenders = []
    for tree in ("reference", "conformance", "tests", "benchmarks"):
        for path in (ROOT / tree).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                           else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                offenders += [f"{path.relative_to(ROOT)}: {m}" for m in modules
                              if m.startswith("spec.") and any(p.startswith("_") for p in m.split("."))]
    assert offenders == []


def test_no_two_runtime_packages_import_each_other() -> None:
    """One depends on the other only (the Postgres source on PySpark is the pipeline's,
    reference/pipeline/postgres.py, so reference/cdc never imports reference/pipeline)."""
    uses: dict[str, set[str]] = {}
    for path in (ROOT / "reference").rglob("*.py"):
        package = path.relative_to(ROOT).parts[1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("reference."):
                uses.setdefault(package, set()).add(node.module.split(".")[1])
    cycles = sorted((a, b) for a in uses for b in uses[a] if a < b and a in uses.get(b, set()))
    assert cycles == []
