"""The workflow component read at a glance, steered without the chat input, and accessible: Agent-Zero v1.7's own
web UI (tests/a0ui.py) with the pack installed in both forms, driven by headless Chromium (tests/test_real_ui.py
has the harness).

The graph is checked in the page: no edge passes through a node, every arrow ends on its target's border, no two
dashed edges run along each other; every node the run passed is marked, a step that failed before it passed has
its own mark; at 480 px the labels keep the page's text size and nothing of Agent-Zero's covers the graph; large
plans show the steps around the current one below the controls; the strip above the chat input finds the run;
the controls go to the pack's own API handler (the request the page sent is read from the browser; the run's change
from the page), the draft in the chat input stays as it was; the graph's name says the run's state, a change of
step is read out, going back works from the keyboard.
Screenshots in ``$GRAPH_ENGINE_UI_SHOTS`` (build/ui-shots).
"""

from __future__ import annotations

import json
import re
import time

import pytest

from a0real import respond, terminal
from test_real_ui import (CALC, TEST, UI, audit_events, browser, component, form, open_chat, project,  # noqa: F401
                          pytestmark, send, shot, tree, until, wait_for, FORM, SHOTS)

PLUGIN = "graph_workflow_engine"
GEOMETRY = """(args) => {
  const [root, coincide] = args;
  const boxes = new Map([...root.querySelectorAll('.gw-node')].map(g => [g.dataset.key,
                                                                          g.dataset.box.split(' ').map(Number)]));
  const through = [], tips = [], together = [];
  const paths = [...root.querySelectorAll('.gw-edge')];
  const samples = new Map();
  for (const p of paths) {
    const len = p.getTotalLength();
    const pts = [];
    for (let s = 0; s <= len; s += 1) pts.push(p.getPointAtLength(s));
    samples.set(p, pts);
    pts.forEach((q, k) => {
      if (k < 3 || k > pts.length - 4) return;  // (its own ends are on its nodes' borders)
      for (const [key, [x, y, w, h]] of boxes) {
        if (q.x > x + 1 && q.x < x + w - 1 && q.y > y + 1 && q.y < y + h - 1) {
          through.push(`${p.dataset.fromKey}->${p.dataset.toKey} passes through ${key}`);
          return;
        }
      }
    });
    const end = p.getPointAtLength(len);
    const [x, y, w, h] = boxes.get(p.dataset.toKey);
    const outside = Math.hypot(Math.max(x - end.x, 0, end.x - x - w), Math.max(y - end.y, 0, end.y - y - h));
    const off = outside > 0 ? outside : Math.min(end.x - x, x + w - end.x, end.y - y, y + h - end.y);
    if (off > 2) tips.push(`${p.dataset.fromKey}->${p.dataset.toKey} ends ${off.toFixed(1)} px off its target's border`);
  }
  const dashed = paths.filter(p => getComputedStyle(p).strokeDasharray !== 'none');
  if (coincide) for (let i = 0; i < dashed.length; i++) for (let j = i + 1; j < dashed.length; j++) {
    const b = samples.get(dashed[j]);
    let run = 0, worst = 0;
    for (const q of samples.get(dashed[i])) {
      run = b.some(r => Math.abs(r.x - q.x) < 1.5 && Math.abs(r.y - q.y) < 1.5) ? run + 1 : 0;
      worst = Math.max(worst, run);
    }
    if (worst > 8) together.push(`${dashed[i].dataset.fromKey}->${dashed[i].dataset.toKey} and ` +
                                 `${dashed[j].dataset.fromKey}->${dashed[j].dataset.toKey}: ${worst} px`);
  }
  return {edges: paths.length, dashed: dashed.length, through, tips, together};
}"""


def start_ui(tree, replies, tmp_path, env=None):
    return UI(tree, replies, tmp_path, env=env)


def api_route() -> str:
    """The pack's control API as the page calls it: the plugin's handler, or the shell installer's copy."""
    return "**/api/plugins/graph_workflow_engine/workflow_control" if FORM[0] == "plugin" \
        else "**/api/graph_workflow_control"


