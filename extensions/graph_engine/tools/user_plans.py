"""What an install keeps of the user's plan library: the library it writes is the pack's, plus the user's.

Rules (an install or an upgrade never loses a plan):

* A plan the pack does not ship is the user's: it is carried into the installed library as it is (an old
  linear ``steps`` plan too).  One the engine would disable (schema or lint error) is carried all the same;
  the install names it and the reason, and the engine disables it at load with the same line.
* A plan with a shipped id is replaced by the shipped version when it is an unedited earlier version (its
  hash is one an earlier release shipped, ``plan_library/shipped_history.json``, or the one the last install
  recorded in its manifest).  Otherwise the user edited it: the user's version stays, and the shipped version
  is written beside the library (``htn_plan_library.shipped.json``) for ``--take-shipped``.
* ``.dot`` plans beside the library are files of their own: never read, written or removed here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..authoring.library import check_document, parse_json
from ..authoring.lint import ERROR
from ..core.model import plan_version

SHIPPED_BESIDE = "htn_plan_library.shipped.json"


@dataclass
class Merged:
    data: bytes  # the library to install
    carried: list[str] = field(default_factory=list)  # the user's own plans, carried over
    disabled: list[tuple[str, str]] = field(default_factory=list)  # (plan id, why the engine disables it)
    kept_edits: list[str] = field(default_factory=list)  # shipped plans the user edited, kept as the user's
    beside: bytes | None = None  # the shipped versions of those, for htn_plan_library.shipped.json
    pack_plans: dict[str, str] = field(default_factory=dict)  # plan id -> hash, for the plans from the pack
    unreadable: list[tuple[Path, str]] = field(default_factory=list)  # live libraries that could not be read


def dump(document: dict[str, Any]) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_plans(path: Path) -> tuple[dict[str, Any], str]:
    """The plans of a live library ({} when there is none), and why it could not be read ("" when it could)."""
    if not path.is_file():
        return {}, ""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested deeper than json reads
        return {}, f"not a JSON library ({exc})"
    plans = data.get("plans") if isinstance(data, dict) else None
    if not isinstance(plans, dict):
        return {}, "it has no 'plans' object"
    return plans, ""


def merge(shipped_path: Path, live: list[Path], recorded: dict[str, str], history: dict[str, dict]) -> Merged:
    """The library to install over ``live`` (the libraries being replaced, first one first)."""
    shipped_blob = shipped_path.read_bytes()
    shipped = json.loads(shipped_blob)
    user: dict[str, Any] = {}
    out = Merged(data=shipped_blob)
    for path in live:
        plans, problem = read_plans(path)
        if problem:
            out.unreadable.append((path, problem))
        for pid, raw in plans.items():
            user.setdefault(pid, raw)
    merged = dict(shipped["plans"])
    beside: dict[str, Any] = {}
    for pid, raw in user.items():
        if pid not in merged:
            merged[pid] = raw
            out.carried.append(pid)
            continue
        known = set(history.get(pid, {})) | {plan_version(merged[pid])}
        if recorded.get(pid):
            known.add(recorded[pid])
        if plan_version(raw) not in known:
            beside[pid], merged[pid] = merged[pid], raw
            out.kept_edits.append(pid)
    out.pack_plans = {pid: plan_version(raw) for pid, raw in shipped["plans"].items() if pid not in beside}
    if not out.carried and not out.kept_edits:
        return out  # the shipped file, byte for byte
    document = {k: v for k, v in shipped.items() if k != "plans"}
    document["plans"] = merged
    out.data = dump(document)
    if beside:
        out.beside = dump({"_about": "The shipped versions of plans you edited; your versions stay in "
                                     "htn_plan_library.json. Take one with: install_graph_engine.sh --take-shipped ID",
                           "_meta": shipped.get("_meta", {}), "plans": beside})
    lib = check_document(parse_json(out.data), str(shipped_path))  # read as the engine will read it
    for d in lib.diagnostics:
        if d.severity == ERROR and d.plan in user and all(p != d.plan for p, _ in out.disabled):
            out.disabled.append((d.plan, f"[{d.rule}] {d.message} (fix: {d.fix})"))
    return out


def take_shipped(live: bytes, shipped_path: Path, ids: list[str]) -> tuple[bytes, list[str]]:
    """The live library with these plans replaced by the shipped versions; ids the pack does not ship are
    returned as unknown (nothing is changed for them)."""
    shipped = json.loads(shipped_path.read_bytes())["plans"]
    document = json.loads(live)
    unknown = [pid for pid in ids if pid not in shipped]
    for pid in ids:
        if pid in shipped:
            document["plans"][pid] = shipped[pid]
    return dump(document), unknown
