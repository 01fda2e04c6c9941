"""Graph workflow engine warm-up (hook: agent_init).

Agent-Zero creates a chat's agent before the chat's first message.  This file
starts one background thread that imports the engine, loads and checks the
plan library, compiles its check patterns and builds its index for matching
by meaning, so that the first message's pass finds them ready.  A message
that comes before the thread is done waits for it, and is decided exactly as
without it.  The engine is found through graph_engine_loader.py, beside this
file's folder.
"""

import importlib.util
import sys
from pathlib import Path

try:
    from helpers.extension import Extension  # Agent-Zero v0.9.9+ / v1.x layout
except ImportError:
    from python.helpers.extension import Extension  # Agent-Zero v0.9.x layout

_said = []


def _loader(agent):
    """The engine's one loader, graph_engine_loader.py beside this file's folder: Agent-Zero runs this file by
    path, so the loader is found by path too (these lines are the same in the pack's three hook files).  None when
    it cannot be loaded, said once in the agent's log."""
    loader = sys.modules.get("graph_engine_loader")
    if loader is not None:
        return loader
    try:
        path = Path(__file__).resolve().parent.parent / "graph_engine_loader.py"
        spec = importlib.util.spec_from_file_location("graph_engine_loader", str(path))
        loader = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loader)
    except Exception as exc:  # an incomplete install: the agent's loop goes on
        if not _said:
            _said.append(exc)
            text = f"[HTN] Workflow engine not loaded: {exc}; run install_graph_engine.sh"
            try:
                agent.context.log.log(type="warning", heading=text[:120], content=text, update_progress="none")
            except Exception:
                pass
        return None
    return sys.modules.setdefault("graph_engine_loader", loader)


def _engine(agent):
    """The engine's host side: one lookup on every pass once it is imported; the loader imports it the first time
    (None when it cannot, said once)."""
    adapter = sys.modules.get("graph_engine.hosts.agent_zero.adapter")
    if adapter is not None and getattr(adapter, "IMPORTED", False):
        return adapter
    loader = _loader(agent)
    return loader.adapter(agent) if loader is not None else None


class GraphEngineWarmUp(Extension):
    """Starts the engine's warm-up when a chat's first agent is created."""

    def execute(self, **kwargs):
        loader = _loader(self.agent)
        if loader is not None:
            return loader.warm_up(self.agent, __file__, _AWAITED)
        return _nothing() if _AWAITED else None


# v0.9.x (its Extension imported from python.helpers) awaits what execute returns; v1.x calls agent_init without
# awaiting, so it must not get a coroutine
_AWAITED = sys.modules.get("helpers.extension") is None and sys.modules.get("python.helpers.extension") is not None


async def _nothing():
    return None
