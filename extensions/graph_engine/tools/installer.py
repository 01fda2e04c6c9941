"""Install, upgrade, verify and uninstall the pack in an Agent-Zero tree (run by install_graph_engine.sh).

Standard library only; run as a script (it is not installed into Agent-Zero).

What it touches, and nothing else:
* ``<ext root>/before_main_llm_call/_15_htn_plan_selector.py`` (replaces the linear selector),
  ``htn_plan_library.json`` and ``plan_library.schema.json`` beside it;
* ``<ext root>/message_loop_prompts_after/_75_graph_workflow_context.py``;
* ``<ext root>/agent_init/_90_graph_engine_warm_up.py`` (loads the library before a chat's first message);
* ``<ext root>/graph_engine/`` (the engine package; the loader in the two files finds it there);
* ``<root>/usr/graph_engine/`` (install manifest and backups);
* with ``--plugin``: the plugin folder ``<root>/usr/plugins/graph_workflow_engine/``, holding the same files as
  the ZIP of ``make plugin`` (``plugin_files``) plus the merged library.

A plugin installed by Agent-Zero's own Plugins dialog (from the ZIP or a Git URL) is recorded in the same
manifest by its ``hooks.py`` (``adopt`` and ``release``, form ``dialog``), so either route sees the other.

``<ext root>`` is ``python/extensions`` on the old layout (v0.9.x) and ``usr/extensions/python`` (or the
plugin's ``extensions/python``) on the new one.  Every file it replaces is copied to a new backup folder
first; the manifest records what was installed (path, sha256) and what was replaced, so ``--uninstall``
restores the originals byte for byte and removes only what this pack put there.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script by install_graph_engine.sh: the package is two folders up
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from graph_engine.tools import dagre  # noqa: E402
from graph_engine.tools.user_plans import SHIPPED_BESIDE, Merged, merge, read_plans, take_shipped  # noqa: E402

SRC = Path(__file__).resolve().parents[3]  # the repository
PACKAGE = SRC / "extensions" / "graph_engine"  # the runtime: its own modules, not its tools/ subpackage
SRC_HOOKS = SRC / "extensions" / "python"  # the three extension files, in the v1.x layout
SELECTOR = "_15_htn_plan_selector.py"
COMPANION = "_75_graph_workflow_context.py"
WARM_UP = "_90_graph_engine_warm_up.py"
LOADER = "graph_engine_loader.py"  # beside the hook folders: the one loader the three hook files call
CONTROL_API = "workflow_control.py"  # the plugin's API handler: the web UI component's buttons (api/)
CORE_CONTROL_API = "graph_workflow_control.py"  # the same handler in Agent-Zero's own api/ (the shell form, v1.x)
LIBRARY = "htn_plan_library.json"
SCHEMA = "plan_library.schema.json"
PLUGIN = "graph_workflow_engine"
STATE_DIR = Path("usr") / "graph_engine"
MANIFEST = "install_manifest.json"
FRAMEWORK_PYTHON = "/opt/venv-a0/bin/python"
MARK = "Graph workflow engine"  # first line of this pack's extension files
DIALOG = "dialog"  # the manifest's form for a plugin that Agent-Zero's Plugins dialog installed
PLUGIN_TOP = ("plugin.yaml", "hooks.py", "execute.py", "default_config.yaml", "LICENSE", "package.json",
              "package-lock.json")  # (the lock: what a plugin without its layout library downloads)
PLUGIN_README = "docs/plugin-readme.md"  # the plugin folder's README.md: written for a reader inside Agent-Zero
PLUGIN_TOOLS = ("__init__.py", "installer.py", "user_plans.py", "dagre.py")  # what hooks.py needs
OPTIONAL = ("orjson", "jsonschema", "wordllama")  # wordllama: requests matched by meaning, not only by words
REQUIREMENT = {"orjson": "orjson>=3.9", "jsonschema": "jsonschema>=4.18", "wordllama": "wordllama>=0.4,<0.5"}


class Refused(Exception):
    """The tree is not one this installer may change; nothing was changed."""


@dataclass
class Layout:
    name: str  # "old" | "new"
    root: Path
    ext_root: Path  # the folder that holds the hook folders
    base_module: str  # where Extension is imported from
    plugin_dir: Path | None = None

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


@dataclass
class Plan:
    """Everything an install would do, computed before anything is changed."""

    layout: Layout
    files: dict[str, bytes]  # path relative to the root -> content
    merged: Merged | None = None  # the library: the pack's plans and the user's
    replace: list[str] = field(default_factory=list)  # existing files that are not ours (or an earlier ours)
    move_out: list[str] = field(default_factory=list)  # other copies of the old selector that would compete
    remove: list[str] = field(default_factory=list)  # files an earlier version of the pack installed, gone now
    previous: dict | None = None


def say(text: str = "") -> None:
    print(text, flush=True)


def act(label: str, text: str) -> None:
    """One planned or performed action, labels aligned."""
    say(f"{label + ':':<9}{text}")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str:
    return sha256(path.read_bytes())


# ── layout ──────────────────────────────────────────────────────────────────


def detect(root: Path, plugin: bool) -> Layout:
    if not root.is_dir():
        raise Refused(f"{root} is not a folder; pass the Agent-Zero root with --a0-root DIR")
    old = (root / "python" / "extensions").is_dir()
    new = (root / "extensions" / "python").is_dir()
    if old and new:
        raise Refused(f"{root} has both python/extensions/ (v0.9.x) and extensions/python/ (v1.x); "
                      "this does not look like one Agent-Zero tree, so nothing was changed")
    if old:
        if not (root / "python" / "helpers" / "extension.py").is_file():
            raise Refused(f"{root}/python/extensions exists but python/helpers/extension.py does not; "
                          "this does not look like Agent-Zero v0.9.x, so nothing was changed")
        if plugin:
            raise Refused("--plugin needs the v1.x layout (usr/plugins/); this tree is v0.9.x")
        return Layout("old", root, root / "python" / "extensions", "python.helpers.extension")
    if new:
        if not (root / "helpers" / "extension.py").is_file():
            raise Refused(f"{root}/extensions/python exists but helpers/extension.py does not; "
                          "this does not look like Agent-Zero v1.x, so nothing was changed")
        if plugin:
            pdir = root / "usr" / "plugins" / PLUGIN
            return Layout("new", root, pdir / "extensions" / "python", "helpers.extension", pdir)
        return Layout("new", root, _new_ext_root(root), "helpers.extension")
    raise Refused(f"no Agent-Zero found at {root}: neither python/extensions/before_main_llm_call/ (v0.9.x) "
                  "nor extensions/python/ (v1.x); pass the right folder with --a0-root DIR")


def _new_ext_root(root: Path) -> Path:
    """Where the old selector lives among the user's code, else usr/extensions/python."""
    user = root / "usr" / "extensions" / "python"
    if (user / "before_main_llm_call" / SELECTOR).is_file():
        return user
    plugins = root / "usr" / "plugins"
    for found in sorted(plugins.glob(f"*/extensions/python/before_main_llm_call/{SELECTOR}")):
        return found.parent.parent
    return user


