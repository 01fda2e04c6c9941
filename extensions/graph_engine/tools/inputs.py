"""What the CLI reads from the user, checked: files, libraries, plans, nodes, JSON arguments, run logs.

Every problem is a ``CliError``: one line that names what and where and how to go on, and an exit code
(2: the input cannot be used; 1: a finding).  ``graph-engine``'s ``main`` prints it on stderr; nothing here
prints or exits.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..authoring.dot import DotSyntaxError, parse
from ..authoring.dot_plan import to_plan
from ..authoring.library import (MAX_DOT_BYTES, Library, check_document, dot_files, json_error, library_limit, parse_json,
                       with_dot_plans)
from ..authoring.lint import ERROR
from ..core.kinds import OUTCOMES
from ..core.model import Plan, PlanError, compile_plan
from ..boundary.reading import ReadError, decode_text, read_regular

INPUT, FINDING = 2, 1
MAX_INPUT_BYTES = 64 * 1024 * 1024  # any file the CLI reads (a library is also held to its own, smaller limit)
STATUSES = OUTCOMES  # a step's outcome, as the plan language names it


class CliError(Exception):
    """``details``: fields the --json error object carries besides the message (a position: line, col)."""

    def __init__(self, message: str, code: int = INPUT, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or {}


def closest(name: str, choices: Iterable[str]) -> str:
    """'; did you mean 'x'?' for a near miss (a misspelling, or the start of a name), else ''."""
    choices = list(choices)
    found = difflib.get_close_matches(name, choices, n=1) or [c for c in choices if name and c.startswith(name)][:1]
    return f"; did you mean '{found[0]}'?" if found else ""


def read_text(path: str, what: str = "file", limit: int = MAX_INPUT_BYTES) -> str:
    """A text file's contents, or a CliError saying why it cannot be read (missing, a folder, a FIFO or a
    device, too large, binary, empty)."""
    if os.path.isdir(path):
        raise CliError(f"{path} is a folder; give the {what} inside it")
    if not os.path.lexists(path):
        raise CliError(f"{path}: no such {what}")
    try:
        blob = read_regular(path, limit, what)
    except ReadError as exc:
        raise CliError(str(exc)) from None
    if b"\0" in blob[:8192]:
        raise CliError(f"{path} is a binary file, not a {what}")
    try:
        text = decode_text(blob)
    except UnicodeDecodeError as exc:
        raise CliError(f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    if not text.strip():
        raise CliError(f"{path} is empty; it should hold a {what}")
    return text


def json_file(path: str, what: str) -> Any:
    text = read_text(path, what)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{path}: not valid JSON ({exc}); fix the syntax") from None
    except RecursionError:
        raise CliError(f"{path}: the JSON nests too deep to read; flatten it") from None


def json_arg(text: str, option: str, example: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = exc if isinstance(exc, ValueError) else "it nests too deep"
        raise CliError(f"{option} is not valid JSON ({why}); for example {option} '{example}'") from None


def load_library(path: str) -> Library:
    """A library file (.json, with the .dot plans beside it) or a single .dot plan, through schema and lint."""
    if path.endswith(".dot"):
        read_text(path, "DOT plan", MAX_DOT_BYTES)
        return with_dot_plans({"plans": {}}, path, [path])
    blob = read_text(path, "plan library", library_limit()).encode("utf-8")  # parsed as the engine parses it
    try:
        data = parse_json(blob)
    except ValueError:
        raise CliError(f"{path}: not valid JSON ({json_error(blob)}); fix the syntax") from None
    try:
        dots = dot_files(path)
        if dots:
            return with_dot_plans(data, path, dots)
        return check_document(data, path)
    except ValueError as exc:  # the document itself: not an object, no 'plans'
        raise CliError(str(exc)) from None


@dataclass(frozen=True)
class Source:
    """One plan picked from a file: its id, its JSON, its compiled form, and the findings that disable it."""

    plan_id: str
    raw: dict[str, Any]
    plan: Plan
    errors: tuple[str, ...]


def pick_plan(path: str, plan_id: str | None, allow_invalid: bool = True) -> Source:
    """The plan to work on: ``--plan ID`` (a near miss is named), or the only plan of the file."""
    raws, errors = _raw_plans(path)
    if not raws:
        first = next(iter(errors.values()), ("",))[0]
        raise CliError(f"{path} holds no plan" + (f": {first}" if first else ""))
    if plan_id is None:
        if len(raws) > 1:
            raise CliError(f"{path} holds {len(raws)} plans; pick one with --plan ({', '.join(raws)})")
        plan_id = next(iter(raws))
    if plan_id not in raws:
        raise CliError(f"{path} has no plan '{plan_id}'{closest(plan_id, raws)} (its plans: {', '.join(raws)})")
    found = errors.get(plan_id, ())
    if found and not allow_invalid:
        raise CliError(f"plan '{plan_id}' in {path} has {len(found)} error(s), first: {found[0]}; run graph-engine "
                       f"validate {path} (or pass --allow-invalid to run it anyway)")
    try:
        plan = compile_plan(plan_id, raws[plan_id])
    except PlanError as exc:
        raise CliError(f"plan '{plan_id}' in {path} cannot be compiled: {exc}") from None
    return Source(plan_id, raws[plan_id], plan, tuple(found))


def _raw_plans(path: str) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """Every plan's JSON in the file, and the lint errors of each (a .dot file holds one plan)."""
    if path.endswith(".dot"):
        try:
            pid, raw, _ = to_plan(parse(read_text(path, "DOT plan")))
        except DotSyntaxError as exc:
            raise CliError(f"{path}:{exc.line}:{exc.col}: {exc.message}") from None
        raws = {pid: raw}
    else:
        data = json_file(path, "plan library")
        plans = data.get("plans") if isinstance(data, dict) else None
        if not isinstance(plans, dict):
            raise CliError(f"{path}: a plan library is a JSON object with a 'plans' object")
        raws = {k: v for k, v in plans.items() if isinstance(v, dict)}
    lib = load_library(path)
    errors: dict[str, list[str]] = {}
    for d in lib.diagnostics:
        if d.severity == ERROR and d.plan in raws:
            errors.setdefault(d.plan, []).append(f"[{d.rule}] {d.message}")
    return raws, errors


