"""First-order operator mutants of a spec module, to choose which seeded walks a vector corpus keeps.

A walk corpus (``conformance/<suite>/vectors/walks.json``) is derived, not picked by hand: walks are
generated from a seed, and a walk is kept only when it tells the spec apart from one of its
first-order mutants (a comparison at its boundary, ``and``/``or``, a negated condition, a constant
off by one, ``+``/``-``, ``min``/``max``, a statement dropped, two adjacent checks in the other order), or of one of
the families of bug the blind rounds planted that no operator plants (a check removed, two values swapped, a string's
case, a number rounded the other way, a variable not brought up to date: :func:`every_mutant`). The mutants are never shipped; they
only decide which recorded walks are worth a reader's and a target's time. Mutants are planted in this
process by serving the mutated source for one module while the walk runner is imported afresh, so a
selection over hundreds of mutants costs an import each, not a process each.
"""

from __future__ import annotations

import ast
import ctypes
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, Final, Protocol, TypeGuard

ROOT: Final = Path(__file__).resolve().parent.parent

_BOUNDARY: Final[dict[type[ast.cmpop], type[ast.cmpop]]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_ARITHMETIC: Final[dict[type[ast.operator], type[ast.operator]]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
}
_SWAPPED_CALLS: Final = {"min": "max", "max": "min", "any": "all", "all": "any"}


@dataclass(frozen=True, slots=True)
class OperatorMutant:
    """One change at one span of one module's source."""

    module: str
    """Dotted name, e.g. ``spec.shuffle.writer``."""
    function: str
    """The qualified name of the enclosing function: where a reader looks for the rule."""
    operator: str
    """What changed, e.g. ``>= -> >`` or ``drop self._age = None``."""
    line: int
    end_line: int
    col: int
    end_col: int
    replacement: str

    @property
    def name(self) -> str:
        return f"{self.module}:{self.function}:{self.line}: {self.operator}"

    def source(self, original: str) -> str:
        lines = original.splitlines(keepends=True)
        head = "".join(lines[: self.line - 1]) + lines[self.line - 1][: self.col]
        tail = lines[self.end_line - 1][self.end_col :] + "".join(lines[self.end_line :])
        return head + self.replacement + tail


def module_path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _column(text: str, line: int, offset: int) -> int:
    """The character column of a node's UTF-8 byte ``offset`` on ``line`` (they differ after a non-ASCII character)."""
    found = _lines(text)[line - 1]
    return offset if found.isascii() else len(found.encode()[:offset].decode())


@cache
def _lines(text: str) -> list[str]:
    return text.splitlines()


def _span(module: str, function: str, text: str, first: ast.AST, operator: str, replacement: str,
          last: ast.AST | None = None) -> OperatorMutant:
    """A change from the start of ``first`` to the end of ``last`` (or of ``first``)."""
    last = first if last is None else last
    assert isinstance(first, (ast.expr, ast.stmt)) and isinstance(last, (ast.expr, ast.stmt))
    (line, col), (end_line, end_col) = _start(text, first), _end(text, last)
    return OperatorMutant(module, function, operator, line, end_line, col, end_col, replacement)


class _Collector(ast.NodeVisitor):
    """Walks one module; every mutable site inside a function body becomes one or more mutants."""

    def __init__(self, module: str, source: str) -> None:
        self.module = module
        self.text = source
        self.scope: list[str] = []
        self.found: list[OperatorMutant] = []
        self.in_function = 0

    def _add(self, node: ast.expr | ast.stmt, replacement: str, operator: str) -> None:
        if self.in_function:
            self.found.append(_span(self.module, ".".join(self.scope), self.text, node, operator, replacement))

    def _expression(self, node: ast.expr, changed: ast.expr, operator: str) -> None:
        self._add(node, f"({ast.unparse(changed)})", operator)

    def _scoped(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, function: bool) -> None:
        self.scope.append(node.name)
        self.in_function += function
        for child in node.body:  # decorators, defaults and annotations are not behaviour of the body
            self.visit(child)
        self._checks_swapped(node.body)
        self.in_function -= function
        self.scope.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, False)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, True)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scoped(node, True)

    def _checks_swapped(self, body: list[ast.stmt]) -> None:
        """Two adjacent checks that each end the step (raise or return) judged in the other order: which
        error a message with two faults gets is part of the rule."""
        for first, second in zip(body, body[1:]):
            if not (_ends_step(first) and _ends_step(second) and first.col_offset == second.col_offset):
                continue
            one, two = _segment(self.text, first), _segment(self.text, second)
            self.found.append(_span(
                self.module, ".".join(self.scope), self.text, first,
                f"swap checks {_short(first.test)} / {_short(second.test)}", f"{two}\n{' ' * first.col_offset}{one}",
                second))

    def visit_If(self, node: ast.If) -> None:
        if not isinstance(node.test, ast.UnaryOp):
            self._expression(node.test, ast.UnaryOp(ast.Not(), node.test), f"negate if {_short(node.test)}")
        self.generic_visit(node)
        self._checks_swapped(node.body)
        self._checks_swapped(node.orelse)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        """Messages are not rules; positions inside f-strings are not reliable either."""

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        self._add(node, "pass", f"drop {_short(node)}")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets):
            self._add(node, "pass", f"drop {_short(node)}")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._add(node, "pass", f"drop {_short(node)}")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for index, op in enumerate(node.ops):
            swapped = _BOUNDARY.get(type(op))
            if swapped is None:
                continue
            ops = list(node.ops)
            ops[index] = swapped()
            changed = ast.Compare(node.left, ops, node.comparators)
            self._expression(node, changed, f"{_short(node)}: {_op(op)} -> {_op(swapped())}")
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        other: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        self._expression(node, ast.BoolOp(other, node.values), f"{_short(node)}: {_op(node.op)} -> {_op(other)}")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self._expression(node, node.operand, f"drop not in {_short(node)}")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        swapped = _ARITHMETIC.get(type(node.op))
        if swapped is not None:
            changed = ast.BinOp(node.left, swapped(), node.right)
            self._expression(node, changed, f"{_short(node)}: {_op(node.op)} -> {_op(swapped())}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in _SWAPPED_CALLS:
            other = _SWAPPED_CALLS[node.func.id]
            self._add(node.func, other, f"{_short(node)}: {node.func.id} -> {other}")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int):
            return
        for changed in sorted({value + 1, value - 1}):
            self._add(node, f"({changed})", f"{value} -> {changed}")


_SPLITS: Final[dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]]] = {
    ast.NotEq: (ast.Lt, ast.Gt), ast.Eq: (ast.LtE, ast.GtE)}