def competing_selectors(layout: Layout) -> list[Path]:
    """Other user copies of _15_htn_plan_selector.py that would compete with ours by name."""
    if layout.name == "old":
        return []
    ours = layout.ext_root / "before_main_llm_call" / SELECTOR
    found = [layout.root / "usr" / "extensions" / "python" / "before_main_llm_call" / SELECTOR]
    found += sorted((layout.root / "usr" / "plugins").glob(f"*/extensions/python/before_main_llm_call/{SELECTOR}"))
    return [p for p in found if p.is_file() and p != ours]


# ── what to install ─────────────────────────────────────────────────────────


def runtime_files(package: Path = PACKAGE) -> list[Path]:
    """The engine package as it runs inside Agent-Zero: its modules and subpackages (their data files too), not
    its tools/ (the command line, the installer)."""
    found = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if not path.is_file() or rel.parts[0] == "tools" or "__pycache__" in rel.parts:
            continue
        if path.suffix == ".py" or (len(rel.parts) > 1 and rel.parts[-2] == "data" and path.suffix == ".json"):
            found.append(path)
    return found


def web_ui_files(src: Path = SRC) -> list[Path]:
    """The pack's web UI extensions (v1.x: the workflow component and the strip above the chat input), as
    ``extensions/webui/<point>/<file>``, and the component's modules beside them in
    ``extensions/webui/graph_workflow_engine/``, its layout library (``dagre.TARGET``) when it was built."""
    return sorted(p for p in (src / "extensions" / "webui").rglob("*")
                  if p.is_file() and p.suffix in (".js", ".html") and "__pycache__" not in p.parts)