def node_of(source: Source, node: str, option: str = "--from") -> str:
    if node not in source.plan.nodes:
        raise CliError(f"plan '{source.plan_id}' has no node '{node}'{closest(node, source.plan.nodes)} "
                       f"({option}; its nodes: {', '.join(source.plan.nodes)})")
    return node


def status_of(value: Any, where: str) -> str:
    if value not in STATUSES:
        raise CliError(f"{where}: unknown status {value!r}{closest(str(value), STATUSES)} "
                       f"(use one of {', '.join(STATUSES)})")
    return value


def outcome_arg(text: str) -> dict[str, Any]:
    """--outcome: an outcome object, ``{"status": ...}`` or the spec's status file ``{"outcome": ...}`` (with
    ``preferred_label``, ``suggested_next_ids``, ``context_updates``), or just a status (``fail``,
    ``'"fail"'``); statuses in any letter case (``SUCCESS``)."""
    example = '{"status": "fail", "preferred_label": "Fix"}'
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):
        if text.strip().lower() not in STATUSES:
            raise CliError(f"--outcome is not valid JSON; for example --outcome '{example}'") from None
        data = text.strip()
    if isinstance(data, str):
        data = {"status": data}
    if not isinstance(data, dict):
        raise CliError(f"--outcome must be a JSON object, e.g. '{example}'")
    return normal_outcome(data, "--outcome")