def held(page, requests: list, routes: list) -> None:
    """The page's control requests recorded and held back (each route in ``routes``, for the test to let go on):
    the page shows them pending meanwhile."""
    def hold(route):
        requests.append(json.loads(route.request.post_data or "{}"))
        routes.append(route)
    page.route(api_route(), hold)


def geometry(page, coincide=True) -> dict:
    root = page.locator(".graph-workflow").last.element_handle()
    return page.evaluate(GEOMETRY, [root, coincide])


def assert_clear(g: dict) -> None:
    assert g["edges"] and not g["through"] and not g["tips"] and not g["together"], g


def bug_report(page, project) -> None:
    send(page, f"fix the bug in {project}/calc.py: divide(1, 0) crashes with ZeroDivisionError")


# ── the graph at a glance ──────────────────────────────────────────────────────────────────────────────────

def test_every_node_passed_is_marked_and_no_edge_crosses_a_node(tree, project, browser, tmp_path):
    """A bug fix whose test fails once, then passes: Start and the decision are marked passed, the test step has the
    mark of a step that failed before it passed; the graph's edges keep clear of the nodes; at 480 px the labels keep
    the page's text size and nothing of Agent-Zero's covers the graph; without the layout library the component
    draws a plain layout and says so."""
    run_tests = f'cd {project} && python3 test_calc.py; echo "[exit:$?]"'
    replies = [terminal(run_tests, "Reproduce"),
               terminal(f"grep -n -A2 'def divide' {project}/calc.py", "Find the division"),
               terminal(f"sed -i 's|return a / b$|return a / b|' {project}/calc.py; echo \"[exit:$?]\"", "A first try"),
               terminal(run_tests, "Run the tests"),
               terminal(f"sed -i 's|return a / b$|return a / b if b else 0.0|' {project}/calc.py; echo \"[exit:$?]\"",
                        "Guard the division"),
               terminal(run_tests, "Run the tests again"),
               terminal(run_tests, "Regressions"),
               respond("Fixed: divide() returns 0.0 for a zero divisor; the tests pass.")]
    ui = start_ui(tree, replies, tmp_path)
    try:
        page, errors = open_chat(browser, ui)
        bug_report(page, project)
        done = wait_for(page, lambda c: c["status"] == "completed", "the run completed", timeout=120)
        marks = done["marks"]
        assert marks["start"] == marks["decide_approach"] == "passed", marks
        assert marks["test"] == "recovered" and marks["fix"] == marks["reproduce"] == marks["isolate"] == "done", marks
        assert marks["done"] == "reached" and marks["gather_context"] == "pending", marks
        assert_clear(geometry(page))
        name = page.locator(".graph-workflow .gw-graph").last.get_attribute("aria-label")
        assert name.startswith("Bug Fix Workflow, completed") and "5 of 5 steps done" in name
        legend = page.locator(".graph-workflow .gw-legend").last.inner_text()
        assert "done after a failed check" in legend and "passed" in legend
        shot(page, "c1-marks-completed")

        page.set_viewport_size({"width": 480, "height": 900})  # a phone: the labels keep their size, the box scrolls
        page.evaluate("""() => {  // the graph's box below Agent-Zero's panels fixed at the top of the window (its
            const box = [...document.querySelectorAll('.graph-workflow .gw-graph-box')].pop();  // logo, clock)
            const history = document.getElementById('chat-history');
            history.scrollTop += box.getBoundingClientRect().top - history.getBoundingClientRect().top - 110; }""")
        time.sleep(0.5)
        sizes = page.evaluate("""() => {
            const body = getComputedStyle(document.body).fontSize;
            const labels = [...document.querySelectorAll('.graph-workflow .gw-node text')];
            return {body, labels: [...new Set(labels.map(t => getComputedStyle(t).fontSize))],
                    scaled: [...document.querySelectorAll('.graph-workflow .gw-graph')].some(s =>
                        Math.abs(s.getBoundingClientRect().width - s.width.baseVal.value) > 0.5)};
        }""")
        assert sizes["labels"] == [sizes["body"]] and not sizes["scaled"], sizes
        covered = page.evaluate("""() => {
            const box = [...document.querySelectorAll('.graph-workflow .gw-graph-box')].pop();
            const area = document.getElementById('chat-history').getBoundingClientRect();
            const r = box.getBoundingClientRect();
            const out = [];
            for (let x = r.left + 2; x < r.right - 1; x += 8) for (let y = r.top + 2; y < r.bottom - 1; y += 8) {
                if (y < area.top || y > area.bottom || x < area.left || x > area.right) continue;
                const hit = document.elementFromPoint(x, y);
                if (hit && !box.contains(hit)) out.push(`${Math.round(x)},${Math.round(y)}: ${hit.tagName}#${hit.id}.${hit.className}`);
            }
            return out;
        }""")
        assert covered == [], covered[:5]
        right = page.evaluate("() => [...document.querySelectorAll('.graph-workflow')].pop().getBoundingClientRect().right")
        assert right <= 480
        shot(page, "c2-480px")
        assert errors == []

        library = tree.root / ("usr/plugins/graph_workflow_engine" if FORM[0] == "plugin" else "") / \
            "extensions/webui/graph_workflow_engine/dagre.js"
        kept = library.read_bytes()
        library.unlink()  # a Git URL install that could not download it
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            plain = context.new_page()
            plain.goto(ui.url)
            plain.locator(".chats-config-list .chat-container").first.click(timeout=30_000)
            plain.wait_for_selector(".graph-workflow .gw-node", timeout=30_000)
            note = plain.locator(".graph-workflow .gw-note").last
            assert note.is_visible() and note.inner_text() == "layout library missing: a simple layered drawing"
            assert plain.locator(".graph-workflow .gw-node").count() >= 12
            assert_clear(geometry(plain))
            shot(plain, "c3-without-the-layout-library")
            context.close()
        finally:
            library.write_bytes(kept)
    finally:
        ui.close()


