"""Validating a library document against ``plan_library.schema.json`` (JSON Schema draft 2020-12).

The schema file is the single description of the format.  Two validators read it:

* ``jsonschema`` when it is installed and asked for (``graph-engine validate``);
* a small built-in validator for the subset of keywords the schema uses, so the
  engine inside Agent-Zero needs only the standard library (and loads fast).

Both report ``SchemaProblem(plan, path, message)`` with the same JSON paths
(``plans.<id>.graph.nodes.<node>.verify.type``); each plan is validated on its
own so one bad plan does not hide the others.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

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
    candidates.append(os.path.join(_HERE, os.pardir, os.pardir, "plan_library", SCHEMA_FILE))
    candidates.append(os.path.join(_HERE, SCHEMA_FILE))
    return next((os.path.normpath(c) for c in candidates if os.path.isfile(c)), None)


@lru_cache(maxsize=8)
def _load(path: str, _mtime_ns: int) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return json.loads(fh.read().decode("utf-8"))


def load_schema(path: str) -> dict[str, Any]:
    return _load(path, os.stat(path).st_mtime_ns)


def validate_document(doc: Any, schema: dict[str, Any], use_jsonschema: bool = False) -> list[SchemaProblem]:
    """Problems of the document's top level and of every plan, in file order."""
    problems = validate_top(doc, schema, use_jsonschema)
    if isinstance(doc, dict) and isinstance(doc.get("plans"), dict):
        for plan_id, raw in doc["plans"].items():
            problems.extend(validate_plan(plan_id, raw, schema, use_jsonschema))
    return problems


def validate_top(doc: Any, schema: dict[str, Any], use_jsonschema: bool = False) -> list[SchemaProblem]:
    """Problems of the document apart from its plans."""
    if not isinstance(doc, dict):
        return [SchemaProblem("", "$", f"the library must be a JSON object, got {_kind(doc)}")]
    top = {k: v for k, v in doc.items() if k != "plans"}
    top_schema = dict(schema)
    top_schema["properties"] = {k: v for k, v in schema["properties"].items() if k != "plans"}
    top_schema["required"] = []
    problems = [SchemaProblem("", p, m) for p, m in _run(top, top_schema, schema, "", use_jsonschema)]
    if not isinstance(doc.get("plans"), dict):
        problems.append(SchemaProblem("", "plans", "'plans' must be an object keyed by plan id"))
    return problems


def validate_plan(plan_id: str, raw: Any, schema: dict[str, Any], use_jsonschema: bool = False) -> list[SchemaProblem]:
    """Problems of one plan (each plan is validated on its own: one bad plan does not hide the others)."""
    where = f"plans.{plan_id}"
    id_pattern = schema["properties"]["plans"].get("propertyNames", {}).get("pattern")
    problems = []
    if id_pattern and not re.search(id_pattern, plan_id):
        problems.append(SchemaProblem(plan_id, where, f"plan id {plan_id!r} does not match {id_pattern}"))
    plan_schema = {"$defs": schema.get("$defs", {}), "$ref": "#/$defs/plan"}
    problems.extend(SchemaProblem(plan_id, p, m) for p, m in _run(raw, plan_schema, schema, where, use_jsonschema))
    return problems


def jsonschema_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("jsonschema") is not None


def _run(instance: Any, sub: dict[str, Any], root: dict[str, Any], where: str,
         use_jsonschema: bool) -> list[tuple[str, str]]:
    if use_jsonschema:
        import jsonschema

        validator = jsonschema.Draft202012Validator({**sub, "$defs": root.get("$defs", {})})
        found = []
        for err in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
            found.extend(_leaf_errors(err, where))
        return _dedupe(found)
    return _dedupe(list(_check(instance, sub, root, where or "$")))


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


# ── the built-in validator: the keywords plan_library.schema.json uses ──────

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


_REFS: dict[tuple[int, str], dict[str, Any]] = {}


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    key = (id(root), ref)
    node = _REFS.get(key)
    if node is None:
        node = root
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        if len(_REFS) > 256:
            _REFS.clear()
        _REFS[key] = node
    return node


@lru_cache(maxsize=256)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _check(value: Any, sub: dict[str, Any], root: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    if "$ref" in sub:
        yield from _check(value, _resolve(sub["$ref"], root), root, path)
    expected = sub.get("type")
    if expected is not None and not _TYPES[expected](value):
        yield path, _message("type", expected, value)
        return
    if "enum" in sub and value not in sub["enum"]:
        yield path, _message("enum", sub["enum"], value)
    if isinstance(value, str):
        if len(value) < sub.get("minLength", 0):
            yield path, _message("minLength", sub["minLength"], value)
        elif "pattern" in sub and not _rx(sub["pattern"]).search(value):
            yield path, _message("pattern", sub["pattern"], value)
    if isinstance(value, int) and not isinstance(value, bool) and value < sub.get("minimum", value):
        yield path, _message("minimum", sub["minimum"], value)
    if isinstance(value, list):
        if len(value) < sub.get("minItems", 0):
            yield path, _message("minItems", sub["minItems"], value)
        if "items" in sub:
            for i, item in enumerate(value):
                yield from _check(item, sub["items"], root, f"{path}[{i}]")
    if isinstance(value, dict):
        yield from _check_object(value, sub, root, path)
    if "oneOf" in sub:
        passing = sum(1 for option in sub["oneOf"] if not any(_check(value, option, root, path)))
        if passing != 1:
            yield path, "needs exactly one of 'graph' or 'steps'"


def _check_object(value: dict, sub: dict[str, Any], root: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    required = [k for k in sub.get("required", ()) if k not in value]
    if required:
        yield path, _message("required", sub["required"], value)
    if len(value) < sub.get("minProperties", 0):
        yield path, _message("minProperties", sub["minProperties"], value)
    props = sub.get("properties", {})
    patterns = sub.get("patternProperties", {})
    extra = sub.get("additionalProperties", True)
    names = sub.get("propertyNames")
    for key, item in value.items():
        where = f"{path}.{key}" if path != "$" else key
        if names is not None and "pattern" in names and not _rx(names["pattern"]).search(key):
            yield where, _message("propertyNames", names, key)
        if key in props:
            yield from _check(item, props[key], root, where)
            continue
        matched = [p for p in patterns if _rx(p).search(key)] if patterns else []
        for p in matched:
            yield from _check(item, patterns[p], root, where)
        if matched:
            continue
        if extra is False:
            yield where, _message("additionalProperties", False, item)
        elif isinstance(extra, dict):
            yield from _check(item, extra, root, where)
