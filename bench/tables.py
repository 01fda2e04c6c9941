"""The figure tables of docs/performance.md, written between two markers from a results file (a test checks they agree)."""

from __future__ import annotations

from pathlib import Path

MET = {True: "yes", False: "**no**", None: "-"}


def markdown(start: str, end: str, caption: str, rows: list[tuple[str, str, str, bool | None]]) -> str:
    """The table of (measure, figure, budget, met: None for a figure only reported) rows, with its markers."""
    lines = [start, "", caption, "", "| measure | figure | budget | met |", "|---|---|---|---|"]
    lines += [f"| {name.strip()} | {fig} | {target} | {MET[ok]} |" for name, fig, target, ok in rows]
    return "\n".join(lines + ["", end])


def replace_between(path: Path, start: str, end: str, table: str) -> None:
    text = path.read_text()
    a, b = text.index(start), text.index(end) + len(end)
    path.write_text(text[:a] + table + text[b:])
