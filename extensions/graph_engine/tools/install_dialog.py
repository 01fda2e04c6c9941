"""The install through Agent-Zero's Plugins dialog: called by the plugin's ``hooks.py`` when the plugin is
installed, deleted or updated."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from graph_engine.tools.install_apply import install, rollback, touched_dirs, writable_or_refuse
from graph_engine.tools.install_files import shipped_history
from graph_engine.tools.install_layout import (
    DIALOG, LIBRARY, MANIFEST, PLUGIN, REQUIREMENT, SRC, STATE_DIR, Layout, Plan, Refused, competing_selectors, say)
from graph_engine.tools.install_restore import uninstall
from graph_engine.tools.install_state import new_backup_dir, read_manifest, write_manifest
from graph_engine.tools.install_verify import install_optional, print_verification, verify
from graph_engine.tools.user_plans import SHIPPED_BESIDE, merge

def a0_root_of(plugin_dir: Path) -> Path:
    """Agent-Zero's root for a plugin folder ``<root>/usr/plugins/<name>``."""
    if plugin_dir.parent.name != "plugins" or plugin_dir.parent.parent.name != "usr":
        raise Refused(f"{plugin_dir} is not a folder usr/plugins/<name> of an Agent-Zero tree; nothing was changed")
    return plugin_dir.parent.parent.parent


def adopt(plugin_dir: Path, python: str | None = None) -> dict:
    """hooks.install(): the plugin folder the dialog wrote is the install.  Take over from a linear selector that
    would outrank it (usr/extensions/python/ is read before plugins; the selector is kept in a backup and named in
    the manifest), carry the user's plans into the plugin's library, verify, record it all in the one manifest.
    Raises Refused with the tree as it was when it cannot."""
    root = a0_root_of(plugin_dir)
    layout = Layout("new", root, plugin_dir / "extensions" / "python", "helpers.extension", plugin_dir)
    previous = read_manifest(root)
    if previous is not None and previous.get("plugin") != layout.rel(plugin_dir):
        raise Refused(f"the pack is already installed by install_graph_engine.sh into {previous.get('ext_root')}/, "
                      f"which Agent-Zero reads before any plugin; run `bash install_graph_engine.sh --uninstall "
                      f"--yes` first, then install the plugin again; nothing was changed")
    competing = competing_selectors(layout)
    hook = layout.ext_root / "before_main_llm_call"
    merged = merge(SRC / "plan_library" / LIBRARY, [hook / LIBRARY] + [p.parent / LIBRARY for p in competing],
                   (previous or {}).get("plans", {}), shipped_history())
    files = {layout.rel(hook / LIBRARY): merged.data}
    if merged.beside is not None:
        files[layout.rel(hook / SHIPPED_BESIDE)] = merged.beside
    plan = Plan(layout=layout, files=files, merged=merged, previous=previous,
                move_out=[layout.rel(p) for p in competing])
    plan.remove = [e["path"] for e in (previous or {}).get("installed", [])
                   if e["path"] not in files and (root / e["path"]).is_file()]
    writable_or_refuse(touched_dirs(plan))
    manifest = install(plan, dry_run=False)
    good, report = verify(layout, python or sys.executable, list(merged.pack_plans))
    if not good:
        print_verification(report)
        rollback(root, manifest, previous)
        raise Refused(f"the plugin's extension files or plans did not load in {python or sys.executable} (see the "
                      "lines above); the tree is as it was")
    manifest.pop("_run")
    manifest["form"] = DIALOG
    write_manifest(root, manifest, None)
    missing = tuple(name for name, present in report["optional"].items() if not present)
    if missing:  # what makes it match by meaning and run faster; the engine works without them
        try:
            code = install_optional(python or sys.executable, missing)
        except OSError as exc:
            code = f"{type(exc).__name__}: {exc}"
        if code != 0:
            say(f"pip could not install {' '.join(missing)} ({code}); the engine works without them (by words "
                f"only, without wordllama); install them later with: {python or sys.executable} -m pip install "
                + " ".join(f"'{REQUIREMENT[n]}'" for n in missing))
    return manifest


def release(plugin_dir: Path) -> int:
    """hooks.uninstall(): restore what the plugin replaced and drop its record; Agent-Zero deletes the folder."""
    root = a0_root_of(plugin_dir)
    manifest = read_manifest(root)
    if manifest is None or manifest.get("plugin") != Path(plugin_dir).relative_to(root).as_posix():
        say(f"no install record of usr/plugins/{PLUGIN} at {root / STATE_DIR / MANIFEST}: nothing to restore")
        return 0
    return uninstall(root, dry_run=False, keep_under=plugin_dir)


def keep_user_data(plugin_dir: Path) -> str | None:
    """hooks.pre_update(): copy what is the user's in the plugin folder (the library with their plans, the saved
    settings) to a new backup folder before Agent-Zero pulls the new version; its path, or None when there is
    nothing to keep.  (A pull keeps these untracked files; the copy is there should it fail half-way.)"""
    root = a0_root_of(plugin_dir)
    hook = plugin_dir / "extensions" / "python" / "before_main_llm_call"
    mine = [p for p in (hook / LIBRARY, hook / SHIPPED_BESIDE, plugin_dir / "config.json") if p.is_file()]
    mine += sorted(p for p in hook.glob("*.dot") if p.is_file())  # workflows saved from a chat, and the user's own
    if not mine:
        return None
    backup = new_backup_dir(root)
    for path in mine:
        dest = backup / path.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    manifest = read_manifest(root)
    if manifest is not None:
        manifest["backups"] = [*manifest.get("backups", []), backup.relative_to(root).as_posix()]
        write_manifest(root, manifest, None)
    say(f"before the update: copied {', '.join(p.name for p in mine)} to {backup}")
    return str(backup)
