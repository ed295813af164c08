"""Markdown pieces shared by the generated specifications (``python -m spec.docs``)."""

from __future__ import annotations

from typing import Iterable, Sequence


def cell(value: object) -> str:
    """A table cell: None is absent, booleans as protobuf and JSON write them, pipes escaped."""
    text = "absent" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return text.replace("|", "\\|")


def table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def anchor(name: str) -> str:
    """An anchor a case's or vector's ``specRef`` can point at (``docs/spec/<doc>.md#name``)."""
    return f'<a id="{name}"></a>\n'


def mermaid_states(edges: dict[tuple[str, str], set[str]]) -> str:
    """A ``stateDiagram-v2`` with one arrow per (source, target), labelled with its events."""
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += [f"    {source} --> {target}: {', '.join(sorted(events))}"
              for (source, target), events in sorted(edges.items())]
    return "\n".join(lines + ["```"]) + "\n"
