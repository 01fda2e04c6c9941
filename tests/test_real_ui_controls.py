"""The person's hand on a running workflow, in Agent-Zero v1.7's own web UI (tests/test_real_ui.py has the harness):
each control of the component (pause and resume, skip, retry, go back, restart, stop) clicked while the agent is
busy, while the model's call runs (each call takes seconds) and while a command runs, and with branches running in
subordinate agents.  Each click changes the run at once (the component shows it within a couple of seconds, long
before the agent's call ends), goes to the pack's API (the audit event says "by": "button"), leaves the person's
draft in the chat input as it was, and the model is told at its next call; every result the engine judges is the
result of a call that was shown that step (the engine's judging is recorded in the Agent-Zero process).

These run in the plugin form: the shell installer's copy of the same API handler is pressed in both forms by
tests/test_real_ui_component.py.  Screenshots in ``$GRAPH_ENGINE_UI_SHOTS`` (build/ui-shots).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from a0real import CHAIN, CHAIN_NAMES, lint_chain_library, respond, terminal
from test_real_ui import (UI, audit_events, browser, component, form, open_chat, pytestmark, send,  # noqa: F401
                          shot, tree, until, wait_for, FORM, SHOTS)

STEPS, NAMES = CHAIN, CHAIN_NAMES
DRAFT = "and when that is done, could you also"
AT_ONCE = 3.0  # seconds within which the page shows a control's change (Agent-Zero pushes its log's changes)


@pytest.fixture(autouse=True)
def plugin_form_only(form):
    if FORM[0] != "plugin":
        pytest.skip("the shell form's API handler is pressed by tests/test_real_ui_component.py")


def chain_library(tmp_path: Path, folder: Path) -> dict:
    """Five steps in a row, each checked by its exit status; lint_3 fails its first attempt (so Retry applies)."""
    return lint_chain_library(tmp_path / "chain_library.json", lambda n: f"sh {folder}/{n}.sh", max_retries=2)


def chain_project(tree, sleep: float) -> Path:
    """A script per step that prints its step (after ``sleep`` seconds); lint_3's fails the first time it runs."""
    folder = tree.root / "usr" / "workdir" / "chain"
    folder.mkdir(parents=True, exist_ok=True)
    for n in STEPS:
        first = f'if [ ! -f {folder}/.{n}.ran ]; then touch {folder}/.{n}.ran; exit 1; fi\n' if n == "lint_3" else ""
        (folder / f"{n}.sh").write_text(f'echo "working on {n}"\nsleep {sleep}\n{first}echo "done:{n}"\n')
        (folder / f".{n}.ran").unlink(missing_ok=True)
    return folder


def by_step(folder: Path) -> dict:
    """The model reads its prompt: the command of the step it is shown (each reply worded anew), an answer when
    it is shown no step, a final answer when the run has ended."""
    return {"steps": {NAMES[n]: terminal(f'sh {folder}/{n}.sh; echo "[exit:$?]"  # call {{n}}', f"Run {NAMES[n]}")
                      for n in STEPS},
            "paused": respond("The workflow is paused; I will wait (call {n})."),
            "other": respond("The workflow is over (call {n}).")}


