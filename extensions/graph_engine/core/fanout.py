"""Branches over a list found at run time, and a fan-in's reducers.

A parallel node with ``over: "files"`` has one edge, its branch: the run gives it one branch per item of the value
an earlier step captured under that name (``items``), each branch's id its first node's with the item's number
(``check#1``, ``check#2``, ...: ``branch_id``, ``first_of``), the item in the branch's ``context`` as ``item`` and in
its steps' texts where they say ``$item`` (``expand``).  A fan-in's ``reduce`` merges what the branches captured
(``reduced``: one ``kinds.REDUCERS`` row per name).

Pure functions of plain values; no I/O.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Iterable, Mapping

from .kinds import REDUCERS
from .model import AGENT_FIT, Node, Plan

MAX_ITEM = 300  # characters of one item: a longer one refuses the fan-out (an item is named in every text)
ITEM = "item"  # the context name a branch over a list reads its item by ($item in its steps' texts)
SEP = "#"


def items(value: Any, over: str, limit: int) -> tuple[list[str], str]:
    """The items of a captured value (a JSON list, else its non-empty lines), or ([], why it cannot fan out)."""
    if value is None:
        return [], f"no step captured '{over}' before the fan-out"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    found: list[str]
    if text.lstrip().startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            return [], (f"'{over}' starts as a JSON list but does not parse as one (cut at its end?); capture a "
                        "whole list, or one item per line")
        if not isinstance(parsed, list):
            return [], f"'{over}' is not a list"
        found = [x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in parsed]
        found = [" ".join(x.split()) for x in found]
    else:
        found = [" ".join(line.split()) for line in text.splitlines()]
    found = [x for x in found if x]
    if len(found) > limit:
        return [], (f"'{over}' holds {len(found)} items, over the parallel node's max_items of {limit}; raise "
                    "max_items (at most 100) or narrow the list the step captures")
    long = next((x for x in found if len(x) > MAX_ITEM), None)
    if long is not None:
        return [], f"an item of '{over}' is {len(long)} characters long, over {MAX_ITEM}: {long[:60]!r}..."
    return found, ""


def branch_id(first: str, number: int) -> str:
    return f"{first}{SEP}{number}"


def first_of(plan: Plan, branch: str) -> str:
    """A branch's first node: the id itself for a branch of the plan's own, ``check`` for ``check#2``."""
    if branch in plan.nodes:
        return branch
    head, sep, number = branch.rpartition(SEP)
    return head if sep and number.isdigit() and head in plan.nodes else branch


def over_list(plan: Plan, node: Node) -> bool:
    """Whether a parallel node's branches are a list's items (one edge, run once per item, up to a fan-in)."""
    return bool(node.over) and len(plan.out_edges.get(node.id, ())) == 1 and node.id in plan.fan_in_of


def inside(plan: Plan, first: str, fan_in: str) -> frozenset[str]:
    """The nodes a branch reaches from its first node before its fan-in."""
    known = plan.derived("_branch_nodes", lambda p: {})
    found = known.get((first, fan_in))
    if found is None:
        seen, todo = {first}, [first]
        for nid in todo:
            for e in plan.out_edges.get(nid, ()):
                if e.dst != fan_in and e.dst not in seen:
                    seen.add(e.dst)
                    todo.append(e.dst)
        found = known[(first, fan_in)] = frozenset(seen)
    return found


def expand(text: str, item: str | None, command: bool = False) -> str:
    """``$item`` in a step's text, the item it runs for (quoted for a shell in a command)."""
    if item is None or "$item" not in text:
        return text
    return text.replace("$item", shlex.quote(item) if command else item)


def reduced(node: Node, values: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, str]:
    """A fan-in's merged values: for each name its ``reduce`` names, the reducer over the branches' values
    ((branch id, its context) pairs, in branch order); branches that captured nothing for it are left out."""
    values = list(values)
    out = {}
    for name, how in node.reduce:
        got = [(bid, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
               for bid, ctx in values for v in [ctx.get(name)] if v is not None]
        out[name] = REDUCERS[how].merge(got)
    return out


def agent_fit(plan: Plan, fork: str, branch: str) -> dict[str, str]:
    """The settings of the agent a branch runs in (``model.AGENT_FIT``): its first node's, else its parallel
    node's (``thread_id`` only its first node's: one shared agent for all would be no fork)."""
    first, parallel = plan.nodes.get(first_of(plan, branch)), plan.nodes.get(fork)
    out = {}
    for key in AGENT_FIT:
        mine = getattr(first, key, "") if first is not None else ""
        out[key] = mine or ("" if key == "thread_id" or parallel is None else getattr(parallel, key, ""))
    return out
