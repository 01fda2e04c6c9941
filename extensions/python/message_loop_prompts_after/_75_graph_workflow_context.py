"""Graph workflow engine companion (hook: message_loop_prompts_after).

The last hook whose extras reach the SAME LLM call: it judges the newest tool
result against the step that call was shown, follows the workflow's edges and
injects the current step's context into this pass's prompt.  Plan matching
stays in before_main_llm_call/_15_htn_plan_selector.py.  This file and that one
each carry the small package loader below, because Agent-Zero loads extension
files by path and one cannot import the other.
"""

import importlib
import importlib.util
import os
import sys
from pathlib import Path

try:
    from helpers.extension import Extension  # Agent-Zero v0.9.9+ / v1.x layout
except ImportError:
    from python.helpers.extension import Extension  # Agent-Zero v0.9.x layout


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


class GraphWorkflowContext(Extension):
    """Keeps the injected workflow context in step with the call that receives it."""

    async def execute(self, loop_data=None, **kwargs):
        try:
            adapter = _load_engine()
        except Exception as exc:  # the agent's loop must go on
            _warn_once(self.agent, f"[HTN] Workflow engine not loaded: {exc}")
            return
        await adapter.run_hook(self.agent, loop_data, "prompts_after", __file__)


_warned = set()


def _warn_once(agent, text):
    if text in _warned:
        return
    _warned.add(text)
    try:
        agent.context.log.log(type="warning", heading=text[:120], content=text)
    except Exception:
        pass
