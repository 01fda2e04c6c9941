"""Validating a library document against ``plan_library.schema.json`` (JSON Schema draft 2020-12).

The schema file is the single description of the format, and ``jsonschema`` (in every Agent-Zero
environment: ``litellm`` and ``mcp`` require it) is its one validator.  Each validator is built once per
schema file and reused.  Without ``jsonschema`` there is no schema check (``SCHEMA_OFF`` says so in one
line); the plan compiler's own type checks still refuse what the engine cannot run.

Problems are ``SchemaProblem(plan, path, message)`` with JSON paths such as
``plans.<id>.graph.nodes.<node>.verify.type``; each plan is validated on its own so one bad plan does not
hide the others.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

try:  # imported with the engine (every Agent-Zero environment has it: litellm and mcp depend on it)
    import jsonschema
except ImportError:  # pragma: no cover - depends on the environment
    jsonschema = None

SCHEMA_FILE = "plan_library.schema.json"
_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class SchemaProblem:
    plan: str  # "" for the document itself
    path: str
    message: str


def find_schema(library_path: str = "") -> str | None:
    """The schema beside the library file, else the one shipped with the source tree."""
    candidates = []
    if library_path:
        candidates.append(os.path.join(os.path.dirname(os.path.abspath(library_path)), SCHEMA_FILE))
    candidates.append(os.path.join(_HERE, os.pardir, os.pardir, os.pardir, "plan_library", SCHEMA_FILE))
    return next((os.path.normpath(c) for c in candidates if os.path.isfile(c)), None)


@lru_cache(maxsize=8)
def _load(path: str, _mtime_ns: int) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return json.loads(fh.read().decode("utf-8"))


def load_schema(path: str) -> dict[str, Any]:
    return _load(path, os.stat(path).st_mtime_ns)


def validate_document(doc: Any, schema: dict[str, Any]) -> list[SchemaProblem]:
    """Problems of the document's top level and of every plan, in file order."""
    problems = validate_top(doc, schema)
    if isinstance(doc, dict) and isinstance(doc.get("plans"), dict):
        for plan_id, raw in doc["plans"].items():
            problems.extend(validate_plan(plan_id, raw, schema))
    return problems


def validate_top(doc: Any, schema: dict[str, Any]) -> list[SchemaProblem]:
    """Problems of the document apart from its plans."""
    if not isinstance(doc, dict):
        return [SchemaProblem("", "$", f"the library must be a JSON object, got {_kind(doc)}")]
    top = {k: v for k, v in doc.items() if k != "plans"}
    problems = [SchemaProblem("", p, m) for p, m in _run(top, _validators(schema)[0], "")]
    if not isinstance(doc.get("plans"), dict):
        problems.append(SchemaProblem("", "plans", "'plans' must be an object keyed by plan id"))
    return problems


def validate_plan(plan_id: str, raw: Any, schema: dict[str, Any]) -> list[SchemaProblem]:
    """Problems of one plan (each plan is validated on its own: one bad plan does not hide the others)."""
    where = f"plans.{plan_id}"
    id_pattern = schema["properties"]["plans"].get("propertyNames", {}).get("pattern")
    problems = []
    if id_pattern and not re.search(id_pattern, plan_id):
        problems.append(SchemaProblem(plan_id, where, f"plan id {plan_id!r} does not match {id_pattern}"))
    problems.extend(SchemaProblem(plan_id, p, m) for p, m in _run(raw, _validators(schema)[1], where))
    return problems


def jsonschema_available() -> bool:
    return jsonschema is not None


SCHEMA_OFF = ("jsonschema is not installed: plans are not checked against plan_library.schema.json (the plan "
              "compiler still refuses what the engine cannot run, with less precise messages)")


_BUILT: dict[int, tuple[dict[str, Any], Any, Any]] = {}


