"""Loading the plan library: parse, compile every plan, reload on change, keep the last good one.

A plan that does not compile is disabled with one problem line; the others load.
A file that does not parse keeps the previously loaded library.  Plans that runs
started with stay reachable by version after the file changes.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from . import settings
from .lint import ERROR, Diagnostic, cross_plan_triggers, diag, lint_plan, raw_structure
from .model import Plan, PlanError, compile_plan
from .schema import find_schema, load_schema, validate_plan, validate_top

PLAN_DOC = "docs/plan-authoring.md"

try:  # optional speed-up; the standard library is enough
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

MAX_LIBRARY_BYTES = 20 * 1024 * 1024  # for up to MAX_PLANS plans; a higher GRAPH_ENGINE_MAX_PLANS raises it
BYTES_PER_PLAN = 20 * 1024  # ... by this much per plan allowed
MAX_PLANS = settings.DEFAULT_MAX_PLANS  # a reload happens inside the agent's loop: bound its cost


def parse_json(blob: bytes) -> Any:
    if _orjson is not None:
        return _orjson.loads(blob)
    return json.loads(blob.decode("utf-8"))


@dataclass(frozen=True)
class Library:
    """The plans that passed schema, compile and lint, in file order, plus one problem line per disabled plan."""

    path: str
    plans: Mapping[str, Plan]
    problems: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    diagnostics: tuple[Diagnostic, ...] = ()
    worst_case_turns: Mapping[str, int | None] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds each plan took to check
    dot_positions: Mapping[str, tuple[str, int, int]] = field(default_factory=dict)  # DOT plan: file, line, col

    def get(self, plan_id: str) -> Plan | None:
        return self.plans.get(plan_id)


@dataclass(frozen=True)
class Checked:
    """One plan through schema, compile and lint."""

    plan: Plan | None  # None: a schema or compile error
    diagnostics: tuple[Diagnostic, ...]
    worst_case_turns: int | None = None
    seconds: float = 0.0

    @property
    def usable(self) -> bool:
        return self.plan is not None and not any(d.severity == ERROR for d in self.diagnostics)


def check_plan(plan_id: str, raw: Any, schema: dict[str, Any] | None, use_jsonschema: bool = False) -> Checked:
    """Schema, compile and lint one plan.  Never raises for the plan's fault."""
    started = time.perf_counter()
    found = []
    if schema is not None:
        for p in validate_plan(plan_id, raw, schema, use_jsonschema):
            rule = "pace_level" if p.path.endswith(".pace_level") else "schema"
            found.append(diag(rule, p.plan, f"{p.path}: {p.message}", f"see the field in {PLAN_DOC}"))
    if found:  # compiling would only repeat it; the structure can still be read
        found += [d for d in raw_structure(plan_id, raw) if d.rule == "reachability"]
        return Checked(None, tuple(found), None, time.perf_counter() - started)
    try:
        plan = compile_plan(plan_id, raw)
    except PlanError as exc:
        structure = raw_structure(plan_id, raw)  # every bad edge and unreachable node, not only the first
        if exc.rule not in {d.rule for d in structure}:
            found.append(diag(exc.rule, plan_id, f"{exc.path}: {exc.problem}", exc.fix))
        found += structure
        return Checked(None, tuple(found), None, time.perf_counter() - started)
    report = lint_plan(plan)
    return Checked(plan, tuple(report.diagnostics), report.worst_case_turns, time.perf_counter() - started)


def document_problems(data: Any, path: str, schema: dict[str, Any] | None,
                      use_jsonschema: bool = False) -> tuple[dict[str, Any], list[Diagnostic]]:
    """The plans to check (the first GRAPH_ENGINE_MAX_PLANS) and the findings of the document's top level.

    Raises ValueError only when the document itself is unusable (not an object, no 'plans' object)."""
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the library must be a JSON object with a 'plans' object, "
                         f"got {type(data).__name__}")
    raw_plans = data.get("plans")
    if not isinstance(raw_plans, dict):
        raise ValueError(f"{path}: 'plans' must be an object keyed by plan id (add \"plans\": {{...}})")
    found: list[Diagnostic] = []
    limit = _max_plans()
    if len(raw_plans) > limit:
        found.append(Diagnostic(rule="schema", severity="warning", plan="(library)", node=None, edge=None,
                                message=f"the library has {len(raw_plans)} plans, over the limit of {limit}; only "
                                        f"the first {limit} are loaded",
                                fix="split the library, or raise GRAPH_ENGINE_MAX_PLANS"))
        raw_plans = dict(list(raw_plans.items())[:limit])
    if schema is not None:
        for p in validate_top(data, schema, use_jsonschema):
            found.append(diag("schema", "(library)", f"{p.path}: {p.message}", f"see the field in {PLAN_DOC}"))
    return raw_plans, found