def _in_functions(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """Every node inside a function body with the qualified name of its function, in source order (decorators,
    defaults and annotations included: they hold no comparison, call or condition these mutants change)."""
    def visit(node: ast.AST, scope: tuple[str, ...], in_function: bool) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from visit(child, (*scope, child.name), in_function or not isinstance(child, ast.ClassDef))
                continue
            if in_function:
                yield ".".join(scope), child
            yield from visit(child, scope, in_function)

    return visit(tree, (), False)


def split_mutants(module: str) -> list[OperatorMutant]:
    """Each == and != in a function body split in its two halves (!= -> < and >, == -> <= and >=): a rule that
    accepts a skipped sequence number but not a repeated one is one of them, which no first-order swap is."""
    text = module_path(module).read_text()
    out: list[OperatorMutant] = []
    for function, node in _in_functions(ast.parse(text)):
        if isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                for half in _SPLITS.get(type(op), ()):
                    ops = list(node.ops)
                    ops[index] = half()
                    changed = ast.Compare(node.left, ops, node.comparators)
                    out.append(_span(module, function, text, node,
                                     f"{ast.unparse(node)[:57]}: {_op(op)} -> {_op(half())}",
                                     f"({ast.unparse(changed)})"))
    return out


_OTHER_END: Final = {"popleft": "pop", "appendleft": "append"}
"""A deque's ends swapped (an ``append`` is moved to the front with ``insert(0, ...)``, which lists and deques have)."""


def _order_changes(node: ast.Call) -> Iterator[tuple[str, str]]:
    """``(operator, replacement)`` for each way the call could take, forget, keep or place the other element."""
    func, text = node.func, ast.unparse(node)
    if isinstance(func, ast.Name) and func.id == "next" and node.args and isinstance(node.args[0], ast.Call) \
            and isinstance(node.args[0].func, ast.Name) and node.args[0].func.id == "iter":
        yield "first -> last", text.replace("iter(", "reversed(", 1)
    if not isinstance(func, ast.Attribute):
        return
    owner = ast.unparse(func.value)
    args = ", ".join(ast.unparse(a) for a in node.args)
    if func.attr == "popitem":
        last = next((k.value for k in node.keywords if k.arg == "last"), None)
        oldest = isinstance(last, ast.Constant) and last.value is False
        yield ("oldest -> newest", f"{owner}.popitem(last=True)") if oldest else \
            ("newest -> oldest", f"{owner}.popitem(last=False)")
    elif func.attr == "pop" and len(node.args) <= 1 and not node.keywords:
        is_front = len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0
        if is_front or not node.args:
            yield ("front -> back", f"{owner}.pop()") if is_front else ("back -> front", f"{owner}.pop(0)")
    elif func.attr in ("popleft", "appendleft"):
        yield f"{func.attr} -> {_OTHER_END[func.attr]}", f"{owner}.{_OTHER_END[func.attr]}({args})"
    elif func.attr == "append" and len(node.args) == 1:
        yield "append -> at the front", f"{owner}.insert(0, {args})"
    elif func.attr == "setdefault" and len(node.args) == 2:
        key, value = (ast.unparse(a) for a in node.args)
        yield "setdefault -> the latest, last", f"({owner}.pop({key}, None), {owner}.setdefault({key}, {value}))[1]"


def order_mutants(module: str) -> list[OperatorMutant]:
    """The other element taken, forgotten, kept or placed: a bounded memory that forgets its newest instead of its
    oldest (``popitem``), the last of an ordered table taken for its first (``next(iter(...))``), a queue's other
    end, an element put in front instead of behind (``append``), a kept entry restarted and moved last
    (``setdefault``); and each operand of an ``and``/``or`` dropped (a condition of a rule left out: a newcomer
    that evicts itself). The first-order operators change none of these."""
    text = module_path(module).read_text()
    out: list[OperatorMutant] = []
    for function, node in _in_functions(ast.parse(text)):
        if isinstance(node, ast.Call):
            out += [_span(module, function, text, node, f"{_short(node)}: {operator}", f"({replacement})")
                    for operator, replacement in _order_changes(node)]
        elif isinstance(node, ast.BoolOp):
            for index, dropped in enumerate(node.values):
                rest = [_segment(text, v) for v in node.values if v is not dropped]
                kept = f" {_op(node.op)} ".join(f"({v})" for v in rest) if len(rest) > 1 else rest[0]
                out.append(_span(module, function, text, node, f"{_short(node)}: drop operand {_short(dropped)}",
                                 f"({kept})"))  # its own text: unparsed, a string in an f-string may take its quotes
    return out


def _ends_step(statement: ast.stmt) -> TypeGuard[ast.If]:
    return (isinstance(statement, ast.If) and not statement.orelse
            and isinstance(statement.body[-1], (ast.Raise, ast.Return)))


def _op(op: ast.AST) -> str:
    return {
        ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
        ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.And: "and", ast.Or: "or",
        ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//",
    }[type(op)]


def mutants_of(module: str) -> list[OperatorMutant]:
    """Every first-order mutant of the module's function bodies, in source order."""
    text = module_path(module).read_text()
    collector = _Collector(module, text)
    collector.visit(ast.parse(text))
    return collector.found


# -- the classes of bug the blind rounds planted that no operator above plants (issue 43) -----------------------------

def _segment(text: str, node: ast.AST) -> str:
    """``ast.get_source_segment``, from the lines split once (it splits the whole text at each call)."""
    assert isinstance(node, (ast.expr, ast.stmt))
    return _text_between(text, _start(text, node), _end(text, node))


def _text_between(text: str, start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source from ``start`` to ``end``, each a (line, character column)."""
    lines = _lines(text)
    (line, col), (end_line, end_col) = start, end
    if line == end_line:
        return lines[line - 1][col:end_col]
    return "\n".join((lines[line - 1][col:], *lines[line:end_line - 1], lines[end_line - 1][:end_col]))


def _between(text: str, first: ast.AST, second: ast.AST) -> str:
    """The source after ``first`` and before ``second`` (a comma, a key, parentheses, a line break)."""
    assert isinstance(first, (ast.expr, ast.stmt)) and isinstance(second, (ast.expr, ast.stmt))
    return _text_between(text, _end(text, first), _start(text, second))


def _start(text: str, node: ast.expr | ast.stmt) -> tuple[int, int]:
    return node.lineno, _column(text, node.lineno, node.col_offset)


def _end(text: str, node: ast.expr | ast.stmt) -> tuple[int, int]:
    assert node.end_lineno is not None and node.end_col_offset is not None
    return node.end_lineno, _column(text, node.end_lineno, node.end_col_offset)


def _functions(tree: ast.AST, scope: tuple[str, ...] = ()
               ) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function, method and nested function with its qualified name, in source order."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not isinstance(child, ast.ClassDef):
                yield ".".join((*scope, child.name)), child
            yield from _functions(child, (*scope, child.name))
        else:
            yield from _functions(child, scope)


def _own(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes below ``node`` that are its function's own, in source order: not a nested function's or class's (each
    is visited as its own function), not inside an f-string (a message; its inner positions are not reliable either),
    not an annotation (no behaviour)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.JoinedStr)):
            continue
        yield child
        if isinstance(child, ast.AnnAssign):
            yield from (n for part in (child.target, child.value) if part is not None for n in (part, *_own(part)))
            continue
        if isinstance(child, ast.arg):
            continue
        yield from _own(child)


def _body_nodes(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """``(function, node)`` for each node of each function body (its own: see :func:`_own`)."""
    for function, definition in _functions(tree):
        for statement in definition.body:
            yield function, statement
            yield from ((function, node) for node in _own(statement))


@cache
def _read_by_functions() -> frozenset[str]:
    """Every name a function of a spec module reads (the renderers of the generated docs left out: what only they read
    is documentation, not a rule), by itself or as an attribute (``settings.TIME_UNITS``)."""
    spec = ROOT / "spec"
    read: set[str] = set()
    for path in spec.rglob("*.py"):
        if "docs" not in path.relative_to(spec).parts:
            for _, node in _body_nodes(ast.parse(path.read_text())):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    read.add(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    read.add(node.attr)
    return frozenset(read)


def _tables(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """``(name, value)`` of each data table outside functions: a name (not a dunder) bound at module or class level to
    a string or to a tuple, list, set or dict display (perhaps in ``frozenset(...)`` or ``MappingProxyType(...)``):
    at class level always (an enum member's value, an error's condition: read through the class), at module level when
    a spec function reads the name. Accepted prefixes, error conditions, unit names: a rule that lives in a table is a
    rule; a table of prose only the docs read is not."""
    def visit(body: list[ast.stmt], scope: tuple[str, ...]) -> Iterator[tuple[str, ast.expr]]:
        for statement in body:
            if isinstance(statement, ast.ClassDef):
                yield from visit(statement.body, (*scope, statement.name))
            target = statement.targets[0] if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                else statement.target if isinstance(statement, ast.AnnAssign) else None
            value = statement.value if isinstance(statement, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(target, ast.Name) and value is not None and not target.id.startswith("__") \
                    and (scope or target.id in _read_by_functions()):
                yield ".".join((*scope, target.id)), value

    return visit(tree.body, ())


_TABLE_CALLS: Final = frozenset({"frozenset", "MappingProxyType", "tuple", "set", "dict"})


def _table_nodes(value: ast.expr) -> Iterator[ast.expr]:
    """The displays and string constants of a table, outermost first; nothing of any other expression."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        yield value
    elif isinstance(value, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
        yield value
        for child in ast.iter_child_nodes(value):
            if isinstance(child, ast.expr):
                yield from _table_nodes(child)
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _TABLE_CALLS:
        for argument in value.args:
            yield from _table_nodes(argument)


def _data_nodes(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """``(where, node)``: every function body's nodes, then every table's (``where`` is the function or the table)."""
    yield from _body_nodes(tree)
    for name, value in _tables(tree):
        yield from ((name, node) for node in _table_nodes(value))


def _is_text(node: ast.AST) -> TypeGuard[ast.Constant]:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _quoted(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _records_problem(statement: ast.stmt) -> bool:
    """How spec modules report a problem and go on: ``problems.append(...)`` (any list's) or ``yield ...``."""
    if not isinstance(statement, ast.Expr):
        return False
    value = statement.value
    return isinstance(value, (ast.Yield, ast.YieldFrom)) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("append", "add"))


def check_removal_mutants(module: str) -> list[OperatorMutant]:
    """A check removed: each ``if`` in a function body whose body ends the step (``raise``, ``return``, ``continue``)
    or records a problem, gone (replaced by ``pass``; one with an ``else`` or ``elif`` has its test made ``False``, so
    the rest still runs). Unlike a negated check, only an input that violates the rule sees it: a shard with no
    members accepted. An ``if`` whose whole body is one recorded problem is left out: dropping that statement is a
    first-order mutant already."""
    text = module_path(module).read_text()
    out: list[OperatorMutant] = []
    for function, node in _body_nodes(ast.parse(text)):
        if not isinstance(node, ast.If):
            continue
        last = node.body[-1]
        ends = isinstance(last, (ast.Raise, ast.Return, ast.Continue))
        if not (ends or (_records_problem(last) and (len(node.body) > 1 or node.orelse))):
            continue
        operator = f"remove check if {_short(node.test)}"
        out.append(_span(module, function, text, node.test, operator, "False") if node.orelse
                   else _span(module, function, text, node, operator, "pass"))
    return out


_NOT_ONE_KIND: Final = frozenset({"isinstance", "issubclass", "getattr", "setattr", "hasattr", "min", "max", "after"})
"""Calls whose adjacent arguments are never of one kind (an object and a type or a name), or whose order does not
matter (min, max, and spec.clock's ``after``: an instant and a duration, summed in whole units)."""


def _swapped(module: str, function: str, text: str, first: ast.expr, second: ast.expr, what: str
             ) -> OperatorMutant | None:
    one, two = _segment(text, first), _segment(text, second)
    if one == two:
        return None
    return _span(module, function, text, first, f"swap {what} {_short(first)} / {_short(second)}",
                 f"{two}{_between(text, first, second)}{one}", second)


def swap_mutants(module: str) -> list[OperatorMutant]:
    """Two values of one kind swapped: a call's adjacent positional arguments, a conditional expression's two
    branches (the writer's and the reader's texts of one error), and two adjacent string constants of a tuple or list
    display, or the string values of two adjacent dict entries (names, error texts), in a function body or a table
    (:func:`_tables`). Arguments of two constants of different types are never one kind, nor those of
    ``isinstance``-like calls; those of ``min``, ``max`` and ``after`` commute."""
    text = module_path(module).read_text()
    out: list[OperatorMutant | None] = []
    for where, node in _data_nodes(ast.parse(text)):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _NOT_ONE_KIND):
            for first, second in zip(node.args, node.args[1:]):
                if isinstance(first, ast.Starred) or isinstance(second, ast.Starred) or (
                        isinstance(first, ast.Constant) and isinstance(second, ast.Constant)
                        and type(first.value) is not type(second.value)):
                    continue
                out.append(_swapped(module, where, text, first, second, "arguments"))
        elif isinstance(node, ast.IfExp) and _segment(text, node.body) != _segment(text, node.orelse):
            out.append(_span(module, where, text, node, f"swap branches of {_short(node.test)}",
                           f"({_segment(text, node.orelse)} if {_segment(text, node.test)} else "
                           f"{_segment(text, node.body)})"))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Dict)):
            items = node.values if isinstance(node, ast.Dict) else node.elts
            spread = {i for i, key in enumerate(node.keys) if key is None} if isinstance(node, ast.Dict) else set()
            for index, (first, second) in enumerate(zip(items, items[1:])):
                if _is_text(first) and _is_text(second) and not {index, index + 1} & spread:
                    out.append(_swapped(module, where, text, first, second,
                                        "values" if isinstance(node, ast.Dict) else "elements"))
    return [m for m in out if m is not None]


def spelling_mutants(module: str) -> list[OperatorMutant]:
    """A string constant's spelling: each string constant with a letter, in a function body or a table
    (:func:`_tables`), with its case changed (all lower case -> upper, otherwise -> lower): an upper-case ``0X``
    prefix refused, a condition name or a key spelled otherwise. Docstrings, f-strings and annotations are not
    rules."""
    text = module_path(module).read_text()
    out: list[OperatorMutant] = []
    tree = ast.parse(text)
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and _is_text(node.value)}
    for where, node in _data_nodes(tree):
        value = node.value if _is_text(node) and id(node) not in docstrings else None
        if not isinstance(value, str) or not any(c.isalpha() for c in value):
            continue
        changed = value.upper() if value == value.lower() else value.lower()
        if changed != value:
            out.append(_span(module, where, text, node, f"{_quoted(value)} -> {_quoted(changed)}", repr(changed)))
    return out


