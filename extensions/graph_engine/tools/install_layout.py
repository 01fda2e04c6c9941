"""The installer's names, where the pack goes in an Agent-Zero tree (its layout), and a plan of an install.

Standard library only, as the rest of the installer (``installer.py``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from graph_engine.tools.user_plans import Merged

SRC = Path(__file__).resolve().parents[3]  # the repository
PACKAGE = SRC / "extensions" / "graph_engine"  # the runtime: its own modules, not its tools/ subpackage
SRC_HOOKS = SRC / "extensions" / "python"  # the three extension files, in the v1.x layout
SELECTOR = "_15_htn_plan_selector.py"
COMPANION = "_75_graph_workflow_context.py"
WARM_UP = "_90_graph_engine_warm_up.py"
LOADER = "graph_engine_loader.py"  # beside the hook folders: the one loader the three hook files call
CONTROL_API = "workflow_control.py"  # the plugin's API handler: the web UI component's buttons (api/)
CORE_CONTROL_API = "graph_workflow_control.py"  # the same handler in Agent-Zero's own api/ (the shell form, v1.x)
TOOL = "graph_workflow.py"  # the tool the agent proposes workflows with (a plugin's tools/, else usr/tools/)
TOOL_PROMPT = "agent.system.tool.graph_workflow.md"  # its prompt (a plugin's prompts/, else usr/prompts/)
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
PLUGIN_TOOLS = ("__init__.py", "installer.py", "install_layout.py", "install_files.py", "install_state.py",
                "install_apply.py", "install_restore.py", "install_verify.py", "install_dialog.py", "user_plans.py",
                "dagre.py")  # what hooks.py needs
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