def library_schema(path: str) -> dict[str, Any] | None:
    schema_file = find_schema(path if path != "<memory>" else "")
    return load_schema(schema_file) if schema_file is not None else None


def check_document(data: Any, path: str = "<memory>", use_jsonschema: bool = False) -> Library:
    """Schema, compile and lint every plan; plans with an error are left out.  Never raises for a plan's fault.

    Raises ValueError only when the document itself is unusable (not an object, no 'plans' object)."""
    schema = library_schema(path)
    raw_plans, found = document_problems(data, path, schema, use_jsonschema)
    compiled: dict[str, Plan] = {}
    reports: dict[str, int | None] = {}
    timings: dict[str, float] = {}
    for plan_id, raw in raw_plans.items():
        checked = check_plan(plan_id, raw, schema, use_jsonschema)
        found.extend(checked.diagnostics)
        timings[plan_id] = checked.seconds
        if checked.plan is not None:
            compiled[plan_id] = checked.plan
            reports[plan_id] = checked.worst_case_turns
    found.extend(cross_plan_triggers(compiled.values()))
    broken = {d.plan for d in found if d.severity == ERROR}
    plans = {pid: plan for pid, plan in compiled.items() if pid not in broken}
    meta = data.get("_meta") if isinstance(data.get("_meta"), dict) else {}
    return Library(path=path, plans=plans, problems=tuple(_problem_lines(path, found)), meta=meta,
                   diagnostics=tuple(found), worst_case_turns=reports, timings=timings)


def _max_plans() -> int:
    """GRAPH_ENGINE_MAX_PLANS, else the plugin setting, else MAX_PLANS."""
    return settings.active("max_plans")


def _problem_lines(path: str, found: list[Diagnostic]) -> list[str]:
    """One line per disabled plan (its first error), one per warning."""
    lines, seen = [], set()
    for d in found:
        if d.severity == ERROR:
            if d.plan in seen:
                continue
            seen.add(d.plan)
            more = sum(1 for x in found if x.plan == d.plan and x.severity == ERROR) - 1
            extra = f" (and {more} more: run graph-engine validate {path})" if more else ""
            at = f" ({d.file}:{d.line}:{d.col})" if d.line is not None else ""
            if d.plan == "(library)":
                target = "the library's top level is invalid"
            elif d.rule == "syntax" and d.file:
                target = f"DOT file {d.file} is not loaded, the others keep working"
            else:
                target = f"plan '{d.plan}' is disabled, the others keep working"
            lines.append(f"{path}: {target}: [{d.rule}] {d.message}{at} (fix: {d.fix}){extra}")
        elif d.severity == "warning":
            lines.append(f"{path}: {d.text()}")
    return lines


def build_library(data: Any, path: str = "<memory>") -> Library:
    """Compile a parsed library document.  Raises ValueError when the document itself is unusable."""
    return check_document(data, path)


def read_library(path: str) -> bytes:
    """The library file's bytes.  Raises ValueError with a readable message when it cannot be used."""
    try:
        size = os.path.getsize(path)
        limit = max(MAX_LIBRARY_BYTES, _max_plans() * BYTES_PER_PLAN)
        if size > limit:
            raise ValueError(f"{path}: file is {size:,} bytes, over the {limit:,} byte limit "
                             f"({BYTES_PER_PLAN // 1024} kB per plan GRAPH_ENGINE_MAX_PLANS allows, at least "
                             f"{MAX_LIBRARY_BYTES // 2**20} MB); split the library, or raise GRAPH_ENGINE_MAX_PLANS")
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the plan library ({exc.strerror or exc}); "
                         "check the file exists and is readable") from None
    if not blob.strip():
        raise ValueError(f"{path}: the file is empty; write a JSON object with a 'plans' object")
    return blob


