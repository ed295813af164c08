"""Positional constructors for the frozen, keyword-only dataclasses built once per message.

The public constructors parse keywords and go through ``object.__setattr__`` for every field (about
1.3 µs for a DATA message); the codec, the writer and the reader build one or two such objects per
DATA, so they use a constructor that stores the same fields, in declaration order, the way the
frozen dataclass's own ``__init__`` stores them (0.5 µs). Only for classes without ``__post_init__``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def positional(cls: type[T]) -> Callable[..., T]:
    """A constructor of ``cls`` taking every field positionally, in declaration order."""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} checks its fields in __post_init__: use its own constructor")
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    namespace |= {f"set_{name}": getattr(cls, name).__set__ for name in names}
    stores = "".join(f"    set_{name}(m, {name})\n" for name in names)
    exec(compile(f"def build({', '.join(names)}):\n    m = new(cls)\n{stores}    return m\n",
                 f"<positional {cls.__name__}>", "exec"), namespace)
    build: Callable[..., T] = namespace["build"]
    return build
