"""Putting back: ``--uninstall`` (the originals restored byte for byte, only the pack's files removed) and
``--take-shipped`` (the shipped version of a plan the user edited replaces theirs)."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

from graph_engine.tools.install_apply import writable_or_refuse
from graph_engine.tools.install_layout import LIBRARY, MANIFEST, SRC, STATE_DIR, Refused, act, file_sha, say, sha256
from graph_engine.tools.install_state import (
    clear_caches, new_backup_dir, read_manifest, remove_if_empty, write_manifest)
from graph_engine.tools.user_plans import SHIPPED_BESIDE, read_plans, take_shipped

def uninstall(root: Path, dry_run: bool, keep_under: Path | None = None) -> int:
    """Restore what the pack replaced and remove what it installed.  ``keep_under``: a plugin folder that
    Agent-Zero deletes itself right after (its files stay for it to delete)."""
    manifest = read_manifest(root)
    if manifest is None:
        raise Refused(f"no install manifest at {root / STATE_DIR / MANIFEST}: this pack is not installed here "
                      "(or was installed by hand); nothing was changed")
    verb = "would" if dry_run else "will"
    changed_by_user = [e["path"] for e in manifest["installed"]
                       if (root / e["path"]).is_file() and (file_sha(root / e["path"]) != e["sha256"]
                                                            or added_plans(root, e["path"], manifest))]
    for e in manifest["installed"]:
        note = (" (it holds your changes or plans: a copy goes to the backup folder first)"
                if e["path"] in changed_by_user else "")
        act("remove", f"{verb} remove {e['path']}{note}")
    for o in manifest["originals"]:
        act("restore", f"{verb} restore {o['path']} from {o['backup']}")
    missing = [o for o in manifest["originals"] if not (root / o["backup"]).is_file()]
    if missing:
        raise Refused(f"backup file {root / missing[0]['backup']} is missing, so {missing[0]['path']} cannot be "
                      "restored; nothing was changed")
    writable_or_refuse(sorted({(root / e["path"]).parent for e in manifest["installed"]}))
    if dry_run:
        return 0
    if changed_by_user:
        keep_edited_copies(root, changed_by_user, manifest)
    for e in manifest["installed"]:
        path = root / e["path"]
        if path.is_file() and not (keep_under is not None and path.is_relative_to(keep_under)):
            path.unlink()
    for o in manifest["originals"]:
        dest = root / o["path"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / o["backup"], dest)
        if file_sha(dest) != o["sha256"]:
            raise Refused(f"restored {dest} does not match its recorded sha256; the backup is in {o['backup']}")
    clear_caches(root, [e["path"] for e in manifest["installed"]] + [o["path"] for o in manifest["originals"]])
    remove_created_dirs(root, manifest.get("created_dirs", []), keep_under)
    (root / STATE_DIR / MANIFEST).unlink()  # each backup folder holds the manifest as it was when it was made
    if keep_under is not None:  # deleting the plugin leaves the tree as it was before it was installed
        drop_restored_backups(root, manifest.get("backups", []), keep_under)
    kept = leave_only_backups(root)
    say(f"uninstalled: {len(manifest['installed'])} file(s) removed, {len(manifest['originals'])} restored; "
        + (f"kept: {', '.join(kept)}" if kept else f"nothing of the pack is left in {root}"))
    return 0


def keep_edited_copies(root: Path, rels: list[str], manifest: dict) -> None:
    """Before an uninstall removes them: the pack's files the user changed (or added plans to), copied to a new
    backup folder, each named (and a library's added plans)."""
    keep = new_backup_dir(root)
    for rel in rels:
        (keep / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, keep / rel)
        say(f"kept your edited copy of {rel} in {keep / rel}")
        if rel.endswith("/" + LIBRARY):
            added = added_plans(root, rel, manifest)
            if added:
                say(f"  it holds your plans {', '.join(added)}, which the restored library does not have: copy "
                    f"them back from there when you need them")


def remove_created_dirs(root: Path, created: list[str], keep_under: Path | None) -> None:
    """The folders the pack created, deepest first, when nothing is left in them (an empty __pycache__ aside);
    not those under ``keep_under``."""
    for rel in sorted(created, key=len, reverse=True):
        folder = root / rel
        if keep_under is not None and folder.is_relative_to(keep_under):
            continue
        cache = folder / "__pycache__"
        if cache.is_dir() and not any(cache.iterdir()):
            cache.rmdir()
        remove_if_empty(folder)

def drop_restored_backups(root: Path, backups: list[str], keep_under: Path) -> None:
    """Remove the backup folders that hold nothing the tree does not have again byte for byte (a file under
    ``keep_under``, about to be deleted, does not count as there)."""
    for rel in backups:
        folder = root / rel
        if not folder.is_dir():
            continue
        copies = [p for p in folder.rglob("*") if p.is_file() and p != folder / MANIFEST]
        live = [root / p.relative_to(folder) for p in copies]
        if all(t.is_file() and not t.is_relative_to(keep_under) and file_sha(t) == file_sha(c)
               for c, t in zip(copies, live)):
            shutil.rmtree(folder)


def leave_only_backups(root: Path) -> list[str]:
    """After an uninstall: remove the pack's empty state folders; name what is left (backup folders, and the
    audit logs of past runs, which are the user's record)."""
    state = root / STATE_DIR
    backups = state / "backups"
    kept = [f"{STATE_DIR.as_posix()}/backups/{b.name}/" for b in sorted(backups.iterdir())] if backups.is_dir() else []
    if (state / "runs").is_dir():
        kept.append(f"{STATE_DIR.as_posix()}/runs/ (the audit logs of past runs)")
    remove_if_empty(backups)
    remove_if_empty(state)
    return kept


def added_plans(root: Path, rel: str, manifest: dict) -> list[str]:
    """Plans in the live library that neither the pack installed nor the original it replaced holds."""
    if not rel.endswith("/" + LIBRARY):
        return []
    original = next((o for o in manifest.get("originals", []) if o["path"] == rel), None)
    before = set(read_plans(root / original["backup"])[0]) if original else set()
    for o in manifest.get("originals", []):  # a library that stays beside a selector the pack moved aside
        beside = (root / o["path"]).parent / LIBRARY
        if beside != root / rel and beside.is_file():
            before |= set(read_plans(beside)[0])
    return [pid for pid in read_plans(root / rel)[0] if pid not in manifest.get("plans", {}) and pid not in before]


def take(root: Path, ids: list[str], dry_run: bool) -> int:
    """--take-shipped: the shipped version of plans the user edited replaces theirs (a backup is kept)."""
    manifest = read_manifest(root)
    if manifest is None:
        raise Refused(f"the pack is not installed at {root} (no {STATE_DIR / MANIFEST}); nothing was changed")
    hook = root / manifest["ext_root"] / "before_main_llm_call"
    library, beside = hook / LIBRARY, hook / SHIPPED_BESIDE
    kept = read_plans(beside)[0]
    ids = list(kept) if ids == ["all"] else ids
    if not ids:
        raise Refused(f"no edited plan waits for its shipped version ({beside} is absent); nothing was changed")
    new_library, unknown = take_shipped(library.read_bytes(), SRC / "plan_library" / LIBRARY, ids)
    if unknown:
        shipped = list(json.loads((SRC / "plan_library" / LIBRARY).read_text())["plans"])
        close = difflib.get_close_matches(unknown[0], shipped, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise Refused(f"the pack ships no plan {', '.join(repr(u) for u in unknown)}; {hint}it ships: "
                      f"{', '.join(shipped)}; nothing was changed")
    for pid in ids:
        act("replace", f"{'would' if dry_run else 'will'} replace your plan '{pid}' in {library} by the shipped one")
    if dry_run:
        return 0
    backup = new_backup_dir(root)
    for path in (library, beside):
        if path.is_file():
            (backup / path.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, backup / path.relative_to(root))
    library.write_bytes(new_library)
    rest = {pid: raw for pid, raw in kept.items() if pid not in ids}
    entries = {e["path"]: e for e in manifest["installed"]}
    entries[library.relative_to(root).as_posix()]["sha256"] = sha256(new_library)
    beside_rel = beside.relative_to(root).as_posix()
    if rest:
        blob = json.loads(beside.read_text())
        blob["plans"] = rest
        beside.write_text(json.dumps(blob, indent=2, ensure_ascii=False) + "\n")
        entries[beside_rel]["sha256"] = file_sha(beside)
    elif beside.is_file():
        beside.unlink()
        entries.pop(beside_rel, None)
    manifest["installed"] = list(entries.values())
    from graph_engine.core.model import plan_version
    shipped = json.loads((SRC / "plan_library" / LIBRARY).read_text())["plans"]
    manifest.setdefault("plans", {}).update({pid: plan_version(shipped[pid]) for pid in ids})
    write_manifest(root, manifest, backup.relative_to(root).as_posix())
    say(f"took the shipped version of {', '.join(ids)}; your versions are in {backup}")
    return 0
