"""What an install writes: the runtime package, the hook files and the web UI, in the hook folders or as the
plugin folder; the plugin's ZIP of ``make plugin``."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from graph_engine.tools import dagre
from graph_engine.tools.install_layout import (
    COMPANION, CONTROL_API, CORE_CONTROL_API, LIBRARY, LOADER, PACKAGE, PLUGIN, PLUGIN_README, PLUGIN_TOOLS,
    PLUGIN_TOP, SCHEMA, SELECTOR, SRC, SRC_HOOKS, TOOL, TOOL_PROMPT, WARM_UP, Layout, say)
from graph_engine.tools.user_plans import SHIPPED_BESIDE, Merged

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
    found += [src / "api" / CONTROL_API, src / "tools" / TOOL, src / "prompts" / TOOL_PROMPT]
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
        layout.root / "usr" / "tools" / TOOL: (SRC / "tools" / TOOL).read_bytes(),  # both layouts read usr/ there
        layout.root / "usr" / "prompts" / TOOL_PROMPT: (SRC / "prompts" / TOOL_PROMPT).read_bytes(),
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


def shipped_history() -> dict[str, dict]:
    return json.loads((SRC / "plan_library" / "shipped_history.json").read_text())["plans"]