def layout_library(root: Path, have: dict[Path, bytes]) -> None:
    """The web UI's layout library at ``root / dagre.TARGET`` in ``have`` (what an install writes): from this
    checkout when it was built, else downloaded as package-lock.json pins it (checked); without it, one line (the
    component then draws a plain layout)."""
    target = root / dagre.TARGET
    if target in have:
        return
    if not _FETCHED:  # once per run of the installer
        try:
            _FETCHED.append(dagre.fetched(SRC))
        except dagre.LibraryError as exc:
            _FETCHED.append(None)
            say(f"the graph layout library is missing: {exc}; {dagre.MISSING}")
    if _FETCHED[0] is not None:
        have[target] = _FETCHED[0]


_FETCHED: list[bytes | None] = []


def plugin_files(src: Path = SRC) -> dict[str, bytes]:
    """What runs inside Agent-Zero, as the plugin folder holds it (paths relative to the plugin's root): the
    ZIP of ``make plugin`` and an install with ``--plugin`` hold exactly these (no tests, fixtures or bench)."""
    hooks = src / "extensions" / "python"
    found = [src / name for name in PLUGIN_TOP]
    found += [src / "api" / CONTROL_API]
    found += sorted((src / "webui").rglob("*"))
    found += web_ui_files(src)
    found += [hooks / "before_main_llm_call" / SELECTOR, hooks / "message_loop_prompts_after" / COMPANION,
              hooks / "agent_init" / WARM_UP, hooks / LOADER]
    found += runtime_files(src / "extensions" / "graph_engine")
    found += [src / "extensions" / "graph_engine" / "tools" / name for name in PLUGIN_TOOLS]  # not the CLI
    found += sorted((src / "plan_library").glob("*.json"))
    files = {p.relative_to(src).as_posix(): p.read_bytes() for p in found
             if p.is_file() and "__pycache__" not in p.parts}
    files["README.md"] = (src / PLUGIN_README).read_bytes()
    return files