# ── large plans ────────────────────────────────────────────────────────────────────────────────────────────

def chain(n: int) -> dict:
    """A plan of n nodes: a chain of steps, each with a loop back and an escalation they all share."""
    nodes = {"start": {"type": "start"}, "stuck": {"type": "escalate", "name": "Escalate: stuck", "reason": "stuck"},
             "done": {"type": "exit", "name": "Done"}}
    edges = [{"from": "start", "to": "t0"}]
    tasks = n - 3
    for i in range(tasks):
        nodes[f"t{i}"] = {"type": "task", "name": f"Step {i + 1} of the long chain", "verify": {"type": "any_output"},
                          "max_retries": 1}
        edges += [{"from": f"t{i}", "to": f"t{i + 1}" if i + 1 < tasks else "done", "condition": "on_success"},
                  {"from": f"t{i}", "to": "stuck", "condition": "on_exhaust"}]
        if i:
            edges.append({"from": f"t{i}", "to": f"t{i - 1}", "condition": "on_retry"})
    return {"name": f"Chain of {n}", "domains": ["bugfix"], "triggers": [f"run the chain of {n}"],
            "trigger_threshold": 1, "graph": {"start": "start", "nodes": nodes, "edges": edges}}


def test_a_large_plan_shows_the_steps_around_the_current_one_under_its_controls(tree, browser, tmp_path):
    """40-, 100- and 500-node plans: folded around the current step (the rest in two folds, one control to show
    all), the controls and the current step above the graph, the current step in view in the graph's box."""
    library = tmp_path / "chains.json"
    library.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {f"chain{n}": chain(n) for n in (40, 100, 500)}}))
    steps = [terminal(f'echo "step {k} done"', f"Step {k}") for k in range(1, 4)]
    replies = [r for _ in range(3) for r in (*steps, respond("Three steps are done. Shall I go on?"))]
    ui = start_ui(tree, replies, tmp_path, env={"GRAPH_ENGINE_LIBRARY": str(library)})
    try:
        page, errors = open_chat(browser, ui)
        for n in (40, 100, 500):
            if n != 40:  # a new chat for the next plan
                before = page.evaluate("() => globalThis.getContext()")
                page.click("#newChat")
                page.wait_for_function("(before) => globalThis.getContext() !== before && "
                                       "!document.querySelector('#chat-history .graph-workflow')", arg=before)
                time.sleep(1.0)
            send(page, f"run the chain of {n}")
            wait_for(page, lambda c: c["status"] == "active" and c["current"] == "t3", f"the chain of {n} at its 4th step")
            page.wait_for_selector("text=Shall I go on?", timeout=60_000)
            time.sleep(0.5)
            seen = page.evaluate("""() => {
                const c = [...document.querySelectorAll('.graph-workflow')].pop();
                const rect = (s) => c.querySelector(s).getBoundingClientRect();
                const box = rect('.gw-graph-box'), cur = c.querySelector('.gw-mark-current').getBoundingClientRect();
                return {nodes: c.querySelectorAll('.gw-node:not(.gw-fold)').length, folds: [...c.querySelectorAll(
                            '.gw-fold')].map(f => f.getAttribute('aria-label')), fold: c.querySelector('.gw-fold-text').textContent,
                        controls: rect('.gw-controls').top, facts: rect('.gw-facts').top, graph: box.top,
                        currentInBox: cur.top >= box.top && cur.bottom <= box.bottom && cur.left >= box.left && cur.right <= box.right,
                        facts_text: c.querySelector('.gw-facts').textContent};
            }""")
            assert seen["controls"] < seen["graph"] and seen["facts"] < seen["graph"], seen
            assert seen["facts_text"].startswith("Step 4 of") and seen["currentInBox"], seen
            assert seen["fold"] == f"Showing the 16 steps around the current one, of {n}.", seen
            assert seen["folds"] == [f"⋯ {n - 16} steps after, folded: show all {n} steps"], seen  # (start to t2 shown)
            assert 16 <= seen["nodes"] <= 32, seen  # the window (an escalation drawn beside each step that shares it)
            assert_clear(geometry(page))
            shot(page, f"c4-{n}-nodes-folded")
        page.get_by_role("button", name="Show all 500 steps").last.click()
        page.wait_for_function("() => [...document.querySelectorAll('.graph-workflow')].pop()"
                               ".querySelectorAll('.gw-node').length > 500", timeout=60_000)
        assert page.locator(".graph-workflow .gw-fold-text").last.inner_text() == "Showing all 500 steps."
        shot(page, "c5-500-nodes-expanded")
        g = geometry(page, coincide=False)  # (every pair of 1,000 dashed edges: too slow to compare here)
        assert g["edges"] > 1400 and not g["through"] and not g["tips"], {k: v[:3] for k, v in g.items() if v}
        assert errors == []
    finally:
        ui.close()


