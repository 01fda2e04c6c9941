"""The graph workflow engine's one loader, for its three hook files (agent_init, before_main_llm_call and
message_loop_prompts_after, in the folders beside this file).

Agent-Zero runs each extension file by path, off ``sys.path``, so a hook file cannot import the engine, or this
file, by name: each finds this file beside its folder (a few lines, the same in the three) and calls it.  This file
finds the engine package where the installer puts it (beside the hook folders, or one folder up as in the
plugin), imports it once (an import another thread has under way is waited for), says once in the agent's log
when it cannot, and hands the hook the engine (which a hook file then finds by one lookup on every pass).
It is not an extension: Agent-Zero reads only the hook folders.
"""

import asyncio
import importlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
_warned = set()


def engine():
    """The engine's host side (graph_engine.hosts.agent_zero.adapter), imported on first use; raises ImportError when the
    package is missing."""
    adapter = sys.modules.get("graph_engine.hosts.agent_zero.adapter")
    if adapter is not None and getattr(adapter, "IMPORTED", False):  # every pass: no import machinery
        return adapter
    if "graph_engine" not in sys.modules:
        for root in filter(None, (os.environ.get("GRAPH_ENGINE_HOME", ""), str(HERE), str(HERE.parent))):
            init = Path(root) / "graph_engine" / "__init__.py"
            if init.is_file():
                spec = importlib.util.spec_from_file_location(
                    "graph_engine", str(init), submodule_search_locations=[str(init.parent)])
                module = importlib.util.module_from_spec(spec)
                sys.modules["graph_engine"] = module
                spec.loader.exec_module(module)
                break
        else:
            raise ImportError(f"package graph_engine not found beside {HERE}; run install_graph_engine.sh")
    return importlib.import_module("graph_engine.hosts.agent_zero.adapter")


def adapter(agent):
    """The engine's host side for a hook call, or None when it cannot be imported (said once; the agent's loop
    goes on)."""
    try:
        return engine()
    except Exception as exc:
        warn_once(agent, f"[HTN] Workflow engine not loaded: {exc}")
        return None


def warm_up(agent, ext_file, awaited):
    """agent_init: load the engine, its library and index in a thread of their own, so that the chat's first
    message finds them ready (a subordinate's chat was warmed with its agent 0).  ``awaited``: Agent-Zero awaits
    what the hook returns (v0.9.x); v1.x calls it without awaiting, so it must not return a coroutine."""
    if getattr(agent, "number", 0) == 0:
        threading.Thread(target=_warm, args=(agent, ext_file), name="graph-engine warm-up", daemon=True).start()
    return asyncio.sleep(0) if awaited else None


def _warm(agent, ext_file):
    try:
        engine().warm_up(agent, ext_file)
    except Exception as exc:  # the first message loads the engine itself
        warn_once(agent, f"[HTN] Workflow engine not loaded: {exc}")


def warn_once(agent, text):
    """One warning line in the agent's log, once per process."""
    if text in _warned:
        return
    _warned.add(text)
    try:
        agent.context.log.log(type="warning", heading=text[:120], content=text, update_progress="none")
    except Exception:
        pass
