"""Which spec modules the shuffle suite's corpora judge, against what the shuffle runtime runs (issue 43).

A corpus is selected by the mutants of the modules it names: a rule in a module no corpus names is a rule no case is
chosen for. So every function of every spec module ``reference/shuffle`` imports (transitively) in which a mutant can
change something is mutated by a shuffle corpus (:data:`CORPORA`), or is listed in :data:`JUDGED_ELSEWHERE` with the
corpus of another suite that mutates it and why the shuffle's need not.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Final

from conformance.operator_mutants import module_path, mutants_of, order_mutants, split_mutants

CORPORA: Final = ("conformance.shuffle.inputs", "conformance.shuffle.walks")
"""The shuffle suite's corpora selected by mutants: each names its ``MODULES`` (every function mutated) and perhaps
``FUNCTIONS_OF`` (a module of which only the functions named are)."""

_THROUGH_THE_DIRECTORY: Final = (
    "the shuffle runtime reaches it only through its directory on a cluster provider "
    "(reference/shuffle/cluster_directory.py); the rules are the provider's, which the cluster suite judges")
JUDGED_ELSEWHERE: Final[Mapping[str, tuple[str, str]]] = {
    "spec.cluster.cas": ("conformance.cluster.walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.detector": ("conformance.cluster.walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.errors": ("conformance.cluster.wire_walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.interface": ("conformance.cluster.wire_walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.model": ("conformance.cluster.walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.session": ("conformance.cluster.wire_walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.types": ("conformance.cluster.walks", _THROUGH_THE_DIRECTORY),
    "spec.cluster.wire": ("conformance.cluster.wire_walks", _THROUGH_THE_DIRECTORY),
}
"""Spec modules the shuffle runtime imports that another suite's corpus mutates: module -> (that corpus, why)."""

_IMPORTED: Final = """
import json, pkgutil, importlib, sys
import reference.shuffle as runtime
for found in pkgutil.walk_packages(runtime.__path__, "reference.shuffle."):
    importlib.import_module(found.name)
print(json.dumps(sorted(name for name in sys.modules if name.startswith("spec."))))
"""


@cache
def runtime_modules() -> tuple[str, ...]:
    """The spec modules a process holds once it imported every module of ``reference/shuffle`` (a fresh one: what
    this process imported already does not count)."""
    done = subprocess.run([sys.executable, "-c", _IMPORTED], check=True, capture_output=True, text=True, timeout=300)
    return tuple(json.loads(done.stdout.splitlines()[-1]))


def judged_functions(corpora: Iterable[str] = CORPORA) -> dict[str, set[str] | None]:
    """Module -> the functions the ``corpora`` mutate in it (None: every one)."""
    scope: dict[str, set[str] | None] = {}
    for name in corpora:
        corpus = importlib.import_module(name)
        for module in corpus.MODULES:
            scope[module] = None
        for module, functions in getattr(corpus, "FUNCTIONS_OF", {}).items():
            named = scope.setdefault(module, set())
            if named is not None:
                named.update(functions)
    return scope


def unjudged(modules: Iterable[str], scope: Mapping[str, set[str] | None],
             elsewhere: Mapping[str, object] = JUDGED_ELSEWHERE) -> list[str]:
    """``module.function`` for each function of ``modules`` with a mutant that neither ``scope`` nor ``elsewhere``
    covers (a function nested in another is its outermost's)."""
    missing: list[str] = []
    for module in modules:
        if module in elsewhere or scope.get(module, set()) is None:
            continue
        named = scope.get(module) or set()
        if not module_path(module).exists():  # a package: its __init__ names what its modules define
            package = module_path(module).with_suffix("") / "__init__.py"
            if any(isinstance(node, ast.FunctionDef) for node in ast.walk(ast.parse(package.read_text()))):
                missing.append(f"{module} (a package's own functions, which no corpus mutates)")
            continue
        mutants = [*mutants_of(module), *split_mutants(module), *order_mutants(module)]
        missing += sorted({f"{module}.{m.function.split('.')[0]}" for m in mutants
                           if m.function.split(".")[0] not in named})
    return missing
