"""A workflow someone proposes in the chat (the agent through its tool, or the person pasting one), checked before
anything runs: the same schema, compile and lint as a library plan, and the rules a plan nobody reviewed must
meet besides (every step has a check, a bound on its size).

``check`` never raises.  What it refuses comes back as numbered lines worded for a model: each names the node or
edge, what is wrong and the fix, so that one more call can send the corrected plan.  The text is kept as it was
given: a run of a composed plan stores it, and a restart compiles it again from there (``Proposal.source``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from ..boundary.reading import MAX_DEPTH, value_problem
from ..core.model import Plan
from .lint import ERROR, Diagnostic, diag
from .library import check_plan, library_schema

MAX_PROPOSAL_CHARS = 64 * 1024  # a plan of MAX_PROPOSAL_NODES nodes with full texts fits in a quarter of it
MAX_PROPOSAL_NODES = 40
MAX_PROPOSAL_VALUES = 5_000  # values in a plan given as a JSON object (40 nodes with every field: about 1,000)
MAX_SHOWN_PROBLEMS = 12  # the model reads at most this many findings; the rest are counted
FORMATS = ("dot", "json")
NOT_FOR_COMPOSED = frozenset({"no_triggers", "example_routing", "duplicate_trigger", "trigger_overlap",
                              "parallel_branches"})  # a composed plan starts when approved, not by its phrases
_ID = re.compile(r"[^A-Za-z0-9_]+")


@dataclass(frozen=True)
class Proposal:
    """A proposed plan, checked: usable (``plan``) or refused (``problems``, lines for the model)."""

    text: str  # as given (at most MAX_PROPOSAL_CHARS)
    fmt: str  # "dot" or "json"
    plan_id: str = ""
    raw: dict[str, Any] | None = None  # the plan's JSON (a DOT plan mapped)
    plan: Plan | None = None  # compiled; None when refused
    problems: tuple[str, ...] = ()  # numbered findings, worded for the model ("" when usable)
    notes: tuple[str, ...] = ()  # warnings: the plan runs, these are worth a look

    @property
    def ok(self) -> bool:
        return self.plan is not None and not self.problems

    @property
    def source(self) -> dict[str, str]:
        """What a run of it stores, to compile it again after a restart."""
        return {"format": self.fmt, "text": self.text}

    def answer(self) -> str:
        """The refusal as the model reads it (empty when usable)."""
        if self.ok:
            return ""
        count = len(self.problems)
        head = (f"The workflow was not accepted: {count} problem{'' if count == 1 else 's'}. Correct "
                f"{'it' if count == 1 else 'each'} and propose the whole corrected plan again.")
        return "\n".join([head, *self.problems])


def check(text: Any, fmt: str = "") -> Proposal:
    """A proposal read and checked.  ``text``: DOT or JSON text, or a JSON value the tool's arguments carried (one
    plan object, or a library object holding exactly one plan); ``fmt``: "dot", "json" or "" (found from it)."""
    try:
        return _check(text, fmt)
    except Exception as exc:  # noqa: BLE001 - the checker's own fault refuses this proposal alone
        return Proposal(str(text)[:200], fmt or "json",
                        problems=(f"1. The engine could not check this plan ({type(exc).__name__}: {exc}). Write it "
                                  "again more simply, as a JSON plan with 'graph'.",))


def _check(text: Any, fmt: str) -> Proposal:
    if not isinstance(text, (str, dict)):
        return _refused("", fmt or "json", f"the plan must be DOT or JSON text, got {type(text).__name__}",
                        "send the plan as a string holding 'digraph name { ... }' or a JSON object")
    if isinstance(text, dict):
        if _values_over(text, MAX_PROPOSAL_VALUES):  # a bounded look first: a huge object costs no more than this
            return _refused("", "json", f"the plan holds more than {MAX_PROPOSAL_VALUES:,} values",
                            f"a workflow of at most {MAX_PROPOSAL_NODES} nodes with short texts fits; split the job")
        unusable = value_problem(text, "plan")
        if unusable is not None:
            return _refused("", "json", f"{unusable[0]}: {unusable[1]}",
                            f"write finite numbers and plain text, nested at most {MAX_DEPTH} deep")
        text = json.dumps(text, ensure_ascii=False, indent=1)
    if len(text) > MAX_PROPOSAL_CHARS:
        return _refused(text[:200], fmt or _format_of(text), f"the plan is {len(text):,} characters, over the limit "
                        f"of {MAX_PROPOSAL_CHARS:,}", f"a workflow of at most {MAX_PROPOSAL_NODES} nodes with short "
                        "texts fits; split the job, or leave out what the steps' texts repeat")
    fmt = fmt or _format_of(text)
    if fmt not in FORMATS:
        return _refused(text, "json", f"unknown format {fmt!r}", "write the plan in DOT or in JSON")
    if "\x00" in text:
        return _refused(text, fmt, "the plan holds a NUL character", "send plain text")
    read = _read_dot(text) if fmt == "dot" else _read_json(text)
    if isinstance(read, Proposal):
        return read
    plan_id, raw, found = read
    nodes = raw.get("graph", {}).get("nodes") if isinstance(raw.get("graph"), dict) else None
    if "steps" in raw:
        return _refused(text, fmt, "a list of steps is a linear plan; a proposed workflow is a graph",
                        "write 'graph' with 'start', 'nodes' and 'edges' (or a DOT digraph)")
    if isinstance(nodes, dict) and len(nodes) > MAX_PROPOSAL_NODES:
        return _refused(text, fmt, f"the plan has {len(nodes):,} nodes, over the limit of {MAX_PROPOSAL_NODES}",
                        "keep the steps whose results can be checked; merge the others into them")
    checked = check_plan(plan_id, raw, library_schema(""))
    from .dot_plan import DOT_OWNED_RULES
    said = {(d.rule, d.node, d.edge) for d in found}
    findings = list(found) + [d for d in checked.diagnostics if not (
        fmt == "dot" and (d.rule in DOT_OWNED_RULES or (d.rule, d.node, d.edge) in said))]
    if checked.plan is not None:
        findings += _composed_rules(checked.plan)
    findings = [d for d in findings if d.rule not in NOT_FOR_COMPOSED]
    errors = [d for d in findings if d.severity == ERROR]
    notes = tuple(_line(d) for d in findings if d.severity != ERROR)
    if errors or checked.plan is None:
        shown = [f"{i}. {_line(d)}" for i, d in enumerate(errors[:MAX_SHOWN_PROBLEMS], 1)]
        if len(errors) > MAX_SHOWN_PROBLEMS:
            shown.append(f"... and {len(errors) - MAX_SHOWN_PROBLEMS} more of the same kinds")
        return Proposal(text, fmt, plan_id, raw, None, tuple(shown) or ("1. The plan does not compile.",), notes)
    return Proposal(text, fmt, plan_id, raw, checked.plan, (), notes)


def _values_over(value: Any, limit: int) -> bool:
    """More than ``limit`` values (keys, items and leaves) in ``value``, counted until the limit is passed."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
            seen += len(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def _format_of(text: str) -> str:
    head = text.lstrip()[:200].lower()
    return "json" if head.startswith(("{", "[")) else "dot"


def _read_dot(text: str) -> "tuple[str, dict, list[Diagnostic]] | Proposal":
    from .dot import DotSyntaxError, parse
    from .dot_plan import to_plan

    try:
        graph = parse(text)
    except DotSyntaxError as exc:
        return _refused(text, "dot", f"line {exc.line}, column {exc.col}: {exc.message}",
                        "fix the DOT syntax: digraph name { a -> b [condition=\"outcome=success\"] }")
    if len(graph.nodes) > MAX_PROPOSAL_NODES:
        return _refused(text, "dot", f"the plan has {len(graph.nodes):,} nodes, over the limit of "
                        f"{MAX_PROPOSAL_NODES}", "keep the steps whose results can be checked; merge the others "
                        "into them")
    pid, raw, found = to_plan(graph)
    return plan_id_of(pid, raw), raw, found


def _read_json(text: str) -> "tuple[str, dict, list[Diagnostic]] | Proposal":
    from .library import json_error, parse_json

    try:
        value = parse_json(text.encode("utf-8"))
    except ValueError:
        return _refused(text, "json", f"not valid JSON ({json_error(text.encode('utf-8'))})",
                        "send one JSON object; check the quotes, commas and brackets")
    if not isinstance(value, dict):
        return _refused(text, "json", f"the JSON is {type(value).__name__}, not an object",
                        "send one plan object with 'name' and 'graph'")
    if isinstance(value.get("plans"), dict):  # a library document: exactly one plan
        if len(value["plans"]) != 1:
            return _refused(text, "json", f"'plans' holds {len(value['plans'])} plans", "propose one plan at a time")
        pid, raw = next(iter(value["plans"].items()))
        if not isinstance(raw, dict):
            return _refused(text, "json", f"plan '{str(pid)[:40]}' is not an object", "write the plan as an object")
        return plan_id_of(str(pid), raw), raw, []
    raw = {k: v for k, v in value.items() if k != "id"}
    return plan_id_of(str(value.get("id") or value.get("name") or ""), raw), raw, []


def plan_id_of(given: str, raw: dict[str, Any]) -> str:
    """A plan id made of the given one (or the plan's name): letters, digits and '_', starting with a letter."""
    pid = _ID.sub("_", given.strip().lower()).strip("_")[:48] or _ID.sub("_", str(raw.get("name", "")).lower()
                                                                         ).strip("_")[:48]
    if not pid or not pid[0].isalpha():
        pid = f"workflow_{pid}".rstrip("_")
    return pid


def _composed_rules(plan: Plan) -> list[Diagnostic]:
    """What a plan nobody reviewed must do besides a library plan: every step the model carries out is checked."""
    found = []
    if not any(n.kind.judged for n in plan.nodes.values()):
        found.append(diag("schema", plan.id, "the plan has no task step", "add the steps the job needs, each a task "
                          "with a check"))
    for node in plan.nodes.values():
        if node.kind.judged and node.verify is None:
            found.append(replace(diag("schema", plan.id, "the step has no check, so nothing can tell whether it "
                                      "worked", "add \"verify\": {\"type\": \"exit_code_zero\"} for a command, "
                                      "output_contains or output_matches for what it must print, or file_exists "
                                      "for a file it must make", node=node.id), rule="unchecked_step"))
    return found


def _line(d: Diagnostic) -> str:
    where = f"node '{d.node}'" if d.node else f"edge {d.edge}" if d.edge else "the plan"
    at = f" (line {d.line})" if d.line is not None else ""
    message = re.sub(r"^plans\.[^.]+\.", "", d.message)
    return f"{where}{at}: {message}. Fix: {d.fix}."


def _refused(text: str, fmt: str, problem: str, fix: str) -> Proposal:
    return Proposal(text[:MAX_PROPOSAL_CHARS], fmt, problems=(f"1. {problem}. Fix: {fix}.",))
