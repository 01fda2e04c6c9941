"""``make tables``: write the plan language's tables (``kinds``) into the schema's enums and the docs' tables.

The schema (``plan_library/plan_library.schema.json``) and three docs hold generated parts; ``tests/core/test_kinds.py``
fails when one of them is not what this writes, and names this command.  A generated part of a doc sits between
``<!-- table:NAME (make tables) -->`` and ``<!-- end table -->``.

    python -m graph_engine.tools.tables [--check]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Callable

from ..core.kinds import (CHECKS, CONDITIONS, EVENTS, FAN_IN_POLICIES, NODE_KINDS, NODE_TYPES, ON_FAIL_ACTIONS,
                          PACE_LEVELS, REDUCERS, VERIFY_TYPES)

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = Path("plan_library/plan_library.schema.json")
ENUMS = {  # where each table's names are an enum of the schema
    ("$defs", "node", "properties", "type"): NODE_TYPES,
    ("$defs", "node", "properties", "pace_level"): PACE_LEVELS,
    ("$defs", "edge", "properties", "condition", "anyOf", 0): CONDITIONS,
    ("$defs", "verify", "properties", "type"): VERIFY_TYPES,
    ("$defs", "step", "properties", "on_fail"): ON_FAIL_ACTIONS,
    ("$defs", "node", "properties", "fan_in_policy"): tuple(FAN_IN_POLICIES),
    ("$defs", "node", "properties", "reduce", "oneOf", 0, "additionalProperties"): tuple(REDUCERS),
}


def fan_in_description() -> str:
    return "Fan-in node: when it routes on success: " + "; ".join(
        f"{p.name}: {p.passes}" for p in FAN_IN_POLICIES.values()) + "."


DESCRIPTIONS = {  # where a description of the schema is written from a table
    ("$defs", "node", "properties", "fan_in_policy"): fan_in_description,
}


def _yes(flag: bool) -> str:
    return "yes" if flag else ""


def node_kinds_table() -> str:
    rows = [f"| `{k.name}` | {k.does} | {_yes(k.rests)} | {_yes(k.terminal)} | "
            f"{f'`{k.retries}`' if k.route == 'task' and k.rests else ''} | `shape={k.dot_shape}`"
            f"{f' `type={k.name}`' if k.dot_type else ''} |" for k in NODE_KINDS.values()]
    return "\n".join(["| `type` | what it does | a run waits there | ends the run | `max_retries` when not set | DOT |",
                      "|---|---|---|---|---|---|", *rows])


def checks_table() -> str:
    return "\n".join(["| `type` | passes when |", "|---|---|",
                      *(f"| `{c.name}` | {c.doc} |" for c in CHECKS.values())])


def events_table() -> str:
    rows = [f"| `{e.name}` | {e.means}{' (the person’s words in `said`)' if e.said else ''} | "
            f"{_yes(e.ends_run)} |" for e in EVENTS.values()]
    return "\n".join(["| event | when | ends the run |", "|---|---|---|", *rows])


def fan_in_table() -> str:
    return "\n".join(["| `fan_in_policy` | the fan-in routes on success when |", "|---|---|",
                      *(f"| `{p.name}` | {p.passes} |" for p in FAN_IN_POLICIES.values())])


def reducers_table() -> str:
    return "\n".join(["| reducer | the value the next step sees |", "|---|---|",
                      *(f"| `{r.name}` | {r.does} |" for r in REDUCERS.values())])


DOCS: dict[str, tuple[Path, Callable[[], str]]] = {
    "fan-in-policies": (Path("docs/plan-authoring.md"), fan_in_table),
    "reducers": (Path("docs/plan-authoring.md"), reducers_table),
    "node-kinds": (Path("docs/plan-authoring.md"), node_kinds_table),
    "checks": (Path("docs/plan-authoring.md"), checks_table),
    "events": (Path("docs/how-it-works.md"), events_table),
}


def schema_text(text: str) -> str:
    """The schema's text with each enum of ENUMS and each description of DESCRIPTIONS set from its table (the rest
    of the file as written)."""
    doc = json.loads(text)
    for path, names in ENUMS.items():
        node = doc
        for key in path:
            node = node[key]
        old, new = json.dumps(node["enum"]), json.dumps(list(names))
        if old != new:
            if text.count(old) != 1:
                raise ValueError(f"{SCHEMA}: the enum {old} is written {text.count(old)} times; write it once")
            text = text.replace(old, new)
    for path, make in DESCRIPTIONS.items():
        node = doc
        for key in path:
            node = node[key]
        old, new = json.dumps(node["description"]), json.dumps(make(), ensure_ascii=False)
        if old != new:
            if text.count(old) != 1:
                raise ValueError(f"{SCHEMA}: the description {old} is written {text.count(old)} times; write it once")
            text = text.replace(old, new)
    return text


def doc_text(text: str, name: str, table: str, where: Path) -> str:
    block = re.compile(rf"(<!-- table:{re.escape(name)} \(make tables\) -->\n).*?(<!-- end table -->)", re.S)
    if not block.search(text):
        raise ValueError(f"{where}: no '<!-- table:{name} (make tables) -->' ... '<!-- end table -->' block")
    return block.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text, count=1)


def outputs(root: Path = ROOT) -> dict[Path, str]:
    """What each generated file should hold."""
    wanted = {SCHEMA: schema_text((root / SCHEMA).read_text(encoding="utf-8"))}
    for name, (where, make) in DOCS.items():
        text = wanted.get(where) or (root / where).read_text(encoding="utf-8")
        wanted[where] = doc_text(text, name, make(), where)
    return wanted


def stale(root: Path = ROOT) -> list[str]:
    """The generated files that differ from what ``make tables`` writes."""
    return [str(p) for p, text in outputs(root).items() if (root / p).read_text(encoding="utf-8") != text]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        found = stale()
        print("\n".join(f"{p}: not as the tables say; run make tables" for p in found) or "tables: up to date")
        return 1 if found else 0
    for path, text in outputs().items():
        if (ROOT / path).read_text(encoding="utf-8") != text:
            (ROOT / path).write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
