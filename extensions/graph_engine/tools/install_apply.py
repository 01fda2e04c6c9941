"""An install: planned before anything is changed (what to write, replace, move aside, remove), checked, done
with a backup of every file it replaces, and rolled back when it does not verify."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from graph_engine.tools.install_files import pack_version, payload, shipped_history
from graph_engine.tools.install_layout import (
    LIBRARY, MANIFEST, SRC, STATE_DIR, Layout, Plan, Refused, act, competing_selectors, file_sha, say, sha256)
from graph_engine.tools.install_state import (
    clear_caches, new_backup_dir, read_manifest, remove_if_empty, write_manifest)
from graph_engine.tools.user_plans import SHIPPED_BESIDE, merge

def plan_install(layout: Layout) -> Plan:
    previous = read_manifest(layout.root)
    competing = competing_selectors(layout)
    live = [layout.ext_root / "before_main_llm_call" / LIBRARY] + [p.parent / LIBRARY for p in competing]
    merged = merge(SRC / "plan_library" / LIBRARY, live, (previous or {}).get("plans", {}), shipped_history())
    files = payload(layout, merged)
    plan = Plan(layout=layout, files=files, previous=previous, merged=merged)
    ours_before = {e["path"]: e["sha256"] for e in (previous or {}).get("installed", [])}
    for rel, data in files.items():
        path = layout.root / rel
        if path.exists() and not path.is_file():
            raise Refused(f"{path} exists and is not a file; nothing was changed")
        if path.is_file() and rel not in ours_before and file_sha(path) != sha256(data):
            plan.replace.append(rel)
    plan.move_out = [layout.rel(p) for p in competing if layout.rel(p) not in ours_before]  # the user's
    plan.remove = [rel for rel in ours_before if rel not in files and (layout.root / rel).is_file()]
    return plan


def up_to_date(plan: Plan) -> bool:
    root = plan.layout.root
    if plan.previous is None or plan.move_out or plan.remove:
        return False
    return all((root / rel).is_file() and file_sha(root / rel) == sha256(data) for rel, data in plan.files.items())


# ── checks before changing anything ─────────────────────────────────────────


def writable_or_refuse(paths: list[Path]) -> None:
    for path in paths:
        probe = path
        while not probe.exists():
            probe = probe.parent
        if not probe.is_dir():
            raise Refused(f"cannot create {path}: {probe} is not a folder; nothing was changed")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise Refused(f"{probe} is read-only for this user, so {path} cannot be written; "
                          "run as the owner of the Agent-Zero tree (or root); nothing was changed")


def touched_dirs(plan: Plan) -> list[Path]:
    root = plan.layout.root
    dirs = {(root / rel).parent for rel in [*plan.files, *plan.replace, *plan.move_out, *plan.remove]}
    dirs.add(root / STATE_DIR)
    return sorted(dirs)


def install(plan: Plan, dry_run: bool) -> dict:
    """Say each action, then (unless ``dry_run``) do them: the manifest written, with ``_run`` (what this run
    backed up and created, for ``rollback``); {} on a dry run."""
    root = plan.layout.root
    verb = "would" if dry_run else "will"
    to_backup = [*plan.replace, *plan.move_out, *plan.remove,
                 *[r for r in plan.files if r not in plan.replace and (root / r).is_file()]]
    created = new_folders(plan)
    say_actions(plan, verb, to_backup, created)
    if dry_run:
        return {}
    return write_install(plan, to_backup, created)


def new_folders(plan: Plan) -> list[str]:
    """The folders the plan's files need that are not there yet (relative to the root; repeats possible)."""
    root = plan.layout.root
    created = []
    for rel in plan.files:
        parent = (root / rel).parent
        while not parent.exists() and parent != root:
            created.append(plan.layout.rel(parent))
            parent = parent.parent
    return created


def say_actions(plan: Plan, verb: str, to_backup: list[str], created: list[str]) -> None:
    """One line per action an install would do (or will do), then what happens to the user's plans."""
    root = plan.layout.root
    if to_backup:
        act("backup", f"{verb} copy {len(to_backup)} file(s) to {root / STATE_DIR / 'backups'}/<time>/")
    for rel in sorted(set(created), key=len):
        act("mkdir", f"{verb} create {rel}/")
    for rel in plan.files:
        what = "replace" if rel in plan.replace else ("update" if (root / rel).is_file() else "add")
        act(what, f"{verb} write {rel}")
    for rel in plan.move_out:
        act("move", f"{verb} move {rel} into the backup (it would compete with the new selector by name)")
    for rel in plan.remove:
        act("remove", f"{verb} remove {rel} (installed by an earlier version of this pack)")
    act("cache", f"{verb} clear __pycache__ entries of the files above")
    report_user_plans(plan, verb)