def _round_to_int(module: str) -> list[OperatorMutant]:
    """``round -> int`` at each call in a function or class body (the cluster wire walks' family, its names kept)."""
    text = module_path(module).read_text()
    found: list[OperatorMutant] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = f"{scope}.{child.name}".lstrip(".") if isinstance(child, (ast.FunctionDef, ast.ClassDef)) else scope
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "round" and scope:
                found.append(_span(module, scope, text, child.func, f"round({ast.unparse(child.args[0])[:40]}) -> int",
                                   "int"))
            visit(child, inner)

    visit(ast.parse(text), "")
    return found


_OTHER_ROUNDING: Final = {"floor": "ceil", "ceil": "floor"}


def rounding_mutants(module: str) -> list[OperatorMutant]:
    """A number rounded the other way: ``round(x) -> int(x)`` (a duration truncated instead of rounded: WELCOME's
    ttl), ``a // b`` truncated (``int(a / b)``) or rounded up (``-(-a // b)``: a negative sub-millisecond time
    rounded away from zero), ``math.floor`` <-> ``math.ceil``, ``int(x)`` of arithmetic rounded (``round(x)``), and
    ``divmod`` truncating (a negative quotient towards zero, its remainder the dividend's sign)."""
    text = module_path(module).read_text()
    out = _round_to_int(module)
    for function, node in _body_nodes(ast.parse(text)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            left, right = _segment(text, node.left), _segment(text, node.right)
            out.append(_span(module, function, text, node, f"{_short(node)}: floor -> truncation",
                           f"int(({left}) / ({right}))"))
            out.append(_span(module, function, text, node, f"{_short(node)}: floor -> ceiling", f"(-(-({left}) // ({right})))"))
        elif not isinstance(node, ast.Call) or node.keywords:
            continue
        elif isinstance(node.func, (ast.Name, ast.Attribute)) and _rounding_name(node.func) in _OTHER_ROUNDING:
            other = _OTHER_ROUNDING[_rounding_name(node.func)]
            out.append(_span(module, function, text, node.func, f"{_short(node)}: {_rounding_name(node.func)} -> {other}",
                           _segment(text, node.func).rsplit(_rounding_name(node.func), 1)[0] + other))
        elif isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.BinOp):
            out.append(_span(module, function, text, node.func, f"{_short(node)}: int -> round", "round"))
        elif isinstance(node.func, ast.Name) and node.func.id == "divmod" and len(node.args) == 2:
            out.append(_span(module, function, text, node.func, f"{_short(node)}: divmod -> truncating",
                           "(lambda a, b: (int(a / b), a - b * int(a / b)))"))
    return out


