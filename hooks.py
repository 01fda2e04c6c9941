"""Agent-Zero v1.x calls these functions when this plugin is installed, updated or deleted (Plugins list).

``install()`` takes over from a linear HTN plan selector that Agent-Zero would otherwise run instead of this
plugin's (``usr/extensions/python/`` is read before any plugin): the old selector is kept byte for byte in a
backup and the user's plans are carried into the plugin's library; everything is recorded in the install
manifest that ``install_graph_engine.sh`` also reads.  A plugin installed from a Git URL has no build: its web
UI's layout library (dagre) is downloaded as ``package-lock.json`` pins it and checked (one line when it cannot
be: the workflow component then draws a plain layout).  ``uninstall()`` puts it all back.  A failure raises
with one line that says what and how to fix it, the tree as it was (Agent-Zero then removes the plugin folder).
"""

import importlib
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_package():
    """The ``graph_engine`` package of this plugin folder (imported as the extension files import it)."""
    for base in (HERE / "extensions", HERE / "extensions" / "python"):
        init = base / "graph_engine" / "__init__.py"
        if not init.is_file():
            continue
        loaded = sys.modules.get("graph_engine")
        if loaded is None or Path(getattr(loaded, "__file__", "") or "").resolve() != init.resolve():
            for name in [n for n in sys.modules
                         if n in ("graph_engine", "graph_engine_loader") or n.startswith("graph_engine.")]:
                del sys.modules[name]  # another copy (an earlier version): this folder's files are the ones to run
            spec = importlib.util.spec_from_file_location("graph_engine", str(init),
                                                          submodule_search_locations=[str(init.parent)])
            module = importlib.util.module_from_spec(spec)
            sys.modules["graph_engine"] = module
            spec.loader.exec_module(module)
        return sys.modules["graph_engine"]
    raise ImportError(f"package graph_engine not found in {HERE}/extensions; the plugin folder is incomplete, "
                      "install it again")


def _installer():
    load_package()
    return importlib.import_module("graph_engine.tools.installer")


def _run(what, action):
    installer = _installer()
    try:
        return action(installer)
    except installer.Refused as exc:
        raise RuntimeError(f"Graph Workflow Engine {what}: {exc}") from None


def install():
    manifest = _run("install", lambda i: i.adopt(HERE))
    importlib.import_module("graph_engine.tools.dagre").ensure(HERE)  # never raises: one line when it cannot
    return manifest


def uninstall():
    return _run("uninstall", lambda i: i.release(HERE))


def pre_update():
    return _run("update", lambda i: i.keep_user_data(HERE))