# ── the controls, the strip, the keyboard ───────────────────────────────────────────────────────────────────

def waiting_replies(project: Path, tail: str = "") -> list[str]:
    return [terminal(f'cd {project} && python3 test_calc.py; echo "[exit:$?]"', "Reproduce"),
            respond("The crash is reproduced: divide(1, 0) raises ZeroDivisionError. Shall I go on?" + tail),
            respond("Noted."), respond("Noted."), respond("The workflow is stopped, as you asked.")]


def waiting(page, ui, project) -> dict:
    bug_report(page, project)
    c = wait_for(page, lambda c: c["status"] == "active" and c["current"] == "isolate", "the run at its second step")
    page.wait_for_selector("text=Shall I go on?", timeout=60_000)
    return c


def test_the_controls_act_through_the_plugins_api_and_leave_the_draft_alone(tree, project, browser, tmp_path):
    """With a draft in the chat input: a control whose request fails says so on its row ("not sent: ..."); Stop
    shows pending, goes to the pack's API with the chat, the run and a request id, and stops the run; the draft
    stays as it was, and the engine's answer is on the component after a reload too."""
    ui = start_ui(tree, waiting_replies(project), tmp_path)
    try:
        page, errors = open_chat(browser, ui)
        before = waiting(page, ui, project)
        draft = "and then please also look at the rounding in"
        page.fill("#chat-input", draft)
        run = page.locator(".graph-workflow").last.get_attribute("data-run")
        answer = page.locator(".graph-workflow .gw-answer").last

        page.route(api_route(), lambda r: r.fulfill(status=403, body="CSRF token missing or invalid"))
        page.locator(".graph-workflow .gw-controls .gw-button[data-kind='pause']").last.click()
        until(lambda: answer.text_content() == "not sent: CSRF token missing or invalid", "the HTTP error on its row")
        assert component(page)["status"] == "active" and page.input_value("#chat-input") == draft
        page.unroute(api_route())

        requests, routes = [], []
        held(page, requests, routes)
        stop = page.locator(".graph-workflow .gw-controls .gw-button[data-kind='stop']").last
        assert stop.get_attribute("title") == 'Same as typing "stop the workflow"'
        stop.click()
        until(lambda: answer.text_content() == "Stopping…", "Stopping…")
        assert stop.inner_text() == "Stopping…" and stop.get_attribute("aria-disabled") == "true"
        shot(page, "c6-control-pending")
        context = page.evaluate("() => globalThis.getContext()")
        assert len(requests) == 1 and {k: requests[0][k] for k in ("context", "run", "control", "node")} == \
            {"context": context, "run": run, "control": "stop", "node": ""}
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", requests[0]["id"])
        routes.pop().continue_()  # on to the pack's handler
        stopped = wait_for(page, lambda c: c["status"] == "stopped", "the run stopped")
        said = until(lambda: answer.text_content() not in ("", "Stopping…") and answer.text_content(), "the answer")
        assert not said.startswith(("not sent", "Not applied")), said
        assert stopped["buttons"] == [] and page.input_value("#chat-input") == draft  # the person's draft, as it was
        assert [e["by"] for e in audit_events(tree) if e["type"] == "plan_stopped"] == ["button"]
        shot(page, "c7-control-answered")
        page.reload()  # the engine's answer travels with the run's data
        page.wait_for_selector(".graph-workflow", timeout=30_000)
        until(lambda: page.locator(".graph-workflow .gw-answer").last.text_content() == said, "the answer again")
        assert errors == [] and before["count"] == 1
    finally:
        ui.close()


