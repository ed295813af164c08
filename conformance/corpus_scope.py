"""Which spec modules a suite's corpora judge, against what its runtime runs (issue 43).

A corpus is selected by the mutants of the modules it names: a rule in a module no corpus names is a rule no case is
chosen for. So every function or table of every spec module a runtime package imports (transitively) in which a mutant
of any family (:func:`conformance.operator_mutants.every_mutant`) can change something is mutated by one of the suite's
corpora, or is named (its module, or the module's class, function or table) with the corpus of another suite that
mutates it and why the suite's own need not, or with why no corpus need judge it. Each suite says which:
conformance/shuffle/corpus_scope.py, conformance/cluster/corpus_scope.py.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from functools import cache

from conformance.operator_mutants import every_mutant, module_path

_IMPORTED = """
import json, pkgutil, importlib, sys
import {runtime} as runtime
for found in pkgutil.walk_packages(runtime.__path__, "{runtime}."):
    importlib.import_module(found.name)
print(json.dumps(sorted(name for name in sys.modules if name.startswith("spec."))))
"""


@cache
def runtime_modules(runtime: str) -> tuple[str, ...]:
    """The spec modules a process holds once it imported every module of the package ``runtime`` (a fresh one: what
    this process imported already does not count)."""
    done = subprocess.run([sys.executable, "-c", _IMPORTED.format(runtime=runtime)], check=True, capture_output=True,
                          text=True, timeout=300)
    return tuple(json.loads(done.stdout.splitlines()[-1]))


def judged_functions(corpora: Iterable[str]) -> dict[str, set[str] | None]:
    """Module -> the functions the ``corpora`` mutate in it (None: every one): a corpus's ``MODULES`` whole, unless
    its ``FUNCTIONS_OF`` names the functions (and classes, methods) of one it mutates."""
    scope: dict[str, set[str] | None] = {}
    for name in corpora:
        corpus = importlib.import_module(name)
        functions_of: Mapping[str, Iterable[str]] = getattr(corpus, "FUNCTIONS_OF", {})
        for module in corpus.MODULES:
            if module not in functions_of:
                scope[module] = None
        for module, functions in functions_of.items():
            named = scope.setdefault(module, set())
            if named is not None:
                named.update(functions)
    return scope


def _covered(function: str, named: Iterable[str]) -> bool:
    return any(function == n or function.startswith(n + ".") for n in named)


def unjudged(modules: Iterable[str], scope: Mapping[str, set[str] | None], elsewhere: Mapping[str, object]
             ) -> list[str]:
    """``module.function`` for each function (or table) of ``modules`` with a mutant of any family that neither
    ``scope`` nor ``elsewhere`` (a module, or ``module.name`` of its class, function or table) covers; a method or a
    nested function is named by its outermost."""
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
        missing += sorted({f"{module}.{m.function.split('.')[0]}" for m in every_mutant(module)
                           if not _covered(m.function, named)} - set(elsewhere))
    return missing