def _rounding_name(func: ast.Name | ast.Attribute) -> str:
    """``floor`` for ``floor`` and ``math.floor``; a name that is no rounding otherwise."""
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func.value, ast.Name) and func.value.id == "math" else ""


def _statements(body: list[ast.stmt], in_loop: bool) -> Iterator[tuple[ast.stmt, bool]]:
    """Each statement of a function's own body, nested ones included, and whether a loop of it runs it again."""
    for statement in body:
        yield statement, in_loop
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        loop = in_loop or isinstance(statement, (ast.For, ast.AsyncFor, ast.While))
        yield from _statements(getattr(statement, "body", []), loop)
        yield from _statements(getattr(statement, "orelse", []), in_loop)
        yield from _statements(getattr(statement, "finalbody", []), in_loop)
        for part in (*getattr(statement, "handlers", []), *getattr(statement, "cases", [])):
            yield from _statements(part.body, in_loop)


def stale_mutants(module: str) -> list[OperatorMutant]:
    """A variable not brought up to date: each assignment to a plain name that binds it again (a parameter, or a
    name bound earlier in the function, or an assignment inside a loop) dropped, so the old value is used on: a retry
    with the stale expected revision, a prefix never stripped. (An attribute's assignment and ``+=`` are dropped by
    the first-order mutants already.)"""
    text = module_path(module).read_text()
    out: list[OperatorMutant] = []
    for function, definition in _functions(ast.parse(text)):
        arguments = definition.args
        parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                      arguments.vararg, arguments.kwarg) if a is not None}
        stores = [(n.lineno, n.col_offset, n.id) for n in _own(definition)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        for statement, in_loop in _statements(definition.body, False):
            targets = statement.targets if isinstance(statement, ast.Assign) else \
                [statement.target] if isinstance(statement, ast.AnnAssign) and statement.value is not None else []
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            name = targets[0].id
            again = name in parameters or any(n == name and (line, col) < (statement.lineno, statement.col_offset)
                                              for line, col, n in stores)
            if again or in_loop:
                out.append(_span(module, function, text, statement, f"stale {name}: drop {_short(statement)}", "pass"))
    return out


def _display(value: ast.expr) -> ast.Tuple | ast.List | ast.Set | ast.Dict | None:
    """The display a table's value is: itself, or the one argument of ``frozenset(...)``, ``tuple(...)``, ..."""
    if isinstance(value, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
        return value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _TABLE_CALLS \
            and len(value.args) == 1 and not value.keywords:
        return _display(value.args[0])
    return None


def table_entry_mutants(module: str) -> list[OperatorMutant]:
    """A table entry left out: each element of a table's tuple, list or set display, and each entry of its dict display
    (named by its key), removed with its comma, in each table (:func:`_tables`) of two entries or more: an error class
    left out of the peer symptoms (the ninth blind round's ``root_cause.PEER_SYMPTOMS``), a unit a parser no longer
    knows, a transition missing. A table whose dict display spreads another (``**``) is left out."""
    text = module_path(module).read_text()
    out: list[OperatorMutant] = []
    for name, value in _tables(ast.parse(text)):
        display = _display(value)
        if display is None or isinstance(display, ast.Dict) and None in display.keys:
            continue
        entries: list[tuple[ast.expr, ast.expr]] = [(key, item) for key, item in zip(display.keys, display.values)
                                                    if key is not None] if isinstance(display, ast.Dict) \
            else [(element, element) for element in display.elts]
        if len(entries) < 2:
            continue
        for index, (key, last) in enumerate(entries):
            (line, col), replacement = _start(text, key), ""
            if index + 1 < len(entries):  # up to the next entry
                end_line, end_col = _start(text, entries[index + 1][0])
            else:  # to its end, and its trailing comma
                end_line, end_col = _end(text, last)
                after = _lines(text)[end_line - 1][end_col:]
                end_col += len(after) - len(after.lstrip()) + 1 if after.lstrip().startswith(",") else 0
            if isinstance(display, ast.Tuple) and len(entries) == 2 and index == 0:  # (b) is no tuple: (b,)
                (end_line, end_col), rest = _end(text, entries[1][1]), _segment(text, entries[1][1])
                replacement = rest if _lines(text)[end_line - 1][end_col:].lstrip().startswith(",") else rest + ","
            out.append(OperatorMutant(module, name, f"drop entry {_short(key)} of {name}", line, end_line, col,
                                      end_col, replacement))
    return out


_RELEASES: Final = frozenset({"pop", "popitem", "popleft", "discard", "remove", "clear", "drop_buffer", "release",
                              "give_back", "forget"})
"""Calls that give back what a machine holds, as spec/ names them: an entry taken out of a table of what is held
(``pop``, ``discard``, ``clear``, ...), a buffer dropped, and the give-back methods the machines define (``release``,
``give_back``, ``forget``; the runtime calls them now). No ``close``: a sans-IO machine holds no handle to close."""


def _is_release(statement: ast.stmt) -> bool:
    """A statement that gives something back: a release call (:data:`_RELEASES`) on its own, or an amount added back
    to an attribute (``self.permits_available += permits``; not a constant step, as a sequence number's ``+= 1``, nor
    a display, as elements gathered)."""
    if isinstance(statement, ast.AugAssign):
        return isinstance(statement.target, ast.Attribute) and isinstance(statement.op, ast.Add) \
            and not isinstance(statement.value, (ast.Constant, ast.Tuple, ast.List))
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) \
        and isinstance(statement.value.func, ast.Attribute) and statement.value.func.attr in _RELEASES


def release_mutants(module: str) -> list[OperatorMutant]:
    """A release forgotten: in a function body, each statement that gives something back (:func:`_is_release`)
    replaced by ``pass`` (a reader leaving with an open buffer whose permits never return: the ninth blind round's
    ``WriterMachine._leave``; the first-order family drops the same statements, so :func:`every_mutant` credits it),
    and each ``pop`` of a key whose value is used kept instead (``X.pop(k)`` -> ``X[k]``, ``X.pop(k, d)`` ->
    ``X.get(k, d)``): what was given back is still held, so it is given back again (permits of one written DATA
    returned twice), or what was released is still found (a request answered twice)."""
    text = module_path(module).read_text()
    out: list[OperatorMutant] = []
    unused: set[int] = set()  # the calls that are a statement of their own: their value is not used
    for function, node in _body_nodes(ast.parse(text)):
        if isinstance(node, ast.Expr):
            unused.add(id(node.value))
        if isinstance(node, ast.stmt) and _is_release(node):
            out.append(_span(module, function, text, node, f"forget release {_short(node)}", "pass"))
        elif isinstance(node, ast.Call) and id(node) not in unused and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "pop" and 1 <= len(node.args) <= 2 and not node.keywords:
            owner, arguments = _segment(text, node.func.value), [_segment(text, a) for a in node.args]
            kept = f"{owner}[{arguments[0]}]" if len(arguments) == 1 else f"{owner}.get({', '.join(arguments)})"
            out.append(_span(module, function, text, node, f"forget release, keep {_short(node)}", f"({kept})"))
    return out


_NORMALISING_METHODS: Final = frozenset({"strip", "lstrip", "rstrip", "lower", "upper", "casefold", "title"})
"""Methods that return their receiver normalised (white space trimmed, case folded): dropped, the receiver is used as
given."""

_ORDERING_FUNCTIONS: Final = {"sorted": 0, "reversed": 0, "np.sort": 0, "numpy.sort": 0, "os.path.normpath": 0,
                              "unicodedata.normalize": 1}
"""Functions that return one argument (at this position) ordered or normalised: dropped, the argument is used as
given."""


def normalising_mutants(module: str) -> list[OperatorMutant]:
    """A normalising or ordering call dropped: in a function body, a call that returns its receiver normalised
    (:data:`_NORMALISING_METHODS`: ``configured.strip()`` -> ``configured``, so a blank secret matches) or an argument
    ordered or normalised (:data:`_ORDERING_FUNCTIONS`: ``sorted(shards.items())`` -> ``shards.items()``, a snapshot
    listed in the order its shards were first seen; ``key=`` and ``reverse=`` go with it) replaced by that receiver
    or argument (the tenth blind round's misses). An ordering statement (``x.sort()``) is left out: dropping it is a
    first-order mutant already."""
    text = module_path(module).read_text()
    calls = ((function, node, _normalised(node)) for function, node in _body_nodes(ast.parse(text))
             if isinstance(node, ast.Call))
    return [_span(module, function, text, node, f"drop {found[1]} in {_short(node)}", f"({_segment(text, found[0])})")
            for function, node, found in calls if found is not None]


def _normalised(call: ast.Call) -> tuple[ast.expr, str] | None:
    """What ``call`` normalises or orders (its receiver or argument) and how to name the call, or None."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _NORMALISING_METHODS:
        return func.value, f".{func.attr}()"
    at = _ORDERING_FUNCTIONS.get(ast.unparse(func)) if isinstance(func, (ast.Name, ast.Attribute)) else None
    if at is None or len(call.args) <= at or isinstance(call.args[at], ast.Starred):
        return None
    return call.args[at], f"{ast.unparse(func)}(...)"


FAMILIES: Final[tuple[Callable[[str], list[OperatorMutant]], ...]] = (
    mutants_of, split_mutants, order_mutants, rounding_mutants,
    check_removal_mutants, swap_mutants, spelling_mutants, stale_mutants, table_entry_mutants, release_mutants,
    normalising_mutants)
"""Every family, in the order :func:`every_mutant` plants them: the first-order operators and the older families as
the corpora called them before, then the classes of bug the blind rounds planted."""


def every_mutant(module: str) -> list[OperatorMutant]:
    """Every family's mutants of ``module`` (:data:`FAMILIES`, in order), each resulting source once: a mutant that
    plants the same text as an earlier one is the same bug, which the selection need not try twice."""
    original = module_path(module).read_text()
    seen: set[str] = set()
    out: list[OperatorMutant] = []
    for family in FAMILIES:
        for mutant in family(module):
            planted = mutant.source(original)
            if planted not in seen:
                seen.add(planted)
                out.append(mutant)
    return out


def at_import(mutants: Sequence[OperatorMutant]) -> list[OperatorMutant]:
    """The mutants outside every function body (a module's or a class's table, a condition's name): run only at
    import, so on no walk's traced lines."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for module in {m.module for m in mutants}:
        spans[module] = [(node.lineno, node.end_lineno or node.lineno) for node in ast.walk(ast.parse(
            module_path(module).read_text())) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [m for m in mutants if not any(first <= m.line <= last for first, last in spans[m.module])]


class _MutatedSource(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, module: str, source: str) -> None:
        self.module = module
        self.text = source

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.module:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=str(module_path(fullname)))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__file__ = str(module_path(self.module))
        exec(compile(self.text, module.__file__, "exec"), module.__dict__)


class PlantedSource(Protocol):
    """A change of one module's source: an :class:`OperatorMutant`, or a catalogue's realistic bug
    (:class:`conformance.mutation.Mutant`)."""

    @property
    def module(self) -> str: ...

    def source(self, original: str) -> str: ...


@contextmanager
def fresh_modules(prefixes: Sequence[str], mutant: PlantedSource | None = None) -> Iterator[None]:
    """Inside: every module under ``prefixes`` is imported anew (the mutant's module from its mutated
    source); after: the process's own modules are back, untouched."""
    kept = {name: module for name, module in sys.modules.items() if name.startswith(tuple(prefixes))}
    for name in kept:
        del sys.modules[name]
    finder = None
    if mutant is not None:
        finder = _MutatedSource(mutant.module, mutant.source(module_path(mutant.module).read_text()))
        sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.startswith(tuple(prefixes))]:
            del sys.modules[name]
        sys.modules.update(kept)


class WalkTimeout(BaseException):
    """A walk ran past its time limit: on a loaded machine that may be load, not the mutant, so it is no kill. A
    BaseException, as KeyboardInterrupt is: the code a walk runs may not catch it (``except Exception``) and go on."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise WalkTimeout(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


Runner = Callable[[Any], Any]
"""Runs one walk and returns its answers as plain JSON values (the same the vectors record)."""


def lines_run(runner: Runner, walk: Any, files: set[str]) -> tuple[Any, set[tuple[str, int]]]:
    """The walk's answers on the unmutated spec and the (file, line) pairs it ran in ``files`` (on any thread it started)."""
    seen: set[tuple[str, int]] = set()

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename not in files:
            return None
        if event == "line":
            seen.add((frame.f_code.co_filename, frame.f_lineno))
        return trace

    sys.settrace(trace)
    threading.settrace(trace)  # and the threads the walk starts (a service's reactor, say)
    try:
        answers = runner(walk)
    finally:
        threading.settrace(None)  # type: ignore[arg-type,unused-ignore]
        sys.settrace(None)
    return answers, seen


@dataclass(frozen=True, slots=True)
class Selection:
    kept: list[int]
    """Indices of the walks kept, in the order they were first needed."""
    killed_by: dict[str, int]
    """Mutant name -> index of the walk that tells it apart."""
    survivors: list[str]
    """Mutants no candidate walk tells apart (equivalent, unreachable through the interface, or a gap)."""
    broken: list[str]
    """Mutants whose module does not even import: any walk tells them apart, none is kept for them."""
    timed_out: list[str] = field(default_factory=list)
    """Mutants on which a walk ran past its time limit twice (the second time with the limit doubled) before any walk
    told them apart: a loaded machine fakes a hang, so a time limit is never a kill; neither told apart nor a survivor."""


def _answers(runner: Runner, walk: Any, seconds: float) -> Any:
    """The runner's answers to ``walk``, or what it raised; WalkTimeout only when it ran past ``seconds`` twice (the
    second time with twice the limit)."""
    for limit in (seconds, 2 * seconds):
        try:
            with time_limit(limit):
                return runner(walk)
        except WalkTimeout:
            continue
        except Exception as error:  # noqa: BLE001 - a crash is an answer the spec never gives
            return f"raised {type(error).__name__}"
    raise WalkTimeout(f"no answer within {seconds} s, nor within {2 * seconds} s")


class LeftoverThreadStopped(SystemExit):
    """Raised inside a thread a planted mutant left running (:func:`stop_leftover_threads`); a SystemExit, so the
    thread ends without a traceback unless its own code reports it."""


THREAD_GRACE_S: Final = 1.0
"""How long a thread a planted mutant started may take to end on its own, and then once stopped, before it is left."""


def stop_leftover_threads(before: Collection[threading.Thread], grace_s: float = THREAD_GRACE_S) -> list[str]:
    """End every thread started since ``before`` that still runs, and name those that would not end.

    A mutant's runner closes what it started, but a thread spinning in a mutated loop (a service's poller in a frame
    reader that never consumes its bytes) outlives any close: left running, each such thread takes its share of the
    interpreter from every later walk, until walks run past their limits and a selection stalls. So after a mutant's
    walks, a thread still running is given :data:`grace_s` to end, then has :class:`LeftoverThreadStopped` raised in
    it (``PyThreadState_SetAsyncExc``: delivered at its next bytecode, which a spinning loop reaches at once)."""
    left = [t for t in threading.enumerate() if t not in before and not isinstance(t, threading._DummyThread)
            and t is not threading.current_thread()]
    deadline = time.monotonic() + grace_s
    for thread in left:
        thread.join(max(0.0, deadline - time.monotonic()))
    running = [t for t in left if t.is_alive() and t.ident is not None]
    for thread in running:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident or 0),
                                                   ctypes.py_object(LeftoverThreadStopped))
    deadline = time.monotonic() + grace_s
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in running if t.is_alive()]


