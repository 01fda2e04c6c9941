"""Graph workflow engine: the graph_workflow tool (propose, amend, start, status, save).

The agent calls it when a request takes several checkable steps and no workflow started for it; what it does is
in ``graph_engine.hosts.agent_zero.composed``.  Agent-Zero finds this file in a plugin's ``tools/`` (v1.x) or in
``usr/tools/`` (the shell install); it finds the engine through the pack's one loader, as the hook files do.
"""

import importlib.util
import sys
from pathlib import Path

try:  # Agent-Zero v1.x
    from helpers.tool import Response, Tool
except ImportError:  # v0.9.x
    from python.helpers.tool import Response, Tool

HERE = Path(__file__).resolve().parent
LOADERS = (HERE.parent / "extensions" / "python" / "graph_engine_loader.py",  # the plugin's, and usr/ (v1.x)
           HERE.parent.parent / "python" / "extensions" / "graph_engine_loader.py")  # the shell install on v0.9.x


def _loader():
    loader = sys.modules.get("graph_engine_loader")
    if loader is not None:
        return loader
    for path in LOADERS:
        if path.is_file():
            spec = importlib.util.spec_from_file_location("graph_engine_loader", str(path))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return sys.modules.setdefault("graph_engine_loader", module)
    return None


class GraphWorkflow(Tool):
    async def execute(self, **kwargs):
        try:
            loader = _loader()
            if loader is None:
                raise ImportError("the workflow engine is not installed beside this tool")
            adapter = loader.engine()
            selector = str(Path(loader.HERE) / "before_main_llm_call" / "_15_htn_plan_selector.py")
        except Exception as exc:  # an incomplete install: the agent is told, its loop goes on
            return Response(message=f"The workflow tool is unavailable ({type(exc).__name__}: {exc}); go on "
                                    "without it.", break_loop=False)
        text = await adapter.tool_call(self.agent, self.method or "", kwargs, selector)
        return Response(message=text, break_loop=False)
