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
