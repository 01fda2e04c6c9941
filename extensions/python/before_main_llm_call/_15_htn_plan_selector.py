"""Graph workflow engine, drop-in for the linear HTN plan selector (hook: before_main_llm_call, _15_).

Runs after the belief-state tracker and the org dispatcher, so it sees this
pass's domain and plan filter: it matches the user's message to a plan,
activates, switches or ends runs, and (when the companion in
message_loop_prompts_after is absent) judges tool results and injects the
workflow context, one call late but never against the wrong step.
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


class HTNPlanSelector(Extension):
    """Plan matching and activation; the workflow engine's before_main_llm_call side."""

    async def execute(self, loop_data=None, **kwargs):
        adapter = _engine(self.agent)
        if adapter is not None:
            await adapter.run_hook(self.agent, loop_data, "before_main", __file__)
