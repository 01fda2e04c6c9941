"""``graph-engine``: command-line tools around the engine.

``graph-engine demo`` drives a realistic bug-fix session through the Agent-Zero
stand-in (the same one the tests use), with the bundled plan library and both
extension files loaded the way Agent-Zero loads them, and prints each pass.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
from typing import Sequence

from . import standin as a0
from .standin import Reply, Session, cmd


def _demo_script(workdir: str) -> tuple[str, list[Reply]]:
    calc = os.path.join(workdir, "calc.py")
    crash = ("Traceback (most recent call last):\n  File \"{0}\", line 6, in <module>\n"
             "    print(average([]))\n  File \"{0}\", line 3, in average\n"
             "    return sum(xs) / len(xs)\nZeroDivisionError: division by zero\n").format(calc)
    message = f"Fix the bug in {calc}: average([]) crashes with ZeroDivisionError"
    replies = [
        cmd(f"python3 {calc}", crash),  # before the plan is shown: not evidence
        cmd(f'python3 {calc}; echo "[exit:$?]"', crash + "[exit:1]"),
        cmd(f"grep -n 'def average' -A2 {calc}", "2:def average(xs):\n3-    return sum(xs) / len(xs)"),
        cmd(f"sed -i 's/return sum(xs) \\/ len(xs)/return sum(xs) \\/ len(xs) if xs else 0/' {calc}; "
            'echo "[exit:$?]"', "[exit:0]"),
        cmd(f'python3 {calc}; echo "[exit:$?]"',
            f"  File \"{calc}\", line 3\n    return sum(xs) / len(xs) if xs else 0)\n"
            "SyntaxError: unmatched ')'\n[exit:1]"),
        cmd(f"sed -i 's/ else 0)/ else 0/' {calc}; echo \"[exit:$?]\"", "[exit:0]"),
        cmd(f'python3 {calc}; echo "[exit:$?]"', "0\n[exit:0]"),
        Reply(warning="You have misformatted your message. Follow system prompt instructions on JSON message "
                      "formatting precisely."),
        cmd('python3 -m pytest -q; echo "[exit:$?]"', "....                                         [100%]\n"
                                                      "4 passed in 0.03s\n[exit:0]"),
        Reply(final="Fixed: average([]) now returns 0; the reproduce command and the 4 tests pass."),
    ]
    return message, replies


def _events_since(session: Session, seq: int) -> list[dict]:
    state = session.state or getattr(session.agent, "_htn_last_run", None) or {}
    return [e for e in state.get("events", []) if e.get("seq", 0) > seq]


def _describe(event: dict) -> str | None:
    kind = event["type"]
    if kind == "node_verified":
        return f"verdict  {event['node']}: {event['outcome']} ({event['reason']})"
    if kind == "edge_followed":
        return f"edge     {event['from']} -({event['condition']})-> {event['to']}"
    if kind == "retry_triggered":
        return f"retry    {event['node']}: attempt {event['attempt']} of {event['of']}"
    if kind in ("plan_activated", "plan_completed", "plan_escalated", "plan_expired", "plan_ended",
                "route_stalled", "evidence_ignored", "decision_routed", "checkpoint_reached"):
        extra = {k: v for k, v in event.items() if k not in ("type", "turn", "seq")}
        return f"event    {kind} {extra}"
    return None


def demo(out=sys.stdout) -> int:
    with tempfile.TemporaryDirectory() as workdir:
        message, replies = _demo_script(workdir)
        session = Session()
        out.write(f"Library: {a0.LIBRARY}\nUser: {message}\n")
        session.user(message)
        seq = 0
        for reply in replies:
            record = session.run_pass(reply)
            shown = record.prompt_extras.get("htn_active_plan", "")
            out.write(f"\n── pass {record.iteration} " + "─" * 60 + "\n")
            for event in _events_since(session, seq):  # judged at this pass, before and after the call
                line = _describe(event)
                if line:
                    out.write(line + "\n")
                seq = max(seq, event.get("seq", 0))
            first = shown.splitlines()[0] if shown else "(no workflow context in this call's prompt)"
            out.write(f"prompt   {first}\n")
            if shown and "Current step:" in shown:
                current = next(line for line in shown.splitlines() if line.startswith("Current step:"))
                out.write(f"shown    {current}\n")
            out.write(f"model    {_reply_summary(reply)}\n")
            if not session.monologue_open:
                break
        final = getattr(session.agent, "_htn_last_run", None) or {}
        out.write("\nLog lines written to the Agent-Zero UI:\n")
        for entry in session.log.entries:
            out.write(f"  [{entry['type']}] {entry['content']}\n")
        injected = session.records[-1].prompt_extras.get("htn_active_plan", "")
        out.write("\nText injected into the final call's prompt:\n" + textwrap.indent(injected, "  ") + "\n")
        done = [e for e in final.get("events", []) if e["type"] == "plan_completed"]
        out.write(f"\nResult: {'workflow completed' if done else 'workflow did not complete'}; "
                  f"{len(final.get('events', []))} events, path length {final.get('path_len', 0)}\n")
        return 0 if done else 1


def _reply_summary(reply: Reply) -> str:
    if reply.warning:
        return "misformatted reply -> system_warning (no tool result)"
    if reply.final:
        return f"response tool: {reply.final}"
    tail = reply.output.replace("\n", " | ")
    return f"{reply.tool}: {reply.code}\n         -> {tail[:150]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graph-engine", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="drive a bug-fix session through the Agent-Zero stand-in and print each pass")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