IMPORT_LIMIT_S: Final = 30.0
"""How long planting a mutant (importing the runner afresh) may take: a mutant that loops at import (a variable a
``while`` at module level no longer moves on) would hold a selection for ever."""

Carried = tuple[Any, Any]
"""A walk an earlier corpus kept and the answers it recorded for it (None: the corpus records none to compare)."""


def canonical(value: Any) -> str:
    """A JSON value's canonical text: tuples and lists alike, keys in order (how a walk read back from a file and one
    generated anew are compared)."""
    return json.dumps(value, sort_keys=True, default=repr)


def carried_indices(walks: Sequence[Any], expected: Sequence[Any], carried: Sequence[Carried]) -> list[int]:
    """The indices of the candidates an earlier corpus kept: equal to one of its walks, and answered as it recorded
    (the spec still gives the same answers), in the earlier corpus's order, each once."""
    index_of: dict[str, int] = {}
    for index, walk in enumerate(walks):
        index_of.setdefault(canonical(walk), index)
    found: list[int] = []
    for walk, answers in carried:
        at = index_of.get(canonical(walk))
        if at is not None and at not in found and (answers is None or canonical(answers) == canonical(expected[at])):
            found.append(at)
    return found


@dataclass(frozen=True, slots=True)
class Outcomes:
    """What planting each mutant showed, shared by the passes of one selection, so a pass that tries the same mutant
    on the same walk again reuses the answer (and a walk that ran past its limit is not run again)."""

    told_apart: dict[tuple[OperatorMutant, int], bool | None] = field(default_factory=dict)
    """(mutant, walk index) -> whether the walk tells it apart (None: past its time limit twice)."""
    planted: set[OperatorMutant] = field(default_factory=set)
    broken: set[OperatorMutant] = field(default_factory=set)
    hung: set[OperatorMutant] = field(default_factory=set)
    """Mutants whose import ran past :data:`IMPORT_LIMIT_S`, or a walk past its limit twice: timed out once, tried on
    no other walk in any pass (a mutant that hangs one walk likely hangs the rest, each at the cost of the limit)."""


