"""``graph-engine demo``: a realistic bug-fix session driven through the engine, printed pass by pass.

The bundled library and both extension files are loaded the way Agent-Zero loads them into the Agent-Zero
stand-in.  The model is scripted (its choices come from a fixed list); its commands are real: each runs in
bash in the demo's project (a module with a ``ZeroDivisionError`` and its tests, written first), and the tool
result is what the command printed.  A first fix that is wrong makes the test fail and the run loop back to
the fix; a misformatted reply changes nothing; the second fix makes the test and the project's tests pass.
Per pass: what the engine judged (or why it judged nothing), the edge taken, the first lines of the workflow
text the call received, the model's action and the command's output.  The run's audit log is written under
the output folder (kept, its path printed) and read back the way ``graph-engine explain`` reads it; the fixed
project stays there too.
"""

from __future__ import annotations

import difflib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..texts import card
from ..texts import view as component
from ..authoring.library import check_document, parse_json
from . import standin as a0
from .explain import explain, format_steps, load_events
from .standin import PROMPT_LINE, Reply, Session, terminal

DEFAULT_OUT = "graph-engine-demo"


# The demo's project: a real module with the bug, its real tests, and its own pytest settings (so pytest run in
# it never picks up the settings of a folder above it).
PROJECT = {
    "calc.py": '''\
def average(xs):
    """The arithmetic mean of the numbers in xs; 0 for an empty list."""
    return sum(xs) / len(xs)


if __name__ == "__main__":
    print(average([]))
''',
    "test_calc.py": '''\
import unittest

from calc import average


class AverageTest(unittest.TestCase):
    def test_numbers(self):
        self.assertEqual(average([1, 2, 3, 4]), 2.5)

    def test_one_number(self):
        self.assertEqual(average([7]), 7)

    def test_empty_list(self):
        self.assertEqual(average([]), 0)
''',
    "pyproject.toml": '''\
[project]
name = "calc"
version = "0.1.0"
requires-python = ">=3.11"

[tool.pytest.ini_options]
python_files = ["test_*.py"]
''',
}
TIMEOUT = 120  # seconds one command may take
SHOWN_LINES = 20  # lines of a command's output the printout shows


def write_project(workdir: Path) -> None:
    """The project as it is before the session: the bug in calc.py (files of an earlier demo are replaced)."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in PROJECT.items():
        (workdir / name).write_text(text)


def shell_env() -> dict[str, str]:
    """The environment the commands run in: ``python3`` is the Python running the demo (the one ``make demo``
    made, which has pytest); pytest loads no plugins of that environment (the project uses none)."""
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@dataclass
class Shell:
    """A command the scripted model chose, run for real when its pass calls the model: bash in the project
    folder, stdout and stderr together as a terminal shows them; the reply carries the real output."""

    workdir: Path
    command: str

    def __call__(self, prompt: str, state: dict[str, Any] | None) -> Reply:
        try:
            done = subprocess.run(["bash", "-c", self.command], cwd=self.workdir, env=shell_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
            text = done.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b"").decode("utf-8", "replace") + f"\n(no end after {TIMEOUT} s: stopped)"
        return Reply(code=self.command, output=terminal(text))


def _missing_tools() -> str | None:
    """Why the model's commands cannot run here, or None."""
    if shutil.which("bash") is None:
        return ("bash was not found on PATH; the demo runs the model's commands in bash (install bash, then run "
                "it again)")
    sed = shutil.which("sed")
    if sed is None or subprocess.run([sed, "--version"], capture_output=True).returncode != 0:
        return ("the model edits with GNU sed ('sed -i', as in Agent-Zero's container) and this sed is not GNU "
                "sed (on macOS: brew install gnu-sed, then put its gnubin folder first on PATH)")
    return None


def _tests_command() -> str:
    """The project's tests: pytest when this Python has it (the plan's hint), else the standard library's runner."""
    return "python3 -m pytest -q" if importlib.util.find_spec("pytest") else "python3 -m unittest"


