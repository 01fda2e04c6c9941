"""The workflow component's controls (Agent-Zero v1.x): a button the person presses in the page reaches the chat's
run here, at once, whatever the agent is doing.  (Never through the chat input: Agent-Zero's page queues a message
sent while the agent works until the agent stops.)

    POST /api/plugins/graph_workflow_engine/workflow_control    (the plugin)
    POST /api/graph_workflow_control                            (installed by install_graph_engine.sh)
    {"context": CHAT ID, "run": RUN ID, "control": "stop" | "pause" | "resume" | "skip" | "retry" | "back" |
     "restart", "node": STEP ID (going back), "id": REQUEST ID}
    {"context": CHAT ID, "run": PROPOSAL ID, "control": "approve" | "edit" | "reject", "text": THE PLAN (edit),
     "id": REQUEST ID}   (a workflow proposed in the chat)
    -> {"ok", "id", "control", "status": "applied" | "refused" | "pending", "text", "run"}

Agent-Zero checks the session and the CSRF token as for its own handlers.  The engine is found by the pack's one
loader (graph_engine_loader.py beside the hook folders), by path, as the hook files find it.
"""

import importlib.util
import sys
from pathlib import Path

from agent import AgentContext
from helpers.api import ApiHandler, Input, Output, Request

HERE = Path(__file__).resolve().parent
LOADERS = (HERE.parent / "extensions" / "python" / "graph_engine_loader.py",  # the plugin's
           HERE.parent / "usr" / "extensions" / "python" / "graph_engine_loader.py")  # the shell installer's


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


def _refused(text: str) -> dict:
    return {"ok": False, "status": "refused", "text": text}


class WorkflowControl(ApiHandler):
    """A control pressed in the workflow component, handed to the chat's run."""

    async def process(self, input: Input, request: Request) -> Output:
        try:
            loader = _loader()
            if loader is None:
                return _refused("Not sent: the workflow engine is not installed beside this handler.")
            adapter = loader.engine()
            selector = Path(loader.HERE) / "before_main_llm_call" / "_15_htn_plan_selector.py"
        except Exception as exc:  # an incomplete install: one line for the page
            return _refused(f"Not sent: the workflow engine could not be loaded ({type(exc).__name__}: {exc}).")
        return await adapter.control_api(input, AgentContext.get, str(selector))
