"""``graph-engine demo``: a realistic bug-fix session driven through the engine, printed pass by pass.

The bundled library and both extension files are loaded the way Agent-Zero loads them into the Agent-Zero
stand-in; a scripted model fixes a ``ZeroDivisionError`` in a real file.  Per pass: what the engine judged
(or why it judged nothing), the edge taken, the first lines of the workflow text the call received, and the
model's action.  The run's audit log is written under the output folder (kept, its path printed) and read
back the way ``graph-engine explain`` reads it.
"""

from __future__ import annotations

import io
import json
import os
import textwrap
from pathlib import Path
from typing import Any, TextIO

from .. import card
from ..library import check_document, parse_json
from . import standin as a0
from .explain import explain, format_steps, load_events
from .standin import Reply, Session, cmd

DEFAULT_OUT = "graph-engine-demo"


def _script(workdir: Path) -> tuple[str, list[Reply]]:
    calc = workdir / "calc.py"
    calc.write_text("def average(xs):\n    return sum(xs) / len(xs)\n\n\nprint(average([]))\n")
    crash = ("Traceback (most recent call last):\n  File \"{0}\", line 5, in <module>\n"
             "    print(average([]))\n  File \"{0}\", line 2, in average\n"
             "    return sum(xs) / len(xs)\nZeroDivisionError: division by zero\n").format(calc)
    message = f"Fix the bug in {calc}: average([]) crashes with ZeroDivisionError"
    replies = [
        cmd(f'python3 {calc}; echo "[exit:$?]"', crash + "[exit:1]"),
        cmd(f"grep -n -B2 -A5 'average' {calc}", "1:def average(xs):\n2-    return sum(xs) / len(xs)"),
        cmd(f"sed -i 's/return sum(xs) \\/ len(xs)/return sum(xs) \\/ len(xs) if xs else 0)/' {calc}; "
            'echo "[exit:$?]"', "[exit:0]"),
        cmd(f'python3 {calc}; echo "[exit:$?]"',
            f"  File \"{calc}\", line 2\n    return sum(xs) / len(xs) if xs else 0)\n"
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


def demo(out: TextIO, folder: str = DEFAULT_OUT, as_json: bool = False) -> int:
    """The session, printed pass by pass; ``as_json``: one JSON object with the same facts (the passes, the
    final prompt text, the audit log's path, the result)."""
    root = Path(folder).resolve()
    workdir = root / "project"
    workdir.mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("A0_ROOT")
    os.environ["A0_ROOT"] = str(root / "a0")  # the audit log and any report go under the output folder
    facts: dict[str, Any] = {"passes": []}
    try:
        code = _run(workdir, root, io.StringIO() if as_json else out, facts)
        if as_json:
            out.write(json.dumps(dict(facts, completed=code == 0), indent=2) + "\n")
        return code
    finally:
        if saved is None:
            os.environ.pop("A0_ROOT", None)
        else:
            os.environ["A0_ROOT"] = saved


def _run(workdir: Path, root: Path, out: TextIO, facts: dict[str, Any]) -> int:
    message, replies = _script(workdir)
    session = Session()
    facts.update(library=str(a0.LIBRARY), user=message)
    out.write(f"Library: {a0.LIBRARY}\nUser: {message}\n")
    session.user(message)
    seq = 0
    previous: Reply | None = None
    for reply in replies:
        record = session.run_pass(reply)
        shown = record.prompt_extras.get("htn_active_plan", "")
        out.write(f"\n── pass {record.iteration} " + "─" * 60 + "\n")
        new = _events_since(session, seq)
        seq = max([seq] + [e.get("seq", 0) for e in new])
        for event in new:
            line = describe(event)
            if line:
                out.write(line + "\n")
        if previous is not None and not any(e["type"] in ("node_verified", "evidence_ignored") for e in new):
            out.write(f"judged   nothing: {_why_not_judged(previous)}\n")
        first = shown.splitlines()[0] if shown else "(no workflow text in this call)"
        out.write(f"prompt   {first}\n")
        current = next((line for line in shown.splitlines() if line.startswith("Current step:")), "")
        if current:
            out.write(f"shown    {current}\n")
        out.write(f"model    {_reply_summary(reply)}\n")
        facts["passes"].append({"pass": record.iteration, "events": [e for e in new if describe(e)],
                                "prompt": first, "current_step": current, "model": _reply_summary(reply)})
        previous = reply
        if not session.monologue_open:
            break
    return _summary(session, root, out, facts)


def _events_since(session: Session, seq: int) -> list[dict[str, Any]]:
    state = session.state or getattr(session.agent, "_htn_last_run", None) or {}
    return [e for e in state.get("events", []) if e.get("seq", 0) > seq]


def describe(event: dict[str, Any]) -> str | None:
    kind = event["type"]
    if kind == "node_verified":
        return f"verdict  {event['node']}: {event['outcome']} ({event['reason']})"
    if kind == "edge_followed":
        return f"edge     {event['from']} -({event['condition']})-> {event['to']}"
    if kind == "retry_triggered":
        return f"next     {event['node']}: attempt {event['attempt']} of {event['of']}"
    if kind in ("plan_activated", "plan_completed", "plan_escalated", "plan_expired", "plan_ended",
                "plan_withdrawn", "route_stalled", "evidence_ignored", "decision_routed", "checkpoint_reached"):
        extra = {k: v for k, v in event.items() if k not in ("type", "turn", "seq")}
        return f"event    {kind} {extra}"
    return None


def _why_not_judged(reply: Reply) -> str:
    if reply.warning:
        return "the last call's reply was misformatted: Agent-Zero added a warning, and there is no tool result"
    if reply.final:
        return "the last call answered with the response tool, which is not this step's tool"
    return "the last call's result was judged already"


def _reply_summary(reply: Reply) -> str:
    if reply.warning:
        return "misformatted reply -> system_warning (no tool result)"
    if reply.final:
        return f"response tool: {reply.final}"
    tail = reply.output.replace("\n", " | ")
    return f"{reply.tool}: {reply.code}\n         -> {tail[:150]}"


def cards(log: Any) -> list[Any]:
    """The workflow cards in an Agent-Zero log, oldest first."""
    return [item for item in log.logs if item.heading.startswith(card.HEADING + ":")]


def view(item: Any) -> str:
    """A card as the chat shows it: heading, text, then the key-value table."""
    width = max(len(k) for k in item.kvps) if item.kvps else 0
    table = [f"  {k.ljust(width)}  {v}" for k, v in item.kvps.items()]
    return "\n".join([item.heading, *("  " + line for line in item.content.splitlines()), *table])


def _summary(session: Session, root: Path, out: TextIO, facts: dict[str, Any]) -> int:
    final = getattr(session.agent, "_htn_last_run", None) or {}
    shown = cards(session.log)
    if shown:
        out.write("\nThe workflow card in the chat (one log item, updated in place each pass):\n")
        out.write(textwrap.indent(view(shown[-1]), "  ") + "\n")
    out.write("\nLog lines written to the Agent-Zero UI:\n")
    for entry in session.log.entries:
        if entry["heading"].startswith(card.HEADING + ":"):
            continue
        out.write(f"  [{entry['type']}] {entry['content']}\n")
    injected = session.records[-1].prompt_extras.get("htn_active_plan", "")
    out.write("\nText in the final call's prompt:\n" + textwrap.indent(injected, "  ") + "\n")
    library = check_document(parse_json(a0.LIBRARY.read_bytes()), str(a0.LIBRARY))
    run = root / "a0" / "usr" / "graph_engine" / "runs" / session.agent.context.id / f"{final.get('run_id')}.jsonl"
    if run.is_file():
        events, run_facts = load_events(str(run))
        out.write(f"\nAudit log ({len(events)} lines, kept): {run}\n`graph-engine explain {run}` says:\n")
        out.write(textwrap.indent(format_steps(explain(library.get(run_facts["plan"]), events), run_facts), "  ") + "\n")
    done = [e for e in final.get("events", []) if e["type"] == "plan_completed"]
    facts.update(final_prompt=injected, audit_log=str(run) if run.is_file() else None,
                 events=len(final.get("events", [])), path_len=final.get("path_len", 0), folder=str(root))
    out.write(f"\nResult: {'workflow completed' if done else 'workflow did not complete'}; "
              f"{len(final.get('events', []))} events, path length {final.get('path_len', 0)}; "
              f"the files of this run are in {root}\n")
    return 0 if done else 1