def select(walks: Sequence[Any], load_runner: Callable[[], Runner], prefixes: Sequence[str],
           mutants: Sequence[OperatorMutant], per_walk_s: float = 5.0,
           progress: Callable[[str], None] = lambda _: None, max_tries: int | None = None,
           traced: bool = True, carried: Sequence[Carried] = (), outcomes: Outcomes | None = None) -> Selection:
    """Greedy: for each mutant, the walks already kept first, then the others that run its lines; the
    first walk whose answers differ from the spec's kills it and is kept (a walk past ``per_walk_s`` is run once more
    with the limit doubled; past that too, the mutant is ``timed_out`` and tried on no other walk, in no later pass:
    never killed, as load fakes a hang; the threads a mutant's walks left running are stopped after them,
    :func:`stop_leftover_threads`). ``max_tries``: a mutant no walk
    of that many tells apart is a survivor (walks that cost a server each cannot all be tried on every one).
    ``traced=False``: every walk is a candidate for every mutant (for a runner whose spec code runs in threads
    the line tracer does not see, such as a gRPC server's). ``carried``: the walks earlier corpora kept
    (:func:`carried_indices`) are kept from the start and tried first, so a re-selection never loses one to a newer
    candidate that tells the same mutant apart: it only adds.

    One selection is a fixed point: when a pass keeps new walks, it is run again with every walk it kept carried, in
    the order of their candidates (as a corpus records them), until a pass adds none, so a selection carrying what
    this one kept gives this one's answer (an earlier mutant is not credited the second time with a walk a later one
    added). ``outcomes`` (shared by the passes, and with a caller's further selections over the same walks) keeps a
    pass from planting a mutant again for walks it was tried on."""
    runner = load_runner()
    files = {str(module_path(m.module)) for m in mutants}
    expected: list[Any] = []
    covering: list[set[tuple[str, int]]] = []
    for walk in walks:
        answers, seen = lines_run(runner, walk, files) if traced else (runner(walk), set())
        expected.append(answers)
        covering.append(seen)
    known = Outcomes() if outcomes is None else outcomes

    def told_apart_by(mutant: OperatorMutant, order: Sequence[int]) -> int | str | None:
        """The first walk of ``order`` that tells ``mutant`` apart, "broken", "timed out" or None (a survivor)."""
        with ExitStack() as planted:
            planted_runner: list[Runner] = []
            before = set(threading.enumerate())

            @planted.callback  # the first pushed, so the last run: once the mutated modules are gone
            def stop_its_threads() -> None:
                left = stop_leftover_threads(before, THREAD_GRACE_S)
                if left:
                    progress(f"{mutant.name}: {len(left)} threads it started would not stop: {', '.join(left)}")

            def plant() -> str | None:
                """Plant the mutant: None, or why no walk can be tried on it ("broken", or "timed out": its import
                ran past the time limit, as a loop at import that never ends does; never a kill)."""
                known.planted.add(mutant)
                planted.enter_context(fresh_modules(prefixes, mutant))
                try:
                    with time_limit(IMPORT_LIMIT_S):
                        planted_runner.append(load_runner())
                except WalkTimeout:
                    known.hung.add(mutant)
                except Exception:  # noqa: BLE001 - a mutant that breaks the import is told apart by any walk
                    known.broken.add(mutant)
                return "broken" if mutant in known.broken else "timed out" if mutant in known.hung else None

            if mutant in known.broken or mutant in known.hung:
                return "broken" if mutant in known.broken else "timed out"
            unplanted = None if mutant in known.planted else plant()
            if unplanted is not None:
                return unplanted
            for index in order:
                if (mutant, index) not in known.told_apart:
                    unplanted = None if planted_runner else plant()
                    if unplanted is not None:
                        return unplanted
                    try:
                        answers = _answers(planted_runner[0], walks[index], per_walk_s)
                        known.told_apart[(mutant, index)] = answers != expected[index]
                    except WalkTimeout:
                        known.told_apart[(mutant, index)] = None
                told = known.told_apart[(mutant, index)]
                if told is None:
                    known.hung.add(mutant)  # not evidence either way; its further walks would likely hang too
                    return "timed out"
                if told:
                    return index
        return None

    def one_pass(kept: list[int]) -> Selection:
        killed_by: dict[str, int] = {}
        survivors: list[str] = []
        broken: list[str] = []
        timed_out: list[str] = []
        for number, mutant in enumerate(mutants, 1):
            path = str(module_path(mutant.module))
            span = {(path, line) for line in range(mutant.line, mutant.end_line + 1)}
            candidates = [i for i in range(len(walks)) if covering[i] & span or not traced]
            order = [i for i in kept if i in candidates] + [i for i in candidates if i not in kept]
            found = told_apart_by(mutant, order[:max_tries] if max_tries is not None else order)
            if found is None:
                survivors.append(mutant.name)
            elif isinstance(found, str):
                (broken if found == "broken" else timed_out).append(mutant.name)
            else:
                killed_by[mutant.name] = found
                if found not in kept:
                    kept.append(found)
            if number % 50 == 0:
                progress(f"{number}/{len(mutants)} mutants, {len(killed_by)} told apart, {len(kept)} walks kept")
        return Selection(kept, killed_by, survivors, broken, timed_out)

    start = carried_indices(walks, expected, carried)
    while True:
        chosen = one_pass(list(start))
        if set(chosen.kept) <= set(start):
            return chosen
        start = sorted(chosen.kept)