def started(ui: UI) -> dict:
    path = ui.calls.with_name("started.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"started": 0, "answered": 0}


def replies(ui: UI) -> list[dict]:
    path = ui.calls.with_name("replies.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def judged(ui: UI) -> list[dict]:
    path = ui.calls.with_name("judged.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def at_work(page, ui: UI, node: str, moment: str, moved: bool = False, timeout: float = 120) -> None:
    """Wait until the run is at ``node`` and the agent works on it: its model call under way ("mid-call"; the call
    starts right after the hook that showed the step, and the agent's calls do not overlap; ``moved``: a control
    moved the run there during a call, so the call for it is the next one), or its command running ("mid-tool":
    the model answered with the step's command, which sleeps; a second later it still runs)."""
    wait_for(page, lambda c: c["current"] == node, f"the run at {node}", timeout=timeout)
    if moment == "mid-call":
        before = started(ui)["started"] if moved else 0
        until(lambda: before < started(ui)["started"] and started(ui)["answered"] < started(ui)["started"],
              f"the model's call for {node}")
        return
    seen = len(replies(ui))
    until(lambda: len(replies(ui)) > seen and f'"headline": "Run {NAMES[node]}"' in replies(ui)[-1]["reply"],
          f"the command of {node}")
    time.sleep(1.0)


def mid_call(ui: UI) -> None:
    until(lambda: started(ui)["answered"] < started(ui)["started"], "a model call under way")


def click(page, kind: str) -> float:
    """Click the component's control ``kind`` with the draft in the chat input; when it was clicked."""
    page.locator(f".graph-workflow .gw-controls .gw-button[data-kind='{kind}']").last.click()
    return time.monotonic()


def go_back(page, node: str) -> float:
    page.locator(".graph-workflow .gw-select").last.select_option(node)
    page.locator(".graph-workflow .gw-back-button").last.click()
    return time.monotonic()


LATENCY: list[tuple[str, float]] = []  # (what, seconds from the click until the page showed it)


def shows(page, check, what: str, since: float) -> dict:
    """The component shows ``check`` within AT_ONCE seconds of the click."""
    seen = wait_for(page, check, what, timeout=AT_ONCE + 2)
    took = time.monotonic() - since
    LATENCY.append((what, round(took, 2)))
    assert took < AT_ONCE + 0.5, f"{what}: shown {took:.1f} s after the click"
    return seen


def chat_events(tree, page) -> list[dict]:
    """The audit events of this page's chat (its runs' logs; the tree is shared by the module's tests)."""
    folder = tree.root / "usr" / "graph_engine" / "runs" / page.evaluate("() => globalThis.getContext()")
    out = []
    for log in sorted(folder.glob("*.jsonl"), key=lambda f: f.stat().st_mtime):
        out += [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return sorted(out, key=lambda e: e.get("time", ""))  # (stable: a run's lines of one moment stay in order)


def pressed_events(tree, page) -> list[tuple[str, str]]:
    return [(e["type"], e.get("said", "")) for e in chat_events(tree, page) if e.get("by") == "button"]


def each_result_judged_against_its_own_step(ui: UI) -> list[tuple[str, str]]:
    out = []
    for j in judged(ui):
        issued = re.search(r'"headline": "Run ([^"]+)"', j["reply"])
        assert issued and issued.group(1) == NAMES.get(j["node"], j["node"]), (j["node"], j["reply"][-200:])
        out.append((j["node"], j["outcome"]))
    return out


@pytest.mark.parametrize("moment", ["mid-call", "mid-tool"])
def test_every_control_acts_at_once_while_the_agent_works(tree, browser, tmp_path, moment):
    """Pause, resume, skip, retry, go back, restart and stop, each clicked while the model's call runs (4 s each)
    or while the step's command runs (it sleeps 4 s): the run changes at once, the draft stays, each click is one
    audit event by button, the model is told at its next call, and nothing is judged against a step its call was
    not shown."""
    folder = chain_project(tree, sleep=4.0 if moment == "mid-tool" else 0.0)
    ui = UI(tree, [terminal("ls", "List the folder"), respond("Some files.")], tmp_path,
            env=chain_library(tmp_path, folder), chat_delay={"": 4.0 if moment == "mid-call" else 0.5},
            by_step=by_step(folder), record_judged=True)
    try:
        page, errors = open_chat(browser, ui)
        send(page, "hello! what is in my work folder?")
        page.wait_for_selector("text=Some files.", timeout=90_000)
        send(page, "run the lint chain")
        page.fill("#chat-input", DRAFT)

        at_work(page, ui, "lint_1", moment)
        at = click(page, "pause")  # pause and resume while the agent works on Lint 1
        shows(page, lambda c: c["badge"] == "paused", "paused", at)
        shot(page, f"controls-{moment}-paused")
        at = click(page, "resume")
        shows(page, lambda c: c["badge"] == "active", "resumed", at)

        at_work(page, ui, "lint_2", moment)
        at = click(page, "skip")  # skip the step whose call (or command) is under way
        shows(page, lambda c: c["current"] == "lint_3", "skipped to Lint 3", at)

        wait_for(page, lambda c: c["current"] == "lint_3" and "retry" in c["kinds"], "Lint 3 after a failed attempt",
                 timeout=120)
        at_work(page, ui, "lint_3", moment)  # (its second attempt's call or command)
        at = click(page, "retry")
        shows(page, lambda c: "retry" not in c["kinds"] and c["current"] == "lint_3", "its attempts back", at)

        at_work(page, ui, "report", moment)
        at = go_back(page, "lint_1")
        shows(page, lambda c: c["current"] == "lint_1", "back at Lint 1", at)

        at_work(page, ui, "lint_1", moment, moved=True)
        old_run = component(page)["run"]
        at = click(page, "restart")
        shows(page, lambda c: c["run"] != old_run and c["current"] == "prepare", "a new run at Prepare", at)

        at_work(page, ui, "prepare", moment, moved=True)
        at = click(page, "stop")
        shows(page, lambda c: c["status"] == "stopped", "stopped", at)
        shot(page, f"controls-{moment}-stopped")

        assert page.input_value("#chat-input") == DRAFT  # every click left the draft as it was
        assert pressed_events(tree, page) == [
            ("plan_paused", "pause the workflow"), ("plan_resumed", "resume the workflow"),
            ("step_skipped", "skip this step"), ("attempts_restored", "retry this step"),
            ("jumped_back", "go back to a step"), ("plan_restarted", "restart the workflow"),
            ("plan_stopped", "stop the workflow")]
        until(lambda: any("[WORKFLOW STOPPED by the user: Lint Chain]" in m["content"] for call in ui.model_calls()
                          for m in call), "the model told of the stop", timeout=60)
        told = "\n".join(m["content"] for call in ui.model_calls() for m in call)
        for said in ("Resumed by the user", "Skipped by the user", "Retried at the user's request",
                     "Back to 'Lint 1' at the user's request", "Restarted by the user"):
            assert said in told, said  # each told to the model at its next call
        each_result_judged_against_its_own_step(ui)
        assert errors == []
        (SHOTS / f"controls-{moment}-latency.json").write_text(json.dumps(LATENCY))
    finally:
        ui.close()


def test_pause_and_stop_reach_every_branch_agent(tree, browser, tmp_path):
    """Three branches run at once, each model call taking 4 s: Pause stops their agents at once (none takes a reply
    after it); Resume starts them again at their steps; Stop, clicked while they run again, stops them all and the
    run; the draft stays."""
    from test_parallel_branches import checks_plan
    folder = tree.root / "usr" / "workdir" / "release"
    folder.mkdir(parents=True, exist_ok=True)
    for b in ("lint", "types", "tests"):
        (folder / f"{b}.sh").write_text(f'echo "{b}: clean"\n')
    plan = checks_plan()
    names = {"prepare": "Prepare", "lint": "Lint", "types": "Type check", "tests": "Unit tests", "report": "Report"}
    for b in ("lint", "types", "tests"):
        plan["graph"]["nodes"][b].update(tool_hint=f"cd {folder} && sh {b}.sh")
    library = tmp_path / "release_checks.json"
    library.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"release_checks": plan}}))
    commands = {"prepare": f"ls {folder}", "report": 'echo "release checks: done"',
                **{b: f'cd {folder} && sh {b}.sh; echo "[exit:$?]"' for b in ("lint", "types", "tests")}}
    script = {"steps": {names[n]: terminal(f"{c}  # call {{n}}", f"Run {names[n]}") for n, c in commands.items()},
              "paused": respond("The workflow is paused; I will wait (call {n})."),
              "other": respond("Done (call {n}).")}
    ui = UI(tree, [], tmp_path, env={"GRAPH_ENGINE_LIBRARY": str(library)}, by_step=script, record_judged=True,
            chat_delay={"lint": 4.0, "types": 4.0, "tests": 4.0})
    try:
        page, errors = open_chat(browser, ui)
        send(page, f"run the release checks in {folder}")
        wait_for(page, lambda c: c["status"] == "active" and len(c["branches"]) == 3, "three branches running")
        page.fill("#chat-input", DRAFT)
        mid_call(ui)
        taken = len(replies(ui))
        at = click(page, "pause")
        shows(page, lambda c: c["badge"] == "paused", "paused", at)
        time.sleep(5)  # longer than a branch's call: a branch agent still running would have taken its reply
        branch_replies = [r for r in replies(ui)[taken:] if r["branch"]]
        assert branch_replies == [], branch_replies
        shot(page, "controls-branches-paused")
        at = click(page, "resume")
        shows(page, lambda c: c["badge"] == "active", "resumed", at)
        until(lambda: sum(1 for e in chat_events(tree, page) if e["type"] == "branch_started" and e.get("again")) >= 1,
              "the branches started again at their steps")
        mid_call(ui)
        at = click(page, "stop")
        shows(page, lambda c: c["status"] == "stopped", "stopped", at)
        time.sleep(5)
        assert [e["type"] for e in chat_events(tree, page) if e.get("by") == "button"] == [
            "plan_paused", "plan_resumed", "plan_stopped"]
        stopped = [e for e in chat_events(tree, page) if e["type"] == "plan_stopped"][-1]
        assert stopped.get("branches"), stopped  # the branches running then were stopped with the run
        assert page.input_value("#chat-input") == DRAFT
        shot(page, "controls-branches-stopped")
        for j in judged(ui):  # each branch's and the parent's results, each against its own step
            issued = re.search(r'"headline": "Run ([^"]+)"', j["reply"])
            assert issued and issued.group(1) == names[j["node"]], (j["node"], j["reply"][-200:])
        assert errors == []
    finally:
        ui.close()
