"""A workflow the agent writes, approved in Agent-Zero v1.7's own web UI (tests/test_real_ui.py has the harness): the
agent's first proposal has a mistake and gets the lint's lines back, the fixed one is shown as a card with its graph
and Approve, Edit and Reject; Edit shows its text in place and a broken edit is answered with the lint's reason;
Approve (the agent idle) wakes the agent, the run passes its checks on real commands and completes.  A plan whose
name is markup is drawn as text.  Screenshots in ``$GRAPH_ENGINE_UI_SHOTS`` (build/ui-shots)."""

from __future__ import annotations

import json

from a0real import reply, respond, terminal
from test_real_loop_composed import CHECK, CONVERT, INI, MISTAKE, PLAN
from test_real_ui import (UI, audit_events, browser, component, form, open_chat, pytestmark, send,  # noqa: F401
                          shot, tree, until, wait_for)

HOSTILE = '<img src=x onerror="window.__pwned=1">Backup & restore'
ASKED = "turn the settings.ini of my app into settings.toml while keeping the INI loader working"  # starts no plan


def app(tree):
    folder = tree.root / "usr" / "workdir" / "app"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.ini").write_text(INI)
    (folder / "convert.py").write_text(CONVERT)
    (folder / "check.py").write_text(CHECK)
    (folder / "settings.toml").unlink(missing_ok=True)
    return folder


def script(p, plan: str = PLAN) -> dict:
    """The agent proposes (a mistake first), asks for approval, then runs the step its prompt shows."""
    propose = lambda text: reply("graph_workflow:propose", "Proposing a workflow", plan=text,  # noqa: E731
                                 request=ASKED)
    return {"replies": [propose(MISTAKE), propose(plan), respond("I wrote a two-step workflow; approve it to run.")],
            "by_step": {"steps": {"Write the TOML settings": terminal(f'cd {p} && python3 convert.py; echo "[exit:$?]"'
                                                                      "  # call {n}", "Write the TOML file"),
                                  "Check both loaders": terminal(f"cd {p} && python3 check.py  # call {{n}}",
                                                                 "Check both loaders")},
                        "other": respond("Done (call {n}).")}}


def proposal(page) -> dict:
    return page.evaluate("""() => {
        const all = [...document.querySelectorAll('.graph-workflow')];
        const c = all.find(x => ['proposed', 'approved', 'rejected'].includes(x.dataset.status));
        if (!c) return null;
        return {status: c.dataset.status, plan: c.querySelector('.gw-plan').textContent,
                kinds: [...c.querySelectorAll(':scope > .gw-controls .gw-button')].map(b => b.dataset.kind),
                nodes: [...c.querySelectorAll('.gw-node')].map(n => n.dataset.node),
                editor: !c.querySelector('.gw-editor').hidden, source: c.querySelector('.gw-source').value,
                answer: c.querySelector('.gw-answer').textContent, imgs: c.querySelectorAll('img').length};
    }""")


def test_approved_in_the_web_ui_the_proposed_workflow_runs_and_completes(tree, browser, tmp_path):
    p = app(tree)
    spec = script(p)
    ui = UI(tree, spec.pop("replies"), tmp_path, **spec)
    try:
        page, errors = open_chat(browser, ui)
        send(page, ASKED)
        seen = until(lambda: (proposal(page) or {}).get("status") == "proposed" and proposal(page), "the proposal")
        assert seen["plan"] == "INI to TOML migration" and seen["kinds"] == ["approve", "edit", "reject"]
        assert {"convert", "loaders", "exit"} <= set(seen["nodes"])
        calls = ui.model_calls()
        assert "node 'loaders': the step has no check" in json.dumps(calls[1])  # the lint's lines reached the agent
        shot(page, "p1-proposal")
        card = page.locator(".graph-workflow[data-status='proposed']")
        card.locator(".gw-button[data-kind='edit']").click()
        until(lambda: proposal(page)["editor"], "the editor")
        assert proposal(page)["source"] == PLAN
        card.locator(".gw-source").fill(MISTAKE)
        card.locator(".gw-save-edit").click()
        said = until(lambda: proposal(page)["answer"].startswith("Not applied") and proposal(page)["answer"],
                     "the edit's refusal")
        assert said.startswith("Not applied: the edited text does not pass its checks:\n1. node 'loaders': the step "
                               "has no check") and proposal(page)["editor"]
        shot(page, "p2-edit-refused")
        card.locator(".gw-cancel-edit").click()
        card.locator(".gw-button[data-kind='approve']").click()
        until(lambda: proposal(page)["status"] == "approved", "the proposal approved")
        done = wait_for(page, lambda c: c["status"] == "completed", "the run completed", timeout=180)
        assert done["plan"] == "INI to TOML migration"
        shot(page, "p3-completed")
        events = audit_events(tree)
        started = [e for e in events if e["type"] == "plan_activated"][-1]
        assert started["by"] == "composed" and started["said"] == "approved by the person in the web UI"
        checked = [(e["node"], e["outcome"]) for e in events if e["type"] == "node_verified"]
        assert checked[-2:] == [("convert", "success"), ("loaders", "success")] and events[-1]["type"] == "plan_completed"
        assert (p / "settings.toml").is_file() and errors == []
        assert [e.get("plan") for e in events if e["type"] == "plan_activated"] == ["ini_to_toml"]  # no other run
        assert page.locator("#graph-workflow-strip").is_hidden()  # nothing active left above the input
        run = page.locator(".graph-workflow[data-status='completed']").last
        assert component(page)["kinds"] == ["save"]
        run.locator(".gw-button[data-kind='save']").click()
        saved = until(lambda: "was saved as" in component(page)["answer"] and component(page)["answer"], "saved")
        assert saved.endswith("like any plan.")
        until(lambda: component(page)["kinds"] == [], "the button gone once the card says it was saved")
        assert list(tree.root.rglob("ini_to_toml.dot"))
        shot(page, "p5-saved")
    finally:
        ui.close()


def test_a_proposed_plan_named_with_markup_is_drawn_as_text(tree, browser, tmp_path):
    p = app(tree)
    for saved in tree.root.rglob("ini_to_toml.dot"):  # saved by the test before: the request would start it
        saved.unlink()
    hostile = PLAN.replace('label="INI to TOML migration"', f"label={json.dumps(HOSTILE)}")
    spec = script(p, hostile)
    ui = UI(tree, spec.pop("replies"), tmp_path, **spec)
    try:
        page, errors = open_chat(browser, ui)
        send(page, ASKED)
        seen = until(lambda: (proposal(page) or {}).get("status") == "proposed" and proposal(page), "the proposal")
        assert seen["plan"] == HOSTILE and seen["imgs"] == 0
        assert page.evaluate("() => window.__pwned") is None
        shot(page, "p4-hostile-name")
        assert errors == []
    finally:
        ui.close()