def normal_outcome(data: dict[str, Any], where: str) -> dict[str, Any]:
    """An outcome with its status under ``status`` (the spec's ``outcome`` key accepted), in lower case."""
    data = dict(data)
    if "status" not in data and "outcome" in data:
        data["status"] = data.pop("outcome")
    status = data.get("status", "success")
    data["status"] = status_of(status.lower() if isinstance(status, str) else status, where)
    for key, kind in (("preferred_label", str), ("suggested_next_ids", list), ("context_updates", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise CliError(f"{where}: {key} must be a {kind.__name__}")
    return data


def outcomes_arg(text: str, source: Source) -> dict[str, list[dict[str, Any]]]:
    """--outcomes: node -> a list of outcomes, one per visit; every node must exist, every status be known."""
    example = '{"test": [{"status": "fail"}, {"status": "success"}]}'
    data = json_arg(text, "--outcomes", example)
    if not isinstance(data, dict):
        raise CliError(f"--outcomes must be a JSON object of node -> list of outcomes, e.g. '{example}'")
    for node, visits in data.items():
        node_of(source, node, "--outcomes")
        if isinstance(visits, dict):
            visits = data[node] = [visits]
        if not isinstance(visits, list) or not all(isinstance(v, dict) for v in visits):
            raise CliError(f"--outcomes: node '{node}' needs a list of outcome objects, e.g. '{example}'")
        data[node] = [normal_outcome(v, f"--outcomes {node}[{i}]") for i, v in enumerate(visits)]
    return data


def expect_arg(path: str) -> list[dict[str, Any]]:
    """--expect: a JSON list of events, each a subset of an event's fields ({"type": ..., ...}), in order."""
    data = json_file(path, "list of expected events")
    if not isinstance(data, list) or not all(isinstance(e, dict) and isinstance(e.get("type"), str) for e in data):
        raise CliError(f"{path}: --expect needs a JSON list of event objects, each with a 'type', in the order "
                       'they must happen, e.g. [{"type": "retry_triggered", "node": "test"}, '
                       '{"type": "plan_completed"}]')
    return data


def answers_arg(text: str | None) -> list[str]:
    if not text:
        return []
    data = json_arg(text, "--answers", '["A", "Fix first"]')
    if not isinstance(data, list) or not all(isinstance(a, str) for a in data):
        raise CliError("--answers must be a JSON list of answers, e.g. '[\"A\", \"Fix first\"]'")
    return data


def transcript_arg(path: str) -> list[dict[str, Any]]:
    """--transcript: JSON lines, each {"user"}, {"tool", "code", "output"}, {"response"} or {"warning"}."""
    lines = []
    for n, line in enumerate(read_text(path, "transcript").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise CliError(f"{path}:{n}: not valid JSON ({exc})") from None
        if not isinstance(item, dict) or not {"user", "tool", "response", "warning"} & set(item):
            raise CliError(f"{path}:{n}: a transcript line is one of {{\"user\": ...}}, {{\"tool\": ..., \"code\": "
                           "..., \"output\": ...}, {\"response\": ...}, {\"warning\": ...}")
        lines.append(item)
    return lines


def run_log(path: str, plan_id: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A run's events and facts (an audit log .jsonl or a saved state .json), checked to be of ``plan_id``."""
    from .explain import load_events

    if path.endswith(".jsonl"):
        read_text(path, "run log")
    else:
        json_file(path, "run log (an audit log .jsonl or a saved state .json)")
    try:
        events, facts = load_events(path)
    except ValueError as exc:
        message = str(exc).splitlines()[0]
        raise CliError(message if message.startswith(path) else f"{path}: not a run log ({message})") from None
    if not events:
        raise CliError(f"{path} holds no event of a run (an audit log .jsonl or a saved state .json)")
    if plan_id is not None and facts.get("plan") and facts["plan"] != plan_id:
        raise CliError(f"{path} is a run of plan '{facts['plan']}', not of '{plan_id}'; pick its plan with --plan "
                       f"{facts['plan']}")
    return events, facts


def one_of(value: str, choices: Sequence[str], option: str) -> str:
    if value not in choices:
        raise CliError(f"{option} {value!r}{closest(value, choices)}: use one of {', '.join(choices)}")
    return value
