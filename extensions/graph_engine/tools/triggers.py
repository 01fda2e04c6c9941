"""Trigger quality: run a golden set of user messages through the real matcher.

Each case is ``{"message", "expect": plan id or null, "domain": the BST domain}``.
The report gives accuracy, the confusion table (expected -> chosen), the
negatives that activated a plan, and trigger phrases that collide across plans
(the same phrase, or one plan's phrase inside another's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..lint import contains_phrase
from ..matching import best_match
from ..model import Plan

NONE = "(none)"
REQUIRED_ACCURACY = 0.95


@dataclass(frozen=True)
class CaseResult:
    message: str
    domain: str
    expect: str | None
    got: str | None
    hits: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.expect == self.got


def load_cases(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    cases = data["cases"] if isinstance(data, dict) else data
    for i, c in enumerate(cases):
        if not isinstance(c, dict) or not isinstance(c.get("message"), str) or "expect" not in c:
            raise ValueError(f"{path}: case {i} needs 'message' (text) and 'expect' (plan id or null)")
    return cases


def run_cases(plans: Sequence[Plan], cases: Iterable[dict[str, Any]]) -> list[CaseResult]:
    out = []
    for c in cases:
        m = best_match(plans, c["message"], c.get("domain", ""), None)
        out.append(CaseResult(message=c["message"], domain=c.get("domain", ""), expect=c["expect"],
                              got=m.plan.id if m else None, hits=m.hits if m else ()))
    return out


def confusion(results: Sequence[CaseResult]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for r in results:
        row = table.setdefault(r.expect or NONE, {})
        row[r.got or NONE] = row.get(r.got or NONE, 0) + 1
    return table


def collisions(plans: Sequence[Plan]) -> list[dict[str, str]]:
    """Phrases of one plan that always also match a phrase of another plan."""
    found = []
    for a in plans:
        for b in plans:
            if a.id >= b.id:
                continue
            for ta in a.all_triggers:
                for tb in b.all_triggers:
                    if contains_phrase(tb, ta) or contains_phrase(ta, tb):
                        found.append({"plan": a.id, "trigger": ta, "other_plan": b.id, "other_trigger": tb})
    return found


def report(plans: Sequence[Plan], cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    results = run_cases(plans, cases)
    correct = sum(r.ok for r in results)
    return {
        "cases": len(results),
        "correct": correct,
        "accuracy": round(correct / len(results), 4) if results else 0.0,
        "negatives_activated": [r.__dict__ for r in results if r.expect is None and r.got is not None],
        "wrong": [dict(r.__dict__, hits=list(r.hits)) for r in results if not r.ok],
        "confusion": confusion(results),
        "collisions": collisions(plans),
    }


def format_report(rep: dict[str, Any]) -> str:
    lines = [f"{rep['correct']}/{rep['cases']} correct ({rep['accuracy']:.1%}); "
             f"{len(rep['negatives_activated'])} negative message(s) activated a plan", "",
             "expected -> chosen (count)"]
    for expect, row in sorted(rep["confusion"].items()):
        cells = ", ".join(f"{got}: {n}" for got, n in sorted(row.items(), key=lambda kv: -kv[1]))
        lines.append(f"  {expect:<22} {cells}")
    if rep["wrong"]:
        lines += ["", "wrong:"]
        lines += [f"  {w['message']!r} (domain {w['domain'] or '-'}): expected {w['expect'] or NONE}, "
                  f"got {w['got'] or NONE} {w['hits'] or ''}" for w in rep["wrong"]]
    lines += ["", "colliding trigger phrases:" if rep["collisions"] else "no trigger phrase collides across plans"]
    lines += [f"  {c['plan']}: '{c['trigger']}'  <->  {c['other_plan']}: '{c['other_trigger']}'"
              for c in rep["collisions"]]
    return "\n".join(lines)