def _script(workdir: Path) -> tuple[str, list[Reply | Shell]]:
    """The user's message and the model's choices; every command runs for real in ``workdir``."""
    write_project(workdir)
    message = f"Fix the bug in {workdir / 'calc.py'}: average([]) crashes with ZeroDivisionError"

    def run(command: str) -> Shell:
        return Shell(workdir, f'{command}; echo "[exit:$?]"')

    replies: list[Reply | Shell] = [
        run("python3 calc.py"),
        Shell(workdir, "grep -n -B2 -A5 'average' calc.py"),
        # the first fix has one ')' too many: the test fails and the run loops back to the fix
        run("sed -i 's/return sum(xs) \\/ len(xs)/return sum(xs) \\/ len(xs) if xs else 0)/' calc.py"),
        run("python3 calc.py"),
        run("sed -i 's/ else 0)/ else 0/' calc.py"),
        run("python3 calc.py"),
        Reply(warning="You have misformatted your message. Follow system prompt instructions on JSON message "
                      "formatting precisely."),
        run(_tests_command()),
        Reply(final="Fixed: average([]) now returns 0 (calc.py line 3); `python3 calc.py` prints 0 and the "
                    "project's tests pass."),
    ]
    return message, replies


def demo(out: TextIO, folder: str = DEFAULT_OUT, as_json: bool = False) -> int:
    """The session, printed pass by pass; ``as_json``: one JSON object with the same facts (the passes, the
    final prompt text, the audit log's path, the result)."""
    problem = _missing_tools()
    if problem:
        out.write(f"graph-engine demo: {problem}\n")
        return 2
    root = Path(folder).resolve()
    workdir = root / "project"
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
    facts.update(library=str(a0.LIBRARY), user=message, shell=f"bash in {workdir}", python=sys.executable)
    out.write(f"Library: {a0.LIBRARY}\nShell:   bash in {workdir} (python3 is {sys.executable})\n"
              f"User: {message}\n")
    session.user(message)
    seq = 0
    previous: Reply | None = None
    for choice in replies:
        record = session.run_pass(choice)
        reply = record.reply
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
        output = _command_output(reply)
        if output is not None:
            lines = output.splitlines() or [""]
            if len(lines) > SHOWN_LINES:
                lines = lines[:SHOWN_LINES - 1] + [f"... ({len(lines) - SHOWN_LINES + 1} more lines)"]
            out.write("".join(f"{'output' if i == 0 else '':<9}| {line}\n" for i, line in enumerate(lines)))
        facts["passes"].append({"pass": record.iteration, "events": [e for e in new if describe(e)],
                                "prompt": first, "current_step": current, "model": _reply_summary(reply),
                                "command": reply.code if output is not None else None, "output": output})
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
    return f"{reply.tool}: {reply.code}"


def _command_output(reply: Reply) -> str | None:
    """What the command printed, as the tool result carries it without the shell prompt line (None: no command)."""
    if reply.warning or reply.final:
        return None
    return reply.output.removesuffix(PROMPT_LINE).strip("\n")


def _changes(workdir: Path) -> str:
    """The project's files against what the demo wrote before the session, as a unified diff."""
    diffs = []
    for name, before in PROJECT.items():
        path = workdir / name
        after = path.read_text() if path.is_file() else ""
        diffs += difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                      f"{name} (before)", f"{name} (after)")
    return "".join(diffs)


def cards(log: Any) -> list[Any]:
    """The workflow cards in an Agent-Zero log, oldest first."""
    return [item for item in log.logs if item.heading.startswith(card.HEADING + ":")]


def view(item: Any) -> str:
    """A card as the chat shows it: heading, text, then the key-value table (without the data the web UI's
    component draws the graph from)."""
    kvps = {k: v for k, v in (item.kvps or {}).items() if k not in (component.KEY, component.RUN_KEY)}
    width = max(len(k) for k in kvps) if kvps else 0
    table = [f"  {k.ljust(width)}  {v}" for k, v in kvps.items()]
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
    changed = _changes(root / "project")
    out.write(f"\nWhat the commands changed in {root / 'project'}:\n")
    out.write(textwrap.indent(changed or "nothing\n", "  ", lambda line: True))
    done = [e for e in final.get("events", []) if e["type"] == "plan_completed"]
    facts.update(final_prompt=injected, audit_log=str(run) if run.is_file() else None,
                 events=len(final.get("events", [])), path_len=final.get("path_len", 0), folder=str(root))
    out.write(f"\nResult: {'workflow completed' if done else 'workflow did not complete'}; "
              f"{len(final.get('events', []))} events, path length {final.get('path_len', 0)}; "
              f"the files of this run are in {root}\n")
    return 0 if done else 1
