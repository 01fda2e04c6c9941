"""Graph workflow engine warm-up (hook: agent_init).

Agent-Zero creates a chat's agent before the chat's first message.  This file
starts one background thread that imports the engine, loads and checks the
plan library, compiles its check patterns and builds its index for matching
by meaning, so that the first message's pass finds them ready.  A message
that comes before the thread is done waits for it, and is decided exactly as
without it.  This file carries the same small package loader as the two hook
files, because Agent-Zero loads extension files by path.
"""

import importlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

try:
    from helpers.extension import Extension  # Agent-Zero v0.9.9+ / v1.x layout
    _AWAITED = False  # v1.x calls agent_init without awaiting: execute must not return a coroutine
except ImportError:
    from python.helpers.extension import Extension  # Agent-Zero v0.9.x layout
    _AWAITED = True  # v0.9.x awaits what execute returns


def _load_engine():
    """Import the engine package installed beside the extension folders (not on sys.path here); an import
    another thread has under way is waited for."""
    adapter = sys.modules.get("graph_engine.host.adapter")
    if adapter is not None and getattr(adapter, "IMPORTED", False):  # every pass: no import machinery
        return adapter
    if "graph_engine" not in sys.modules:
        here = Path(__file__).resolve().parent
        roots = [os.environ.get("GRAPH_ENGINE_HOME", ""), str(here), str(here.parent), str(here.parent.parent)]
        for root in filter(None, roots):
            init = Path(root) / "graph_engine" / "__init__.py"
            if init.is_file():
                spec = importlib.util.spec_from_file_location(
                    "graph_engine", str(init), submodule_search_locations=[str(init.parent)])
                module = importlib.util.module_from_spec(spec)
                sys.modules["graph_engine"] = module
                spec.loader.exec_module(module)
                break
        else:
            raise ImportError("package graph_engine not found beside " + str(here) + "; run install_graph_engine.sh")
    return importlib.import_module("graph_engine.host.adapter")


class GraphEngineWarmUp(Extension):
    """Starts the engine's warm-up when a chat's first agent is created."""

    def execute(self, **kwargs):
        if getattr(self.agent, "number", 0) == 0:  # a subordinate's chat was warmed with its agent 0
            threading.Thread(target=_warm, args=(self.agent,), name="graph-engine warm-up", daemon=True).start()
        return _nothing() if _AWAITED else None


async def _nothing():
    return None


def _warm(agent):
    try:
        adapter = _load_engine()
        adapter.warm_up(agent, __file__)
    except Exception as exc:  # the first message loads the engine itself
        _warn_once(agent, f"[HTN] Workflow engine not loaded: {exc}")


_warned = set()


def _warn_once(agent, text):
    if text in _warned:
        return
    _warned.add(text)
    try:
        agent.context.log.log(type="warning", heading=text[:120], content=text)
    except Exception:
        pass