def load_library_file(path: str) -> Library:
    """Read and check one library file whole.  Raises ValueError with a readable message on failure."""
    blob = read_library(path)
    try:
        data = parse_json(blob)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{path}: not valid JSON ({_json_error(blob)}); fix the syntax") from None
    dots = dot_files(path)
    if not dots:
        return build_library(data, path)
    return with_dot_plans(data, path, dots)


def dot_files(path: str) -> list[str]:
    """DOT plans beside the library file (``*.dot``), in name order."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".dot"))
    except OSError:
        return []


def with_dot_plans(data: Any, path: str, dots: list[str], use_jsonschema: bool = False) -> Library:
    """The JSON library plus the DOT plans, through the same schema and lint; DOT findings carry line:col."""
    from .dot import DotSyntaxError, parse
    from .dot_plan import DOT_OWNED_RULES, to_plan

    if not isinstance(data, dict) or not isinstance(data.get("plans"), dict):
        return check_document(data, path, use_jsonschema)  # raises the document's own problem
    plans = dict(data["plans"])
    extra: list[Diagnostic] = []
    positions: dict[str, tuple[str, Any]] = {}
    for dot_path in dots:
        try:
            with open(dot_path, encoding="utf-8") as fh:
                graph = parse(fh.read())
        except (OSError, UnicodeDecodeError) as exc:
            extra.append(diag("schema", dot_path, f"cannot read the DOT file ({exc})", "check the file"))
            continue
        except DotSyntaxError as exc:
            extra.append(replace(diag("syntax", dot_path, exc.message, "fix the DOT syntax"), line=exc.line,
                                 col=exc.col, file=dot_path))
            continue
        pid, plan, found = to_plan(graph)
        if pid in plans:
            extra.append(replace(diag("duplicate_plan", pid, f"plan id '{pid}' is already defined in {path}",
                                      "rename the digraph"), line=graph.line, col=graph.col, file=dot_path))
            continue
        plans[pid] = plan
        positions[pid] = (dot_path, graph)
        extra.extend(replace(d, file=dot_path) for d in found)
    lib = check_document(dict(data, plans=plans), path, use_jsonschema)
    said = {(d.rule, d.plan, d.node, d.edge) for d in extra}  # the DOT lint's finding says it with its position
    located = [_locate(d, positions) for d in lib.diagnostics
               if not (d.plan in positions and (d.rule in DOT_OWNED_RULES or (d.rule, d.plan, d.node, d.edge) in said))
               ] + extra
    broken = {d.plan for d in located if d.severity == ERROR}
    kept = {pid: p for pid, p in lib.plans.items() if pid not in broken}
    return Library(path=path, plans=kept, problems=tuple(_problem_lines(path, located)), meta=lib.meta,
                   diagnostics=tuple(located), worst_case_turns=lib.worst_case_turns, timings=lib.timings,
                   dot_positions={pid: (f, g.line, g.col) for pid, (f, g) in positions.items()})


def _locate(d: Diagnostic, positions: dict[str, tuple[str, Any]]) -> Diagnostic:
    """Give a finding on a DOT plan the position of its node or edge in the DOT file."""
    if d.plan not in positions:
        return d
    dot_path, graph = positions[d.plan]
    line, col = graph.line, graph.col
    if d.index is not None and d.index < len(graph.edges):  # the plan's edges are the graph's, in order
        line, col = graph.edges[d.index].line, graph.edges[d.index].col
    elif d.node and d.node in graph.nodes:
        line, col = graph.nodes[d.node].line, graph.nodes[d.node].col
    else:  # a schema finding names its place in the message: plans.<id>.graph.nodes.<node>. / .edges[<i>]
        m = re.search(r"\.graph\.(?:nodes\.([A-Za-z_][A-Za-z0-9_]*)|edges\[(\d+)\])", d.message)
        if m and m.group(1) in graph.nodes:
            line, col = graph.nodes[m.group(1)].line, graph.nodes[m.group(1)].col
        elif m and m.group(2) is not None and int(m.group(2)) < len(graph.edges):
            line, col = graph.edges[int(m.group(2))].line, graph.edges[int(m.group(2))].col
    return replace(d, line=line, col=col, file=dot_path)


def _json_error(blob: bytes) -> str:
    """The standard library's wording of a syntax error (the same with or without orjson)."""
    try:
        json.loads(blob.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text at byte {exc.start}"
    except ValueError as exc:
        return str(exc)
    return "unreadable"