def select_all(walks: Sequence[Any], load_runner: Callable[[], Runner], prefixes: Sequence[str],
               mutants: Sequence[OperatorMutant], progress: Callable[[str], None] = lambda _: None,
               carried: Sequence[Carried] = (), per_walk_s: float = 5.0) -> Selection:
    """``select`` traced, then untraced for the survivors on no walk's lines (what runs at import, such as protobuf
    descriptors built by a module's top level, or a class's constants, is on none: those are tried on every walk); no
    limit of tries; the
    ``carried`` walks kept from the start of both. A fixed point as ``select`` is: while the two keep a walk not
    carried, both are run again carrying every walk they kept, in the order of their candidates."""
    runner = load_runner()
    files = {str(module_path(m.module)) for m in mutants}
    ran: set[tuple[str, int]] = set()
    for walk in walks:
        ran |= lines_run(runner, walk, files)[1]
    known = Outcomes()
    while True:
        traced = select(walks, load_runner, prefixes, mutants, per_walk_s, progress=progress, carried=carried,
                        outcomes=known)
        again = [m for m in mutants if m.name in set(traced.survivors)
                 and not any((str(module_path(m.module)), line) in ran for line in range(m.line, m.end_line + 1))]
        untraced = select(walks, load_runner, prefixes, again, per_walk_s, progress=progress, traced=False,
                          carried=carried, outcomes=known)
        retried = {m.name for m in again}
        chosen = Selection(traced.kept + [i for i in untraced.kept if i not in traced.kept],
                           traced.killed_by | untraced.killed_by,
                           [n for n in traced.survivors if n not in retried] + untraced.survivors,
                           traced.broken + untraced.broken, traced.timed_out + untraced.timed_out)
        if {canonical(walks[i]) for i in chosen.kept} <= {canonical(walk) for walk, _ in carried}:
            return chosen
        carried = [(walks[i], None) for i in sorted(chosen.kept)]


# -- a selection of what a record has not judged yet (issue 43) -------------------------------------------------------

def _planted_lines(mutant: OperatorMutant, text: str) -> str | None:
    """The lines ``mutant`` changes in ``text``, changed (None: ``text`` has no such lines)."""
    lines = text.splitlines(keepends=True)
    if mutant.end_line > len(lines):
        return None
    return lines[mutant.line - 1][:mutant.col] + mutant.replacement + lines[mutant.end_line - 1][mutant.end_col:]