def test_the_strip_above_the_input_finds_the_active_run_and_goes_when_it_ends(tree, project, browser, tmp_path):
    long_answer = "\n\n" + "\n\n".join(f"Note {i}: the division has no guard for a zero divisor." for i in range(40))
    ui = start_ui(tree, waiting_replies(project, long_answer), tmp_path)
    try:
        page, errors = open_chat(browser, ui)
        strip = page.locator("#graph-workflow-strip")
        assert strip.is_hidden()  # no run yet
        waiting(page, ui, project)
        until(lambda: strip.is_visible(), "the strip")
        text = strip.locator(".gw-strip-open").inner_text()
        assert "Bug Fix Workflow: Step 2 of 5: Isolate the root cause" in text and "active" in text
        assert strip.locator(".gw-button[data-kind='stop']").count() == 1
        inside = page.evaluate("""() => document.getElementById('input-section')
                                    .contains(document.getElementById('graph-workflow-strip'))""")
        assert inside  # above the chat input, where the person types
        height = "() => document.getElementById('chat-history').scrollHeight"
        for _ in range(60):  # the answer drawn to its end
            seen = page.evaluate(height)
            time.sleep(1.0)
            if page.evaluate(height) == seen:
                break
        page.evaluate("() => { const h = document.getElementById('chat-history'); h.scrollTop = h.scrollHeight; }")
        time.sleep(0.5)
        visible = """() => { const c = [...document.querySelectorAll('.graph-workflow')].pop().getBoundingClientRect();
                             const h = document.getElementById('chat-history').getBoundingClientRect();
                             return c.top >= h.top - 1 && c.top < h.bottom; }"""
        assert not page.evaluate(visible)  # the person's answer pushed the component out of view
        shot_strip = SHOTS / f"{FORM[0]}-c8-strip.png"
        page.screenshot(path=str(shot_strip))
        strip.locator(".gw-strip-open").click()
        until(lambda: page.evaluate(visible), "the component scrolled into view")
        assert page.evaluate("() => document.activeElement?.classList.contains('graph-workflow')")
        shot(page, "c9-strip-opened")
        strip.locator(".gw-button[data-kind='stop']").click()  # the strip's own control: the run ends, the strip goes
        wait_for(page, lambda c: c["status"] == "stopped", "the run stopped")
        until(lambda: strip.is_hidden(), "the strip gone")
        assert errors == []
    finally:
        ui.close()