def build_zip(out_dir: Path) -> Path:
    """``make plugin``: ``<out_dir>/graph_workflow_engine-<version>.zip`` holding ``plugin_files()`` in one folder
    named after the plugin, byte-identical for the same sources (fixed times, sorted)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{PLUGIN}-{pack_version()}.zip"
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for rel, data in sorted(plugin_files().items()):
            info = zipfile.ZipInfo(f"{PLUGIN}/{rel}", date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    os.replace(tmp, path)
    return path


def payload(layout: Layout, merged: Merged) -> dict[str, bytes]:
    ext = layout.ext_root
    if layout.plugin_dir is not None:
        files = {layout.plugin_dir / rel: data for rel, data in plugin_files().items()}
        layout_library(layout.plugin_dir, files)
        files[ext / "before_main_llm_call" / LIBRARY] = merged.data
        if merged.beside is not None:
            files[ext / "before_main_llm_call" / SHIPPED_BESIDE] = merged.beside
        return {layout.rel(p): data for p, data in files.items()}
    files = {
        ext / "before_main_llm_call" / SELECTOR: (SRC_HOOKS / "before_main_llm_call" / SELECTOR).read_bytes(),
        ext / "before_main_llm_call" / LIBRARY: merged.data,
        ext / "before_main_llm_call" / SCHEMA: (SRC / "plan_library" / SCHEMA).read_bytes(),
        ext / "message_loop_prompts_after" / COMPANION:
            (SRC_HOOKS / "message_loop_prompts_after" / COMPANION).read_bytes(),
        ext / "agent_init" / WARM_UP: (SRC_HOOKS / "agent_init" / WARM_UP).read_bytes(),
        ext / LOADER: (SRC_HOOKS / LOADER).read_bytes(),
    }
    for path in runtime_files():  # tools/ stays out of Agent-Zero
        files[ext / "graph_engine" / path.relative_to(PACKAGE)] = path.read_bytes()
    if layout.name == "new":  # v1.x lists usr/extensions/webui/ too, but serves web UI files from its own folder
        for path in web_ui_files():
            files[layout.root / path.relative_to(SRC)] = path.read_bytes()
        # and finds API handlers in its own api/ (or a plugin's): the component's buttons call this one
        files[layout.root / "api" / CORE_CONTROL_API] = (SRC / "api" / CONTROL_API).read_bytes()
        layout_library(layout.root, files)
    if merged.beside is not None:
        files[ext / "before_main_llm_call" / SHIPPED_BESIDE] = merged.beside
    return {layout.rel(p): data for p, data in files.items()}


def pack_version() -> str:
    for line in (PACKAGE / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return "unknown"


def read_manifest(root: Path) -> dict | None:
    path = root / STATE_DIR / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Refused(f"{path} is unreadable ({exc}); move it away or fix it, nothing was changed") from None
    return data if isinstance(data, dict) else None


def shipped_history() -> dict[str, dict]:
    return json.loads((SRC / "plan_library" / "shipped_history.json").read_text())["plans"]


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


# ── doing it ────────────────────────────────────────────────────────────────


def new_backup_dir(root: Path) -> Path:
    base = root / STATE_DIR / "backups"
    base.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        candidate = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise Refused(f"could not create a new backup folder under {base}")


def install(plan: Plan, dry_run: bool) -> dict:
    layout, root = plan.layout, plan.layout.root
    verb = "would" if dry_run else "will"
    backup_rel = None
    to_backup = [*plan.replace, *plan.move_out, *plan.remove,
                 *[r for r in plan.files if r not in plan.replace and (root / r).is_file()]]
    if to_backup:
        act("backup", f"{verb} copy {len(to_backup)} file(s) to {root / STATE_DIR / 'backups'}/<time>/")
    created = []
    for rel in plan.files:
        parent = (root / rel).parent
        while not parent.exists() and parent != root:
            created.append(layout.rel(parent))
            parent = parent.parent
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
    if dry_run:
        return {}
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


def remove_if_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def write_manifest(root: Path, manifest: dict, backup_rel: str | None) -> None:
    blob = json.dumps(manifest, indent=2).encode() + b"\n"
    path = root / STATE_DIR / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    if backup_rel:
        (root / backup_rel / MANIFEST).write_bytes(blob)


def clear_caches(root: Path, rels: list[str]) -> None:
    """Remove compiled files of the modules this run changed (other modules' caches stay)."""
    for rel in rels:
        path = root / rel
        cache = path.parent / "__pycache__"
        if path.suffix != ".py" or not cache.is_dir():
            continue
        for entry in cache.glob(f"{path.stem}.*.pyc"):
            entry.unlink()
        if path.parent.name == "graph_engine" and not any(cache.iterdir()):
            cache.rmdir()


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
        keep = new_backup_dir(root)
        for rel in changed_by_user:
            (keep / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, keep / rel)
            say(f"kept your edited copy of {rel} in {keep / rel}")
            if rel.endswith("/" + LIBRARY):
                added = added_plans(root, rel, manifest)
                if added:
                    say(f"  it holds your plans {', '.join(added)}, which the restored library does not have: copy "
                        f"them back from there when you need them")
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
    for rel in sorted(manifest.get("created_dirs", []), key=len, reverse=True):
        folder = root / rel
        if keep_under is not None and folder.is_relative_to(keep_under):
            continue
        cache = folder / "__pycache__"
        if cache.is_dir() and not any(cache.iterdir()):
            cache.rmdir()
        remove_if_empty(folder)
    (root / STATE_DIR / MANIFEST).unlink()  # each backup folder holds the manifest as it was when it was made
    if keep_under is not None:  # deleting the plugin leaves the tree as it was before it was installed
        drop_restored_backups(root, manifest.get("backups", []), keep_under)
    kept = leave_only_backups(root)
    say(f"uninstalled: {len(manifest['installed'])} file(s) removed, {len(manifest['originals'])} restored; "
        + (f"kept: {', '.join(kept)}" if kept else f"nothing of the pack is left in {root}"))
    return 0


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


# ── verification, in the framework's Python ─────────────────────────────────

VERIFY = r"""
import importlib, importlib.util, json, os, sys
root, base, files, library = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
os.chdir(root)
sys.path.insert(0, root)
out = {"python": sys.executable, "files": {}, "optional": {}}
Extension = importlib.import_module(base).Extension
for i, path in enumerate(files):
    spec = importlib.util.spec_from_file_location(f"graph_engine_check_{i}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        found = sorted(n for n, v in vars(module).items()
                       if isinstance(v, type) and issubclass(v, Extension) and v is not Extension)
        out["files"][path] = {"classes": found}
        if found:
            loader = module._loader(None)
            if loader is None:
                raise module._said[0]
            loader.engine()
    except Exception as exc:
        out["files"][path] = {"error": f"{type(exc).__name__}: {exc}"}
try:
    lib = sys.modules["graph_engine.authoring.library"].load_library_file(library)
    out["library"] = {"plans": len(lib.plans), "loaded": sorted(lib.plans), "problems": list(lib.problems)}
except Exception as exc:
    out["library"] = {"error": f"{type(exc).__name__}: {exc}"}
for name in ("orjson", "jsonschema", "wordllama"):
    try:
        importlib.import_module(name)
        out["optional"][name] = True
    except ImportError:
        out["optional"][name] = False
print(json.dumps(out))
"""


def framework_python(explicit: str | None, root: Path) -> str | None:
    """--python, else the Docker image's framework venv, else the tree's own venv; None when none is there."""
    if explicit:
        return explicit
    for candidate in (Path(FRAMEWORK_PYTHON), root / ".venv" / "bin" / "python", root / "venv" / "bin" / "python"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


PROBE = "import importlib, os, sys; os.chdir(sys.argv[1]); sys.path.insert(0, sys.argv[1]); " \
        "importlib.import_module(sys.argv[2])"


def python_or_refuse(layout: Layout, explicit: str | None) -> str:
    """The Python to verify with: Agent-Zero's, or this one when it imports Agent-Zero's base class; else stop
    before anything is changed and name --python."""
    found = framework_python(explicit, layout.root)
    if found:
        return found
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run([sys.executable, "-B", "-c", PROBE, str(layout.root), layout.base_module],
                              capture_output=True, text=True, timeout=120, env=env)
        problem = "" if proc.returncode == 0 else ((proc.stderr or proc.stdout).strip().splitlines() or ["?"])[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if not problem:
        return sys.executable
    looked = ", ".join(str(p) for p in (Path(FRAMEWORK_PYTHON), layout.root / ".venv/bin/python",
                                        layout.root / "venv/bin/python"))
    raise Refused(f"Agent-Zero's Python was not found (looked for {looked}) and {sys.executable} cannot import "
                  f"{layout.base_module} ({problem}); pass the Python that runs Agent-Zero with --python PATH; "
                  "nothing was changed")


def verify(layout: Layout, python: str, required: list[str]) -> tuple[bool, dict]:
    """Load the three extension files as Agent-Zero does and the installed library; every plan the pack installed
    must load (a user's plan or a .dot file beside the library that does not is a warning, as in the engine)."""
    ext = layout.ext_root
    files = [str(ext / "before_main_llm_call" / SELECTOR), str(ext / "message_loop_prompts_after" / COMPANION),
             str(ext / "agent_init" / WARM_UP)]
    library = str(ext / "before_main_llm_call" / LIBRARY)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("GRAPH_ENGINE_LIBRARY", None)
    env.pop("GRAPH_ENGINE_HOME", None)
    try:
        proc = subprocess.run([python, "-B", "-c", VERIFY, str(layout.root), layout.base_module, json.dumps(files),
                               library], capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, {"error": f"could not run {python}: {exc}"}
    try:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return False, {"error": f"{python} could not import the base class {layout.base_module}: {tail[0]}"}
    good = all(r.get("classes") is not None and len(r["classes"]) == 1 for r in report["files"].values())
    missing = sorted(set(required) - set(report["library"].get("loaded", [])))
    report["library"]["missing"] = missing
    good = good and "error" not in report["library"] and report["library"]["plans"] > 0 and not missing
    return good, report


def print_verification(report: dict) -> None:
    if "error" in report:
        say(f"verify: {report['error']}")
        return
    say(f"verify: with {report['python']}")
    for path, r in report["files"].items():
        if "error" in r:
            say(f"  FAIL {path}: {r['error']}")
        else:
            n = len(r["classes"])
            say(f"  {'ok  ' if n == 1 else 'FAIL'} {path}: {n} Extension subclass(es) {r['classes']}")
    lib = report["library"]
    if "error" in lib:
        say(f"  FAIL library: {lib['error']}")
    elif lib.get("missing"):
        say(f"  FAIL library: the pack's plan(s) {', '.join(lib['missing'])} do not load: {lib['problems'][:1]}")
    else:
        say(f"  ok   library: {lib['plans']} plan(s) load")
    for line in lib.get("problems", []) if not lib.get("missing") else []:
        say(f"  warn {line}")
    for name, present in report["optional"].items():
        say(f"  optional package {name}: {'present' if present else 'absent (the engine works without it)'}")


def install_optional(python: str, names: tuple[str, ...] = OPTIONAL) -> int:
    say(f"pip: installing {' '.join(names)} into {python}")
    return subprocess.call([python, "-m", "pip", "install", "--quiet", *(REQUIREMENT[n] for n in names)])


# ── entry point ─────────────────────────────────────────────────────────────


def confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise Refused("no terminal to ask for confirmation on; add --yes to go ahead (or --dry-run to look first)")
    if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
        raise Refused("not confirmed; nothing was changed")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="install_graph_engine.sh", description=__doc__.splitlines()[0])
    ap.add_argument("--a0-root", default="/a0", help="Agent-Zero root folder (default /a0)")
    ap.add_argument("--dry-run", action="store_true", help="print every action and change nothing")
    ap.add_argument("--uninstall", action="store_true", help="restore the replaced files and remove this pack")
    ap.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    ap.add_argument("--plugin", action="store_true", help=f"v1.x: install as the plugin usr/plugins/{PLUGIN}")
    ap.add_argument("--with-optional", action="store_true",
                    help="pip-install orjson, jsonschema and wordllama into the framework's Python")
    ap.add_argument("--python", help=f"the framework's Python (default {FRAMEWORK_PYTHON} when present)")
    ap.add_argument("--check", action="store_true",
                    help="only report whether this version is installed and intact (exit 0 yes, 1 no)")
    ap.add_argument("--take-shipped", metavar="ID[,ID...]|all",
                    help="replace plans you edited by the shipped versions (kept in htn_plan_library.shipped.json)")
    ap.add_argument("--build-plugin", metavar="DIR",
                    help=f"write DIR/{PLUGIN}-<version>.zip for Agent-Zero's Plugins dialog and print its path")
    ap.add_argument("--self-test", action="store_true",
                    help="run a short scripted bug fix through the installed pack in Agent-Zero's own message loop "
                         "(no model is called); one line per check, then PASS or FAIL (exit 0 only on PASS)")
    ap.add_argument("--version", action="version", version=f"%(prog)s {pack_version()}")
    args = ap.parse_args(argv)
    root = Path(args.a0_root).resolve()
    try:
        if args.build_plugin:
            say(str(build_zip(Path(args.build_plugin).resolve())))
            return 0
        if args.check:
            return check(root, args.plugin)
        if args.self_test:
            return self_test(root, framework_python(args.python, root) or sys.executable)
        if args.take_shipped:
            confirm(f"Replace plan(s) {args.take_shipped} by the shipped version(s) in {root}?", args.yes or args.dry_run)
            return take(root, [x.strip() for x in args.take_shipped.split(",") if x.strip()], args.dry_run)
        if args.uninstall:
            if recorded_form(root) in (DIALOG, "unrecorded"):
                raise Refused(f"the pack is the Agent-Zero plugin usr/plugins/{PLUGIN}: delete it in Agent-Zero's "
                              "Plugins list (that restores what it replaced); nothing was changed")
            confirm(f"Uninstall the graph workflow engine from {root}?", args.yes or args.dry_run)
            return uninstall(root, args.dry_run)
        return run_install(root, args)
    except Refused as exc:
        say(f"refused: {exc}")
        return 2


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


def check(root: Path, plugin: bool) -> int:
    form = recorded_form(root)
    if form in (DIALOG, "unrecorded"):
        return check_dialog(root)
    layout = detect(root, plugin or form == "plugin")
    plan = plan_install(layout)
    if up_to_date(plan):
        say(f"installed: version {plan.previous.get('version')} at {layout.rel(layout.ext_root)}/, every file intact")
        return 0
    if plan.previous is None:
        say(f"not installed at {root}")
        return 1
    changed = [rel for rel, data in plan.files.items()
               if not (root / rel).is_file() or file_sha(root / rel) != sha256(data)]
    example = f", e.g. {changed[0]}" if changed else ""
    if plan.previous.get("version") == pack_version():
        say(f"installed: version {pack_version()}, but {len(changed)} file(s) differ from this pack{example} "
            "(edited or removed since the install); run the installer again to restore them")
    else:
        say(f"installed: version {plan.previous.get('version')}; this pack is {pack_version()}: "
            f"{len(changed)} file(s) to update{example}; run the installer to upgrade")
    return 1


def recorded_form(root: Path) -> str:
    """How the pack is installed: "" (not at all), "files" (hook folders), "plugin" (this installer's --plugin),
    DIALOG (Agent-Zero's Plugins dialog) or "unrecorded" (a plugin folder that no manifest records)."""
    manifest = read_manifest(root)
    if manifest is None:
        return "unrecorded" if (root / "usr" / "plugins" / PLUGIN / "plugin.yaml").is_file() else ""
    return manifest.get("form") or ("plugin" if manifest.get("plugin") else "files")


def keep_form(root: Path, args: argparse.Namespace) -> None:
    """A re-run keeps the form that is installed, or says what changes; a dialog install is the dialog's."""
    form = recorded_form(root)
    if form in (DIALOG, "unrecorded"):
        how = "through the Plugins dialog" if form == DIALOG else "(a plugin folder no install record names)"
        raise Refused(f"the pack is installed as the Agent-Zero plugin usr/plugins/{PLUGIN} {how}; update or "
                      "delete it in Agent-Zero's Plugins list (deleting it restores what it replaced); "
                      "nothing was changed")
    if form == "plugin" and not args.plugin:
        say(f"installed as the plugin usr/plugins/{PLUGIN} (--plugin): keeping that form; to install into "
            "usr/extensions/python/ instead, run --uninstall first")
        args.plugin = True
    elif form == "files" and args.plugin:
        say(f"--plugin: the pack's files in {read_manifest(root).get('ext_root')}/ move into the plugin "
            f"usr/plugins/{PLUGIN}/ (each is backed up first)")


def check_dialog(root: Path) -> int:
    """--check for a plugin installed through the Plugins dialog: its files against this pack's."""
    folder = root / "usr" / "plugins" / PLUGIN
    meta = (folder / "plugin.yaml").read_text(errors="replace").splitlines()
    version = next((line.split(":", 1)[1].strip() for line in meta if line.startswith("version:")), "unknown")
    changed = [rel for rel, data in plugin_files().items()
               if not (folder / rel).is_file() or file_sha(folder / rel) != sha256(data)]
    where = f"version {version} as the Agent-Zero plugin usr/plugins/{PLUGIN} (Plugins dialog)"
    if not changed:
        say(f"installed: {where}, every file intact")
        return 0
    say(f"installed: {where}; {len(changed)} file(s) differ from this pack {pack_version()}, e.g. {changed[0]}; "
        "update it in Agent-Zero's Plugins list")
    return 1


def self_test(root: Path, python: str) -> int:
    """Run graph_engine.hosts.agent_zero.selftest from where the manifest says the pack is installed, with the framework's Python
    (Agent-Zero's own code and packages), as its own process."""
    manifest = read_manifest(root)
    if manifest is None:
        raise Refused(f"the pack is not installed at {root} (no {STATE_DIR / MANIFEST}); install it first")
    home = root / manifest["ext_root"]
    if not (home / "graph_engine").is_dir():  # a plugin: the package is beside extensions/python/
        home = home.parent
    if not (home / "graph_engine" / "hosts" / "agent_zero" / "selftest.py").is_file():
        raise Refused(f"{home / 'graph_engine' / 'hosts' / 'agent_zero' / 'selftest.py'} is missing; run the installer again to "
                      "restore it")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(home))
    for key in ("GRAPH_ENGINE_LIBRARY", "GRAPH_ENGINE_HOME", "GRAPH_ENGINE_RUNS_DIR"):
        env.pop(key, None)
    try:
        return subprocess.run([python, "-B", "-m", "graph_engine.hosts.agent_zero.selftest", "--a0-root", str(root)],
                              env=env, cwd=str(root), timeout=900).returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        say(f"self-test: could not run {python}: {exc}; pass the framework's Python with --python PATH")
        return 1


def run_install(root: Path, args: argparse.Namespace) -> int:
    keep_form(root, args)
    layout = detect(root, args.plugin)
    python = python_or_refuse(layout, args.python)
    say(f"Agent-Zero at {root}: {'v0.9.x' if layout.name == 'old' else 'v1.x'} layout; "
        f"installing into {layout.rel(layout.ext_root)}/")
    plan = plan_install(layout)
    if up_to_date(plan):
        say(f"already installed: version {plan.previous.get('version')} at {layout.rel(layout.ext_root)}/, "
            "every file matches its manifest entry; nothing was changed")
        ok, report = verify(layout, python, list(plan.merged.pack_plans)) if not args.dry_run else (True, {})
        if report:
            print_verification(report)
        return 0 if ok else 1
    if plan.previous:
        say(f"upgrade: from version {plan.previous.get('version')} to {pack_version()}")
    writable_or_refuse(touched_dirs(plan))
    if args.dry_run:
        install(plan, dry_run=True)
        say("dry run: nothing was changed")
        return 0
    confirm(f"Install the graph workflow engine into {root}?", args.yes)
    manifest = install(plan, dry_run=False)
    ok, report = verify(layout, python, list(plan.merged.pack_plans))
    print_verification(report)
    if not ok:
        say("verification failed: rolling back")
        rollback(root, manifest, plan.previous)
        return 1
    manifest.pop("_run")
    if args.with_optional and install_optional(python) != 0:
        say("pip failed: the engine works without the optional packages")
    say(f"installed: {len(manifest['installed'])} file(s); replaced {len(plan.replace) + len(plan.move_out)}; "
        f"manifest {root / STATE_DIR / MANIFEST}")
    say("live check: send a chat message such as 'fix the bug in /tmp/test.py'; the log shows "
        "'[HTN] Graph plan activated: Bug Fix Workflow'. Restart Agent-Zero first if it is running "
        "(extension classes are cached for the life of the process).")
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ── the Plugins dialog's install: called by the plugin's hooks.py ───────────


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
