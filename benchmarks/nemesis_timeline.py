"""One self-contained HTML page per nemesis run: the faults as bars, then committed and durable
transactions over time (their gap is the lag) with the last heal and every restart of a Spark driver marked,
then the checker's verdict. No scripts, no external files."""

from __future__ import annotations

import html
from typing import Any, Final

WIDTH: Final = 900
ROW: Final = 18


def _x(t: float, end: float) -> float:
    return 60 + (WIDTH - 80) * t / max(end, 1e-9)


def timeline_html(history: dict[str, Any]) -> str:
    transactions = [tx for tx in history["transactions"] if tx["committed"]]
    observations = history["observations"]
    end = max([o["t"] for o in observations] + [tx["t"] for tx in transactions] + [1.0])
    kinds = sorted({f["fault"] for f in history["faults"]})
    parts = []
    for row, kind in enumerate(kinds):
        y = 20 + row * ROW
        parts.append(f'<text x="2" y="{y + 12}" font-size="11">{html.escape(kind)}</text>')
        for f in history["faults"]:
            if f["fault"] == kind:
                x0, x1 = _x(f["start"], end), _x(f["heal"], end)
                what = f" ({f['jump_s']:+d} s)" if "jump_s" in f else ""
                parts.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(1.0, x1 - x0):.1f}" height="{ROW - 4}" '
                             f'fill="#d9534f"><title>{html.escape(kind)}{what}: {f["start"]} s to {f["heal"]} s'
                             f'</title></rect>')
                if what:
                    parts.append(f'<text x="{x1 + 3:.1f}" y="{y + 12}" font-size="10">{what.strip()}</text>')
    top = 45 + len(kinds) * ROW
    height = 200
    total = max(1, len(transactions))

    def y_of(count: int) -> float:
        return top + height - height * count / total

    committed = [(tx["t"], i + 1) for i, tx in enumerate(transactions)]
    durable = []
    for o in observations:
        told = o.get("reported")
        numbers = list(told.values()) if isinstance(told, dict) else [told]
        number = None if None in numbers else min(numbers, default=None)  # with several origins: all of them
        if number is not None:
            durable.append((o["t"], sum(1 for tx in transactions if tx["lsn_after"] <= number)))
    for points, colour, label in ((committed, "#337ab7", "committed"), (durable, "#5cb85c", "durable (reported)")):
        if points:
            path = " ".join(f"{_x(t, end):.1f},{y_of(c):.1f}" for t, c in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2">'
                         f'<title>{label}</title></polyline>')
    marks = [(history["last_heal_s"], "last heal + 2 s", "#333")] + [(e["t"], "driver exit", "#f0ad4e")
                                                                 for e in history.get("driver_exits", [])]
    for i, (t, label, colour) in enumerate(marks):  # labels one under another: marks may be close
        x = _x(t, end)
        parts.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{top + height}" stroke="{colour}" '
                     f'stroke-dasharray="4 3"><title>{label} at {t:.1f} s</title></line>'
                     f'<text x="{x + 2:.1f}" y="{top - 8 + 11 * i}" font-size="10" fill="{colour}">{label}</text>')
    parts.append(f'<text x="2" y="{top + 10}" font-size="11">transactions</text>')
    parts.append(f'<text x="{WIDTH - 300}" y="{top + height + 16}" font-size="11" fill="#337ab7">committed</text>'
                 f'<text x="{WIDTH - 220}" y="{top + height + 16}" font-size="11" fill="#5cb85c">durable (reported); '
                 'the gap is the lag</text>')
    for second in range(0, int(end) + 1, 10 * (1 + int(end) // 150)):  # at most about 15 labels
        parts.append(f'<text x="{_x(second, end):.1f}" y="{top + height + 30}" font-size="10">{second} s</text>')
    verdict = history["verdict"]
    rows = "".join(f"<tr><td>{'PASS' if p['passed'] else 'FAIL'}</td><td>{html.escape(name)}</td>"
                   f"<td>{html.escape('; '.join(p['problems']))}</td></tr>" for name, p in verdict["properties"].items())
    svg = f'<svg width="{WIDTH}" height="{top + height + 40}" xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>'
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>nemesis seed {history['seed']}</title></head>"
            f"<body style='font-family:sans-serif'><h1>nemesis seed {history['seed']}: "
            f"{'PASS' if verdict['passed'] else 'FAIL'}</h1><p>{verdict['committed']} committed transactions, "
            f"{verdict['versions']} table versions; caught up {history['caught_up_s']} s after the last heal "
            f"(at {history['last_heal_s']:.1f} s)</p>{svg}<table border='1' cellpadding='4'>{rows}</table></body></html>")