def judged_by(mutants: Sequence[OperatorMutant], names: Sequence[str],
              earlier: Callable[[str], str | None] = lambda _: None) -> dict[OperatorMutant, str]:
    """Which of ``mutants`` a record's ``names`` judge, each with the name that judges it (a name judges one mutant; one
    listed twice, two). A mutant is judged by its own name; else by the name it had before its module's lines moved
    (the same module, function and operator at another line) when it plants the same text at that line of
    ``earlier(module)``, the source the record judged (None: unknown, so no moved name judges it); else by its rule
    (:func:`rule_of`: a name without its line, as records list what they did not tell apart)."""
    left = Counter(names)
    found: dict[OperatorMutant, str] = {}
    for mutant in mutants:
        if left[mutant.name] > 0:
            found[mutant] = mutant.name
            left[mutant.name] -= 1
    moved: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for name in left.elements():
        parts = name.split(":", 3)
        if len(parts) == 4 and parts[2].isdigit():
            moved.setdefault((parts[0], parts[1], parts[3][1:]), []).append((name, int(parts[2])))
    now = {m.module: module_path(m.module).read_text() for m in mutants}
    sources = {module: earlier(module) for module in now}
    for mutant in mutants:
        before = sources[mutant.module]
        if mutant in found or before is None:
            continue
        for name, line in moved.get((mutant.module, mutant.function, mutant.operator), []):
            at = replace(mutant, line=line, end_line=line + mutant.end_line - mutant.line)
            if left[name] > 0 and _planted_lines(at, before) == _planted_lines(mutant, now[mutant.module]):
                found[mutant] = name
                left[name] -= 1
                break
    for mutant in mutants:
        if mutant not in found and left[rule_of(mutant.name)] > 0:
            found[mutant] = rule_of(mutant.name)
            left[found[mutant]] -= 1
    return found


def record_problems(mutants: Sequence[OperatorMutant], told_apart: Collection[str], listed: Sequence[str],
                    unnamed: int = 0) -> list[str]:
    """What makes a corpus's record of a selection stale, by rule (:func:`rule_of`: no line, so code that only moves
    keeps its record): a mutant of ``mutants`` (the spec's now) the record does not judge, beyond the ``unnamed`` ones it
    counts without naming (the broken, say), or a rule it names that no mutant has now. A record judges a mutant by a
    name it tells apart (``told_apart``, keyed as :attr:`Selection.killed_by` is: one name for every mutant of that
    name, two constants of one line say), or by a rule it ``listed`` (survivors, say: one mutant each)."""
    per_name = Counter(m.name for m in mutants)
    one_line: dict[str, int] = {}  # a name whose line moved: as many as its rule has on one line now
    for (rule, _), count in Counter((rule_of(m.name), m.line) for m in mutants).items():
        one_line[rule] = max(one_line.get(rule, 1), count)
    now = Counter(rule_of(m.name) for m in mutants)
    named = Counter(rule_of(name) for name in told_apart
                    for _ in range(per_name[name] or one_line.get(rule_of(name), 1))) + Counter(listed)
    missing, gone = now - named, sorted(set(named) - set(now))
    problems = [f"names {len(gone)} rules no mutant has now (e.g. `{gone[0]}`)"] if gone else []
    if missing.total() > unnamed:
        problems.append(f"leaves {missing.total() - unnamed} of the spec's mutants now unjudged "
                        f"(e.g. `{next(iter(missing))}`)")
    return problems


def selection_problems(mutants: Sequence[OperatorMutant], selection: Mapping[str, Any]) -> list[str]:
    """:func:`record_problems` of a selection recorded by module (``modules``: each with its ``broken`` count and the
    rules it lists as ``survivors``, ``timedOut`` or ``unconfirmed``), against ``mutants``, the spec's now."""
    modules = selection["modules"].values()
    return record_problems(mutants, selection["killedBy"].keys(),
                           [rule for f in modules for key in ("survivors", "timedOut", "unconfirmed")
                            for rule in f.get(key, ())],
                           sum(f["broken"] for f in modules))


def committed_source(record: Path) -> Callable[[str], str | None]:
    """A module's source as of the last commit that wrote ``record`` (None where git has none): what the record's names
    were judged on, if only a selection writes it."""
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%H", "--", str(record)],
                            capture_output=True, text=True, check=True).stdout.strip()

    def source(module: str) -> str | None:
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{module_path(module).relative_to(ROOT)}"],
                               capture_output=True, text=True)
        return shown.stdout if commit and shown.returncode == 0 else None

    return source


def merged(earlier: Selection, judged: Mapping[OperatorMutant, str], later: Selection) -> Selection:
    """``earlier``'s verdicts of the ``judged`` mutants, under their names now, and ``later``'s of the others; the walks
    ``earlier`` kept, then those ``later`` adds. A name listed once judges one mutant, even when it is told apart too
    (two mutants of one name, one told apart and one not)."""
    def named(listed: Sequence[str]) -> list[str]:
        left = Counter(listed)
        out: list[str] = []
        for mutant, name in judged.items():
            if left[name] > 0:
                left[name] -= 1
                out.append(mutant.name)
        return out

    return Selection(list(earlier.kept) + [i for i in later.kept if i not in earlier.kept],
                     {m.name: earlier.killed_by[name] for m, name in judged.items() if name in earlier.killed_by}
                     | later.killed_by,
                     named(earlier.survivors) + later.survivors, named(earlier.broken) + later.broken,
                     named(earlier.timed_out) + later.timed_out)


def select_unjudged(walks: Sequence[Any], load_runner: Callable[[], Runner], prefixes: Sequence[str],
                    mutants: Sequence[OperatorMutant], earlier: Selection, judged: Mapping[OperatorMutant, str],
                    **options: Any) -> Selection:
    """:func:`select` over the ``mutants`` an ``earlier`` selection (a corpus's record) did not judge (``judged``:
    :func:`judged_by` of its names), every walk it kept carried first: a new family, or lines that moved, cost only
    what is new, and no walk is lost (it only adds). ``options``: :func:`select`'s. The result is :func:`merged`."""
    fresh = [m for m in mutants if m not in judged]
    later = select(walks, load_runner, prefixes, fresh, carried=[(walks[i], None) for i in earlier.kept], **options)
    return merged(earlier, judged, later)


def rule_of(name: str) -> str:
    """``module:function:line: operator`` -> ``module-tail.function: operator`` (no line number): how a corpus
    names the rule a kept input is for, stable when lines move."""
    module, function, _line, operator = name.split(":", 3)
    return f"{module.rsplit('.', 1)[-1]}.{function}: {operator.strip()}"


def import_runner(module: str, attribute: str) -> Callable[[], Runner]:
    """A loader for ``select``: the runner is looked up afresh after every purge."""

    def load() -> Runner:
        runner: Runner = getattr(importlib.import_module(module), attribute)
        return runner

    return load


def judgement(rule: str, judged: Mapping[str, tuple[str, str]]) -> tuple[str, str]:
    """``(class, reason)`` of a survivor ``module.function: operator`` in a report: ``judged`` maps a
    ``module.function`` (also its methods) or a ``module.function: operator`` prefix to ``("equivalent", why)`` or
    ``("unreachable", the input the interface lacks)``; the longest match wins; the rest are ``("gap", "")``."""
    function = rule.split(":", 1)[0]
    matches = [key for key in judged if function == key or function.startswith(key + ".")
               or (":" in key and rule.startswith(key))]
    return judged[max(matches, key=len)] if matches else ("gap", "")


def score(mutants: int, told_apart: int, broken: int, equivalent: int) -> str:
    """The figure a corpus drives up: told apart / (mutants - broken - equivalent), as a percentage."""
    judged = mutants - broken - equivalent
    return f"{100 * told_apart / judged:.0f}%" if judged else "-"