def write_install(plan: Plan, to_backup: list[str], created: list[str]) -> dict:
    """Back up, write, move aside and remove as planned; write the manifest and return it (with ``_run``)."""
    layout, root = plan.layout, plan.layout.root
    backup_rel = None
    state_created = not (root / STATE_DIR).exists()
    if to_backup:
        backup = new_backup_dir(root)
        backup_rel = layout.rel(backup)
        for rel in to_backup:
            dest = backup / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, dest)
    originals = list((plan.previous or {}).get("originals", []))
    known = {o["path"] for o in originals}
    for rel in [*plan.replace, *plan.move_out]:
        if rel not in known:
            originals.append({"path": rel, "sha256": file_sha(root / rel), "backup": f"{backup_rel}/{rel}"})
    for rel, data in plan.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".graph-engine-tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    for rel in [*plan.move_out, *plan.remove]:
        (root / rel).unlink()
    clear_caches(root, [*plan.files, *plan.move_out, *plan.remove])
    manifest = {
        "pack": "agent-zero-graph-engine", "version": pack_version(), "layout": layout.name,
        "ext_root": layout.rel(layout.ext_root), "plugin": layout.rel(layout.plugin_dir) if layout.plugin_dir else None,
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "installed": [{"path": rel, "sha256": sha256(data)} for rel, data in plan.files.items()],
        "plans": plan.merged.pack_plans if plan.merged else {},
        "originals": originals,
        "created_dirs": sorted(set(created) | set((plan.previous or {}).get("created_dirs", [])), key=len),
        "backups": [*(plan.previous or {}).get("backups", []), *([backup_rel] if backup_rel else [])],
    }
    write_manifest(root, manifest, backup_rel)
    manifest["_run"] = {"backup": backup_rel, "backed_up": to_backup, "created": sorted(set(created), key=len),
                        "state_created": state_created}
    return manifest


def report_user_plans(plan: Plan, verb: str) -> None:
    """Say what happens to each plan of the user's: every one is kept, live or disabled with its reason."""
    merged, lib = plan.merged, plan.layout.rel(plan.layout.ext_root / "before_main_llm_call" / LIBRARY)
    if merged is None:
        return
    disabled = dict(merged.disabled)
    for pid in merged.carried:
        if pid in disabled:
            act("keep", f"{verb} carry your plan '{pid}' into {lib}; the engine disables it until it is fixed: "
                        f"{disabled[pid]}")
        else:
            act("keep", f"{verb} carry your plan '{pid}' into {lib}")
    for pid in merged.kept_edits:
        note = f"; the engine disables it until it is fixed: {disabled[pid]}" if pid in disabled else ""
        act("keep", f"{verb} keep your edited plan '{pid}'{note}; the shipped version goes to {SHIPPED_BESIDE} "
                    f"beside it (take it with: bash install_graph_engine.sh --take-shipped {pid})")
    for path, problem in merged.unreadable:
        act("keep", f"could not read {path} ({problem}): no plan of it is carried; the file itself is kept in "
                    "the backup folder")


def rollback(root: Path, manifest: dict, previous: dict | None) -> bool:
    """Undo one install run: put back every file it backed up, remove what it added, restore the manifest.

    Never raises: a step that fails is named (with where its copy is) and the other steps still run."""
    run = manifest.pop("_run", None) or {"backup": None, "backed_up": [], "created": [], "state_created": False}
    backed = set(run["backed_up"])
    failed: list[str] = []

    def attempt(what: str, step) -> None:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - a rollback goes on, and says what it could not do
            failed.append(f"{what} ({type(exc).__name__}: {exc})")

    for e in manifest.get("installed", []):
        if e["path"] not in backed and (root / e["path"]).is_file():
            attempt(f"remove {e['path']}", (root / e["path"]).unlink)
    for rel in backed:
        source, dest = root / str(run["backup"]) / rel, root / rel
        attempt(f"restore {rel} from {source}",
                lambda source=source, dest=dest: (dest.parent.mkdir(parents=True, exist_ok=True),
                                                  shutil.copy2(source, dest)))
    attempt("clear compiled caches",
            lambda: clear_caches(root, [e["path"] for e in manifest.get("installed", [])] + list(backed)))
    for rel in reversed(run["created"]):
        attempt(f"remove the empty folder {rel}", lambda folder=root / rel: remove_if_empty(folder))
    if previous is None:
        attempt("remove the manifest", lambda: (root / STATE_DIR / MANIFEST).unlink(missing_ok=True))
    else:
        attempt("restore the manifest", lambda: write_manifest(root, previous, None))
    if failed:
        say(f"rollback incomplete: could not {'; could not '.join(failed)}")
        return False
    copies = f" (copies in {root / run['backup']})" if run["backup"] else ""
    if run.get("state_created"):  # every file is back: the folder this run made holds nothing still needed
        attempt(f"remove {STATE_DIR}", lambda: shutil.rmtree(root / STATE_DIR))
        copies = f"{copies}; could not {failed[-1]}" if failed else ""
    say(f"rolled back: the tree is as before this run{copies}")
    return True
