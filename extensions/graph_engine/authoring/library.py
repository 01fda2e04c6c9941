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

from ..boundary import settings
from .lint import ERROR, Diagnostic, cross_plan_triggers, diag, lint_plan, raw_structure
from ..core.model import Plan, PlanError, compile_plan
from ..boundary.reading import MAX_DEPTH, TooLarge, decode_text, read_regular, scan_document, value_problem
from .schema import SCHEMA_OFF, find_schema, jsonschema_available, load_schema, validate_plan, validate_top

PLAN_DOC = "docs/plan-authoring.md"
CHECK_FAILED = "the engine could not check this plan"
UNUSABLE_FIX = f"write a finite number, a shorter integer or plain text there, nested at most {MAX_DEPTH} deep"

MAX_LIBRARY_BYTES = 20 * 1024 * 1024  # for up to MAX_PLANS plans; a higher GRAPH_ENGINE_MAX_PLANS raises it
BYTES_PER_PLAN = 20 * 1024  # ... by this much per plan allowed
MAX_PLANS = settings.DEFAULT_MAX_PLANS  # a reload happens inside the agent's loop: bound its cost
MAX_DOT_BYTES = 1024 * 1024  # one DOT plan


def parse_json(blob: bytes) -> Any:
    """A library document, read as every reader of a library reads it (``reading.scan_document``).
    Raises ValueError (UnicodeDecodeError included) on bytes that are not one JSON value in UTF-8."""
    return scan_document(decode_text(blob))[0]


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


def check_plan(plan_id: str, raw: Any, schema: dict[str, Any] | None) -> Checked:
    """Schema, compile and lint one plan.  Never raises: should the checking itself fail, this plan alone is
    disabled, with one finding that says so."""
    started = time.perf_counter()
    try:
        checked = _check_plan(plan_id, raw, schema)
    except Exception as exc:  # noqa: BLE001 - the checker's own fault must not switch the other plans off
        checked = Checked(None, (diag("schema", plan_id, f"{CHECK_FAILED} ({type(exc).__name__}: {exc})",
                                      "please report it with the plan; the other plans are not affected"),))
    return replace(checked, seconds=time.perf_counter() - started)


def _check_plan(plan_id: str, raw: Any, schema: dict[str, Any] | None) -> Checked:
    unusable = value_problem(raw, f"plans.{plan_id}")
    if unusable is not None:  # nothing else reads the value: it may be too deep for their recursion
        return Checked(None, (diag("schema", plan_id, f"{unusable[0]}: {unusable[1]}", UNUSABLE_FIX),))
    found = []
    if schema is not None:
        for p in validate_plan(plan_id, raw, schema):
            rule = "pace_level" if p.path.endswith(".pace_level") else "schema"
            found.append(diag(rule, p.plan, f"{p.path}: {p.message}", f"see the field in {PLAN_DOC}"))
    if found:  # compiling would only repeat it; the structure can still be read
        found += [d for d in raw_structure(plan_id, raw) if d.rule in ("reachability", "condition_syntax")]
        return Checked(None, tuple(found))
    try:
        plan = compile_plan(plan_id, raw)
    except PlanError as exc:
        structure = raw_structure(plan_id, raw)  # every bad edge and unreachable node, not only the first
        if exc.rule not in {d.rule for d in structure}:
            found.append(diag(exc.rule, plan_id, f"{exc.path}: {exc.problem}", exc.fix))
        found += structure
        return Checked(None, tuple(found))
    report = lint_plan(plan)
    return Checked(plan, tuple(report.diagnostics), report.worst_case_turns)


def document_problems(data: Any, path: str, schema: dict[str, Any] | None) -> tuple[dict[str, Any], list[Diagnostic]]:
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
    for key, value in data.items():  # before the schema's recursive walk meets them
        unusable = value_problem(value, key) if key != "plans" else None
        if unusable is not None:
            found.append(diag("schema", "(library)", f"{unusable[0]}: {unusable[1]}", UNUSABLE_FIX))
    if any(d.fix == UNUSABLE_FIX for d in found):
        data = {k: v for k, v in data.items() if k == "plans" or value_problem(v, k) is None}
    if schema is not None:
        for p in validate_top(data, schema):
            found.append(diag("schema", "(library)", f"{p.path}: {p.message}", f"see the field in {PLAN_DOC}"))
    elif not jsonschema_available():
        found.append(Diagnostic(rule="schema", severity="warning", plan="(library)", node=None, edge=None,
                                message=SCHEMA_OFF, fix="pip install jsonschema in the framework's Python"))
    return raw_plans, found


def library_schema(path: str) -> dict[str, Any] | None:
    """The schema to check the library with; None without one or without jsonschema."""
    if not jsonschema_available():
        return None
    schema_file = find_schema(path if path != "<memory>" else "")
    return load_schema(schema_file) if schema_file is not None else None


def check_document(data: Any, path: str = "<memory>") -> Library:
    """Schema, compile and lint every plan; plans with an error are left out.  Never raises for a plan's fault.

    Raises ValueError only when the document itself is unusable (not an object, no 'plans' object)."""
    schema = library_schema(path)
    raw_plans, found = document_problems(data, path, schema)
    compiled: dict[str, Plan] = {}
    reports: dict[str, int | None] = {}
    timings: dict[str, float] = {}
    for plan_id, raw in raw_plans.items():
        checked = check_plan(plan_id, raw, schema)
        found.extend(checked.diagnostics)
        timings[plan_id] = checked.seconds
        if checked.plan is not None:
            compiled[plan_id] = checked.plan
            reports[plan_id] = checked.worst_case_turns
    found.extend(cross_plan_triggers(compiled.values()))
    broken = {d.plan for d in found if d.severity == ERROR}
    plans = {pid: plan for pid, plan in compiled.items() if pid not in broken}
    return Library(path=path, plans=plans, problems=tuple(_problem_lines(path, found)),
                   meta=library_meta(data), diagnostics=tuple(found), worst_case_turns=reports, timings=timings)