def test_the_graph_says_its_state_reads_out_a_change_and_goes_back_from_the_keyboard(tree, project, browser,
                                                                                     tmp_path):
    ui = start_ui(tree, waiting_replies(project), tmp_path)
    try:
        page, errors = open_chat(browser, ui)
        requests, routes = [], []
        held(page, requests, routes)
        page.evaluate("""() => { window.gwRead = [];  // what the component's live region is changed to
            new MutationObserver((changes) => { for (const m of changes) {
                const el = m.target.nodeType === 3 ? m.target.parentElement : m.target;
                if (el?.classList?.contains('gw-live')) window.gwRead.push(el.textContent); } })
              .observe(document.getElementById('chat-history'), {subtree: true, childList: true, characterData: true}); }""")
        waiting(page, ui, project)
        assert component(page)["live"] == "Step 2 of 5: Isolate the root cause"
        assert page.evaluate("() => window.gwRead") == ["Step 2 of 5: Isolate the root cause"]  # read out once, on the change
        graph = page.locator(".graph-workflow .gw-graph").last
        assert graph.get_attribute("role") == "group"
        name = graph.get_attribute("aria-label")
        assert name == "Bug Fix Workflow, active: Step 2 of 5: Isolate the root cause; 1 of 5 steps done"
        described = page.evaluate("""(g) => document.getElementById(g.getAttribute('aria-describedby'))?.textContent""",
                                  graph.element_handle())
        assert described.startswith("[done] 1. Reproduce the issue")  # the card's text, read without opening it
        hidden_text = page.locator(".graph-workflow pre.gw-text").last
        assert hidden_text.get_attribute("aria-hidden") is None and not hidden_text.evaluate(
            "e => e.closest('details')")

        page.locator(".graph-workflow .gw-controls .gw-button").last.focus()
        for _ in range(12):  # Tab to the list of steps to go back to
            page.keyboard.press("Tab")
            if page.evaluate("() => document.activeElement?.classList.contains('gw-select')"):
                break
        select = page.locator(".graph-workflow .gw-select").last
        assert select.evaluate("e => e === document.activeElement")
        ring = select.evaluate("e => { const s = getComputedStyle(e); return [s.outlineStyle, s.outlineWidth]; }")
        assert ring[0] != "none" and float(ring[1].rstrip("px")) >= 2, ring
        assert select.evaluate("e => [...e.options].map(o => [o.value, o.text])") == [["reproduce", "Reproduce the issue"]]
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement?.textContent") == "Go back"
        shot(page, "c10-focus-go-back")
        for _ in range(4):  # on to the graph: a step done is a control too, with a visible focus ring
            page.keyboard.press("Tab")
            if page.evaluate("() => document.activeElement?.classList?.contains('gw-node')"):
                break
        ring = page.evaluate("""() => { const g = document.activeElement;
            return g.classList.contains('gw-node') && [g.dataset.node, g.getAttribute('role'), g.getAttribute('aria-label'),
                getComputedStyle(g.querySelector('.gw-focus')).stroke, getComputedStyle(g.querySelector('.gw-focus')).strokeWidth]; }""")
        assert ring and ring[:3] == ["reproduce", "button", "Reproduce the issue: done; go back to this step"], ring
        assert ring[3] not in ("none", "") and ring[4] == "3px", ring
        shot(page, "c11-focus-on-a-step")
        page.keyboard.press("Shift+Tab")  # back to the button
        assert page.evaluate("() => document.activeElement?.textContent") == "Go back"
        page.keyboard.press("Enter")
        until(lambda: requests, "the request")
        assert (requests[0]["control"], requests[0]["node"]) == ("back", "reproduce")
        assert page.locator(".graph-workflow .gw-back-button").last.inner_text() == "Going back…"
        routes.pop().continue_()
        wait_for(page, lambda c: c["status"] == "active" and c["current"] == "reproduce", "the run back")
        assert [e["by"] for e in audit_events(tree) if e["type"] == "jumped_back"] == ["button"]
        assert page.input_value("#chat-input") == ""
        assert errors == []
    finally:
        ui.close()
