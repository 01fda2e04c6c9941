"""Agent-Zero's own web UI (its run_ui.py) from a real tree, with the model scripted at the LiteLLM boundary.

    <tree python> tests/a0ui.py --a0-root TREE --script SCRIPT.json --port PORT --calls CALLS.json

Run with the installed pack on PYTHONPATH (tests/test_real_ui.py does).  SCRIPT.json: {"replies": [...], "branch_replies":
{...}, "chat_delay": ..., "by_step": {...}} as for graph_engine.hosts.agent_zero.a0driver; each chat call the model receives is written
to CALLS.json as it happens (and each reply to replies.json beside it), so a test can read what the model was told, and
started.json says how many calls have started (a test clicks while one is under way); with "record_judged", judged.json
holds every result the engine judged.  Nothing is sent to any model.
"""

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--a0-root", required=True)
    parser.add_argument("--script", required=True)
    parser.add_argument("--port", required=True)
    parser.add_argument("--calls", required=True)
    args = parser.parse_args()
    spec = json.loads(Path(args.script).read_text())
    from graph_engine.hosts.agent_zero import a0driver

    script = a0driver.Script(spec.get("replies", []), spec.get("utility_reply", "[]"), None,
                             spec.get("branch_replies"), spec.get("chat_delay") or 0.0, spec.get("by_step"))
    calls = Path(args.calls)
    started = calls.with_name("started.json")
    chat, delay = script.chat, script.delay

    def recorded(messages, *args, **kwargs):
        reply = chat(messages, *args, **kwargs)
        calls.write_text(json.dumps([c["messages"] for c in script.calls]))
        replies = calls.with_name("replies.json")
        replies.write_text(json.dumps([{"reply": c["reply"], "branch": c["branch"]} for c in script.calls]))
        return reply

    def starting(branch):  # asked as each chat call starts (before its delay): the test knows a call is under way
        started.write_text(json.dumps({"started": script.started, "answered": len(script.calls)}))
        return delay(branch)

    script.chat, script.delay = recorded, starting
    if spec.get("record_judged"):  # every result the engine judges, written as it is judged
        judged = calls.with_name("judged.json")
        a0driver._record_judged(lambda found: judged.write_text(json.dumps(found)))
    a0driver.Session(args.a0_root, script)  # the scripted model, the shell as the container's, memory apart
    from helpers import runtime
    runtime.args.update(port=int(args.port), host="127.0.0.1")  # beside the driver's --dockerized=true
    import run_ui
    run_ui.run()


if __name__ == "__main__":
    main()