def _validators(schema: dict[str, Any]) -> tuple[Any, Any]:
    """(the document's top level without its plans, one plan): built once per schema and reused."""
    built = _BUILT.get(id(schema))
    if built is not None and built[0] is schema:
        return built[1], built[2]
    defs = schema.get("$defs", {})
    top_schema = dict(schema, properties={k: v for k, v in schema["properties"].items() if k != "plans"},
                      required=[])
    top = jsonschema.Draft202012Validator(top_schema)
    try:
        plan_schema = _inline(defs["plan"], defs)
    except RecursionError:
        plan_schema = {"$defs": defs, "$ref": "#/$defs/plan"}
    plan = jsonschema.Draft202012Validator(plan_schema)
    if len(_BUILT) >= 8:
        _BUILT.clear()
    _BUILT[id(schema)] = (schema, top, plan)
    return top, plan


def _inline(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """The schema with each local ``#/$defs/<name>`` reference replaced by its definition: the same checks,
    without a reference lookup per value (that lookup is most of jsonschema's time on a plan).  A schema
    whose definitions refer to themselves is left as it is."""
    if depth > 32:
        raise RecursionError("recursive $defs")
    if isinstance(node, list):
        return [_inline(item, defs, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _inline(v, defs, depth + 1) for k, v in node.items() if k != "$ref"}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
        target = _inline(defs[ref[8:]], defs, depth + 1)
        if set(target) & set(out):
            out["allOf"] = [*out.get("allOf", []), target]
        else:
            out.update(target)
    elif ref is not None:
        out["$ref"] = ref
    return out


def _run(instance: Any, validator: Any, where: str) -> list[tuple[str, str]]:
    found = []
    for err in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        found.extend(_leaf_errors(err, where))
    return _dedupe(found)


def _leaf_errors(err: Any, where: str) -> list[tuple[str, str]]:
    """jsonschema reports oneOf failures as one error with a context; keep the useful leaves."""
    base = _join(where, err.absolute_path)
    if err.validator == "oneOf":
        return [(base, "needs exactly one of 'graph' or 'steps'")]
    if err.validator == "additionalProperties":
        props, patterns = err.schema.get("properties", {}), err.schema.get("patternProperties", {})
        extra = [k for k in err.instance if k not in props and not any(re.search(p, k) for p in patterns)]
        return [(_join(base, [k]), _message("additionalProperties", False, None)) for k in extra]
    if err.validator == "propertyNames":
        return [(_join(base, [err.instance]), _message("propertyNames", None, err.instance))]
    return [(_join(where, err.absolute_path), _message(err.validator, err.validator_value, err.instance))]


def _join(where: str, parts: Any) -> str:
    path = where or "$"
    for part in parts:
        if path == "$" and not isinstance(part, int):
            path = str(part)
            continue
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _dedupe(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    return [i for i in items if not (i in seen or seen.add(i))]


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def _kind(value: Any) -> str:
    for name, test in _TYPES.items():
        if test(value):
            return name
    return "null" if value is None else type(value).__name__


def _message(keyword: str, expected: Any, value: Any) -> str:
    """One wording per keyword, shared by both validators so their reports agree."""
    if keyword == "type":
        return f"must be of type {expected}, got {_kind(value)}"
    if keyword == "enum":
        return f"{value!r} is not one of {', '.join(map(str, expected))}"
    if keyword == "required":
        missing = [k for k in expected if k not in value] if isinstance(value, dict) else expected
        return f"missing required field(s): {', '.join(missing)}"
    if keyword == "additionalProperties":
        return "unknown field (check its spelling; fields starting with '_' are free for notes)"
    if keyword == "minimum":
        return f"must be >= {expected}, got {value!r}"
    if keyword in ("minLength", "pattern") and isinstance(value, str) and not value.strip():
        return "must not be empty"
    if keyword == "pattern":
        return f"{value!r} does not match {expected}"
    if keyword in ("minItems", "minProperties"):
        return "must not be empty"
    if keyword == "propertyNames":
        return f"{value!r} is not a valid id"
    return f"fails {keyword}"