def library_meta(data: dict[str, Any]) -> dict[str, Any]:
    """The document's ``_meta`` object ({} when it is missing, not an object, or holds an unusable value)."""
    meta = data.get("_meta")
    return meta if isinstance(meta, dict) and value_problem(meta, "_meta") is None else {}


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
            elif d.file and d.plan == d.file:  # the file itself: it holds no plan that loaded
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


def library_limit() -> int:
    """The most bytes a library file may hold."""
    return max(MAX_LIBRARY_BYTES, _max_plans() * BYTES_PER_PLAN)


def read_library(path: str) -> bytes:
    """The library file's bytes.  Raises ValueError with a readable message when it cannot be used."""
    try:
        blob = read_regular(path, library_limit(), "plan library")
    except TooLarge as exc:
        raise ValueError(f"{exc} ({BYTES_PER_PLAN // 1024} kB per plan GRAPH_ENGINE_MAX_PLANS allows, at least "
                         f"{MAX_LIBRARY_BYTES // 2**20} MB); split the library, or raise GRAPH_ENGINE_MAX_PLANS"
                         ) from None
    if not blob.strip():
        raise ValueError(f"{path}: the file is empty; write a JSON object with a 'plans' object")
    return blob


def load_library_file(path: str) -> Library:
    """Read and check one library file whole.  Raises ValueError with a readable message on failure."""
    blob = read_library(path)
    try:
        data = parse_json(blob)
    except ValueError:
        raise ValueError(f"{path}: not valid JSON ({json_error(blob)}); fix the syntax") from None
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


def with_dot_plans(data: Any, path: str, dots: list[str]) -> Library:
    """The JSON library plus the DOT plans, through the same schema and lint; DOT findings carry line:col."""
    from .dot_plan import DOT_OWNED_RULES, to_plan

    if not isinstance(data, dict) or not isinstance(data.get("plans"), dict):
        return check_document(data, path)  # raises the document's own problem
    plans = dict(data["plans"])
    extra: list[Diagnostic] = []
    positions: dict[str, tuple[str, Any]] = {}
    for dot_path in dots:
        graph, refused = _read_dot(dot_path)
        if graph is None:
            extra.append(refused)
            continue
        try:
            pid, plan, found = to_plan(graph)
        except Exception as exc:  # noqa: BLE001 - the mapper's own fault: this file alone is refused
            extra.append(replace(diag("schema", dot_path, f"{CHECK_FAILED} ({type(exc).__name__}: {exc})",
                                      "please report it with the file; the other plans are not affected"),
                                 file=dot_path))
            continue
        if pid in plans:  # the plan already there keeps working; this file is the one refused
            first = positions[pid][0] if pid in positions else path
            extra.append(replace(diag("duplicate_plan", dot_path, f"digraph '{pid}' names a plan already defined "
                                      f"in {first}", f"rename the digraph (e.g. digraph "
                                      f"{pid}_2 {{...}}) or remove one of the two"),
                                 line=graph.line, col=graph.col, file=dot_path))
            continue
        plans[pid] = plan
        positions[pid] = (dot_path, graph)
        extra.extend(replace(d, file=dot_path) for d in found)
    lib = check_document(dict(data, plans=plans), path)
    said = {(d.rule, d.plan, d.node, d.edge) for d in extra}  # the DOT lint's finding says it with its position
    located = [_locate(d, positions) for d in lib.diagnostics
               if not (d.plan in positions and (d.rule in DOT_OWNED_RULES or (d.rule, d.plan, d.node, d.edge) in said))
               ] + extra
    broken = {d.plan for d in located if d.severity == ERROR}
    kept = {pid: p for pid, p in lib.plans.items() if pid not in broken}
    return Library(path=path, plans=kept, problems=tuple(_problem_lines(path, located)), meta=lib.meta,
                   diagnostics=tuple(located), worst_case_turns=lib.worst_case_turns, timings=lib.timings,
                   dot_positions={pid: (f, g.line, g.col) for pid, (f, g) in positions.items()})


def _read_dot(dot_path: str) -> tuple[Any, Diagnostic | None]:
    """A DOT file's graph, or the finding that refuses the file (unreadable, too large, not UTF-8, bad syntax)."""
    from .dot import DotSyntaxError, parse

    try:
        text = decode_text(read_regular(dot_path, MAX_DOT_BYTES, "DOT file"))
    except UnicodeDecodeError as exc:
        return None, replace(diag("schema", dot_path, f"not UTF-8 text (byte {exc.start})", "save it as UTF-8"),
                             file=dot_path)
    except ValueError as exc:  # not a regular file, or too large
        return None, replace(diag("schema", dot_path, str(exc).removeprefix(f"{dot_path}: "),
                                  f"keep DOT plans as regular files of at most {MAX_DOT_BYTES // 2**20} MB"),
                             file=dot_path)
    try:
        return parse(text), None
    except DotSyntaxError as exc:
        return None, replace(diag("syntax", dot_path, exc.message, "fix the DOT syntax"), line=exc.line,
                             col=exc.col, file=dot_path)


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


def json_error(blob: bytes) -> str:
    """The standard library's wording of a syntax error (the same with or without orjson)."""
    try:
        json.loads(decode_text(blob))
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text at byte {exc.start}"
    except ValueError as exc:
        return str(exc)
    except RecursionError:
        return f"nested deeper than the parser goes (keep values at most {MAX_DEPTH} deep)"
    return "unreadable"
