"""Run from Agent-Zero's Plugins list ("Execute"): the engine's self-test inside this Agent-Zero.

Agent-Zero runs this file with its own Python, in the plugin folder, and records the exit code.
"""

import importlib
import importlib.util
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location("graph_workflow_engine_hooks", str(here / "hooks.py"))
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    try:
        package = hooks.load_package()
    except ImportError as exc:
        print(f"Graph Workflow Engine: {exc}")
        return 1
    try:
        selftest = importlib.import_module("graph_engine.hosts.agent_zero.selftest")
    except ModuleNotFoundError as exc:
        if exc.name != "graph_engine.hosts.agent_zero.selftest":
            raise
        print(f"Graph Workflow Engine {getattr(package, '__version__', '?')}: this version has no self-test "
              "(graph_engine/hosts/agent_zero/selftest.py); the package loads, which is all that can be checked here")
        return 0
    root = here.parents[2] if here.parent.name == "plugins" else Path("/a0")  # <root>/usr/plugins/<name>
    return int(selftest.main(["--a0-root", str(root)]) or 0)


if __name__ == "__main__":
    sys.exit(main())
