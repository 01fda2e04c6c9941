"""The workflow component in Agent-Zero's real web UI: its own run_ui.py from the v1.7 tree of ``$A0_TREES``, the
pack installed by its installer (as a plugin, and in the shell installer's form), the model scripted at the LiteLLM boundary (tests/a0ui.py), driven
by headless Chromium (Debian's package, through Playwright; nothing is downloaded at run time).

A screenshot of each state is saved in ``$GRAPH_ENGINE_UI_SHOTS`` (default: build/ui-shots).  Run with
``make real-ui A0_TREES=DIR``; skipped with one line when there is no tree, no Chromium or no Playwright.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from a0real import A0Copy, respond, source_trees, terminal

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("GRAPH_ENGINE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(os.environ.get("GRAPH_ENGINE_UI_SHOTS") or ROOT / "build" / "ui-shots")
TREE = next((t for t in source_trees() if t.name == "v1.7"), None)
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - `make real-ui` installs it
    sync_playwright = None

pytestmark = [
    pytest.mark.skipif(TREE is None, reason="no Agent-Zero v1.7 tree: set A0_TREES (make real-ui)"),
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: install Debian's chromium package"),
    pytest.mark.skipif(sync_playwright is None, reason="no Playwright: make real-ui installs it"),
]
CALC = "def divide(a, b):\n    return a / b\n"
TEST = ("from calc import divide\n\ntry:\n    divide(1, 0)\n    print('2 passed')\nexcept ZeroDivisionError:\n"
        "    print('1 failed: ZeroDivisionError')\n    raise SystemExit(1)\n")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class UI:
    """One Agent-Zero web UI process on a localhost port, the pack installed as a plugin, its model scripted."""

    def __init__(self, tree: A0Copy, replies: list[str], work: Path, env: dict | None = None,
                 branch_replies: dict | None = None, chat_delay=0.0, **script) -> None:
        self.tree, self.port, self.calls = tree, free_port(), work / "calls.json"
        (work / "script.json").write_text(json.dumps({"replies": replies, "branch_replies": branch_replies or {},
                                                      "chat_delay": chat_delay, **script}))
        env = {**os.environ, "PYTHONPATH": str(tree.package_home()), "A0_ROOT": str(tree.root),
               "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
        env.pop("GRAPH_ENGINE_RUNS_DIR", None)
        self.log = open(work / "server.log", "w")
        self.process = subprocess.Popen(
            [str(tree.python), str(ROOT / "tests" / "a0ui.py"), "--a0-root", str(tree.root), "--script",
             str(work / "script.json"), "--port", str(self.port), "--calls", str(self.calls)],
            cwd=tree.root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}/"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(self.url, timeout=2).status == 200:
                    return
            except OSError:
                time.sleep(0.5)
            assert self.process.poll() is None, (work / "server.log").read_text()[-3000:]
        raise AssertionError("the web UI did not answer within 120 s:\n" + (work / "server.log").read_text()[-3000:])

    def model_calls(self) -> list[list[dict]]:
        return json.loads(self.calls.read_text()) if self.calls.is_file() else []

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@pytest.fixture(scope="module", params=["plugin", "shell"])
def tree(request, tmp_path_factory):
    """The tree with the pack installed as a plugin (the Plugins dialog's form) or by the shell installer."""
    copy = A0Copy.fresh(TREE, tmp_path_factory.mktemp(f"ui-{request.param}"))
    copy.install(plugin=request.param == "plugin")
    return copy


@pytest.fixture
def project(tree):
    folder = tree.root / "usr" / "workdir" / "calc"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "calc.py").write_text(CALC)
    (folder / "test_calc.py").write_text(TEST)
    return folder


@pytest.fixture
def browser():
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        yield b
        b.close()


def open_chat(browser, ui: UI):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []  # the component's own (the page's others: its CDN scripts do not load on a closed network)
    page.on("pageerror", lambda e: errors.append(f"{e}") if "graph-workflow" in f"{e} {e.stack}" else None)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "graph-workflow" in m.text else None)
    page.goto(ui.url)
    page.locator("text=New Chat").locator("visible=true").first.click()
    page.wait_for_selector("#chat-input", state="visible", timeout=30_000)
    return page, errors


def send(page, text: str) -> None:
    page.fill("#chat-input", text)
    page.keyboard.press("Enter")
    try:  # the page takes the message: the input is emptied
        page.wait_for_function("() => document.querySelector('#chat-input').value === ''", timeout=10_000)
    except Exception:  # noqa: BLE001 - not taken (the page was still connecting): once more
        if page.input_value("#chat-input") == text:
            page.keyboard.press("Enter")


def component(page) -> dict:
    """What the newest workflow component in the page shows."""
    return page.evaluate("""() => {
        const all = [...document.querySelectorAll('.graph-workflow')];
        const c = all[all.length - 1];
        if (!c) return null;
        return {count: all.length, status: c.dataset.status, plan: c.querySelector('.gw-plan')?.textContent,
                run: c.dataset.run, badge: c.querySelector('.gw-badge')?.textContent || '',
                current: c.querySelector('.gw-mark-current')?.dataset.node || '',
                currents: [...c.querySelectorAll('.gw-mark-current')].map(n => n.dataset.node),
                branches: [...c.querySelectorAll('.gw-branch')].map(b => [b.querySelector('.gw-branch-name')
                    .textContent, b.querySelector('.gw-branch-step').textContent, b.className]),
                done: [...c.querySelectorAll('.gw-mark-done')].map(n => n.dataset.node),
                marks: Object.fromEntries([...c.querySelectorAll('.gw-node')].map(n => [n.dataset.node,
                                                                                       n.dataset.mark])),
                buttons: [...c.querySelectorAll('.gw-controls .gw-button')].map(b => b.dataset.say),
                kinds: [...c.querySelectorAll('.gw-controls .gw-button')].map(b => b.dataset.kind),
                live: c.querySelector('.gw-live')?.textContent || '',
                answer: c.querySelector('.gw-answer')?.textContent || '',
                text: c.querySelector('pre.gw-text')?.textContent || ''};
    }""")


def until(check, what: str, timeout: float = 90):
    """The value of ``check()`` once it is true (looked at every 0.1 s), or a failure naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"never: {what}")


def wait_for(page, check, what: str, timeout: float = 90):
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = component(page)
        if seen and check(seen):
            return seen
        time.sleep(0.25)
    raise AssertionError(f"the page never showed {what}; it shows {seen}")


def shot(page, name: str) -> Path:
    """The page with the newest component scrolled into view, and the component alone."""
    name = f"{FORM[0]}-{name}"
    path = SHOTS / f"{name}.png"
    for attempt in range(5):  # a live update may replace the component while it is being shot
        try:
            found = page.locator(".graph-workflow").last
            found.scroll_into_view_if_needed(timeout=5_000)
            page.screenshot(path=str(path), full_page=False)
            found.screenshot(path=str(SHOTS / f"{name}-component.png"), timeout=5_000)
            return path
        except Exception:  # noqa: BLE001 - shot again
            if attempt == 4:
                raise
            time.sleep(0.3)
    return path


FORM = ["plugin"]  # the install form of the tree in use (for the screenshots' names)


def audit_events(tree: A0Copy) -> list[dict]:
    out = []
    for log in sorted((tree.root / "usr" / "graph_engine" / "runs").rglob("*.jsonl")):
        out += [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return out


@pytest.fixture(autouse=True)
def form(tree, request):
    FORM[0] = request.node.callspec.params["tree"]


def test_the_component_appears_moves_with_the_run_and_ends_completed(tree, project, browser, tmp_path):
    replies = [terminal(f'cd {project} && python3 test_calc.py; echo "[exit:$?]"', "Reproduce"),
               terminal(f"grep -n -A2 'def divide' {project}/calc.py", "Find the division"),
               terminal(f"sed -i 's|return a / b$|return a / b if b else 0.0|' {project}/calc.py; echo \"[exit:$?]\"",
                        "Guard the division"),
               terminal(f'cd {project} && python3 test_calc.py; echo "[exit:$?]"', "Run the tests"),
               terminal(f'cd {project} && python3 test_calc.py; echo "[exit:$?]"', "Regressions"),
               respond("Fixed: divide() returns 0.0 for a zero divisor; the tests pass.")]
    ui = UI(tree, replies, tmp_path)
    try:
        page, errors = open_chat(browser, ui)
        send(page, f"fix the bug in {project}/calc.py: divide(1, 0) crashes with ZeroDivisionError")
        first = wait_for(page, lambda c: c["status"] == "active", "an active workflow")
        assert first["plan"] == "Bug Fix Workflow" and first["count"] == 1
        assert first["current"] in ("reproduce", "isolate", "fix", "test", "verify_no_regression")
        shot(page, "1-appeared")
        currents = {first["current"]}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            c = component(page)
            if c["status"] != "active":
                break
            currents.add(c["current"])
            time.sleep(0.1)
        assert len(currents - {""}) >= 2, currents  # it moved as the run moved, without a reload
        done = wait_for(page, lambda c: c["status"] == "completed", "the run completed")
        assert done["buttons"] == [] and "Outcome: completed" in done["text"] and done["count"] == 1
        assert {"reproduce", "fix", "test"} <= set(done["done"])
        shot(page, "2-completed")
        link = page.locator(".graph-workflow .gw-picture").last.get_attribute("href")
        if link:  # the picture of the run, opened in the browser (an SVG where Graphviz is installed)
            picture = page.request.get(ui.url.rstrip("/") + link)
            assert picture.status == 200 and b"<svg" in picture.body()
        page.reload()  # rebuilt from the log item's data
        page.wait_for_selector(".graph-workflow", timeout=30_000)
        assert component(page)["status"] == "completed"
        shot(page, "3-after-reload")
        page.evaluate("() => document.body.classList.add('light-mode')")  # the light theme: its colours
        light = page.evaluate("() => getComputedStyle(document.querySelector('.graph-workflow')).color")
        page.evaluate("() => document.body.classList.remove('light-mode')")
        assert light != page.evaluate("() => getComputedStyle(document.querySelector('.graph-workflow')).color")
        page.evaluate("() => document.body.classList.add('light-mode')")
        shot(page, "3a-light")
        page.evaluate("() => document.body.classList.remove('light-mode')")
        page.set_viewport_size({"width": 420, "height": 900})  # a narrow window: the graph scrolls inside its box
        box = page.evaluate("() => document.querySelector('.graph-workflow').getBoundingClientRect().right")
        assert box <= 420
        shot(page, "3b-narrow")
        assert errors == []
    finally:
        ui.close()


HANDLER = ROOT / "api" / "workflow_control.py"  # the pack's control API (the plugin's api/ folder)


@pytest.mark.skipif(not HANDLER.is_file(), reason="the pack ships no workflow_control API handler in this checkout "
                                                  "(tests/test_real_ui_component.py checks the page against a stub)")
def test_a_step_clicked_on_the_graph_and_stop_clicked_mid_run_steer_the_run(tree, project, browser, tmp_path):
    """While the run waits for the person: a step done, clicked on the graph, takes the run back to it; then Stop
    stops it, in the page and in the audit log; both through the plugin's API, the draft in the chat input
    untouched."""
    replies = [terminal(f'cd {project} && python3 test_calc.py; echo "[exit:$?]"', "Reproduce"),
               respond("The crash is reproduced: divide(1, 0) raises ZeroDivisionError. Shall I go on?"),
               respond("Back at the first step, as you asked."),
               respond("The workflow is stopped, as you asked.")]
    ui = UI(tree, replies, tmp_path)
    try:
        page, errors = open_chat(browser, ui)
        send(page, f"fix the bug in {project}/calc.py: divide(1, 0) crashes with ZeroDivisionError")
        waiting = wait_for(page, lambda c: c["status"] == "active" and c["current"] == "isolate",
                           "the run waiting at its second step")
        page.wait_for_selector("text=Shall I go on?", timeout=60_000)
        assert "stop" in waiting["kinds"]
        page.fill("#chat-input", "a draft")
        shot(page, "4-waiting")
        page.click(".graph-workflow .gw-can-go-back[data-node='reproduce']")
        wait_for(page, lambda c: c["status"] == "active" and c["current"] == "reproduce", "the run back at its step")
        back = [e for e in audit_events(tree) if e["type"] == "jumped_back"]
        assert len(back) == 1
        shot(page, "4-went-back")
        page.click(".graph-workflow .gw-controls .gw-button[data-kind='stop']")
        stopped = wait_for(page, lambda c: c["status"] == "stopped", "the run stopped")
        assert stopped["buttons"] == [] and page.input_value("#chat-input") == "a draft"
        shot(page, "5-stopped")
        assert len([e for e in audit_events(tree) if e["type"] == "plan_stopped"]) == 1
        assert errors == []
    finally:
        ui.close()


def test_branches_running_at_once_show_side_by_side_then_join(tree, browser, tmp_path):
    """A plan whose three checks run at once, each in a subordinate agent (a model that takes 3 s per branch call):
    the component shows the three branches side by side with their steps, each current on the graph, while they
    run; then the run goes on past the fan-in and completes."""
    from test_parallel_branches import checks_plan
    folder = tree.root / "usr" / "workdir" / "release"
    folder.mkdir(parents=True, exist_ok=True)
    for b in ("lint", "types", "tests"):
        (folder / f"{b}.sh").write_text(f'echo "{b}: clean"\n')
    plan = checks_plan()
    for b in ("lint", "types", "tests"):
        plan["graph"]["nodes"][b].update(tool_hint=f"cd {folder} && sh {b}.sh", max_retries=1)
    library = tmp_path / "release_checks.json"
    library.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"release_checks": plan}}))

    def check(b, again=""):
        return terminal(f'cd {folder} && sh {b}.sh; echo "[exit:$?]"{again}', f"Run the {b} check{again}")

    branch_replies = {b: [check(b), check(b, " # again"), respond(f"{b}: clean")] for b in ("lint", "types", "tests")}
    replies = [terminal(f"ls {folder}", "Prepare"), terminal('echo "release checks: done"', "Summary"),
               respond("All three checks passed.")]
    ui = UI(tree, replies, tmp_path, env={"GRAPH_ENGINE_LIBRARY": str(library)}, branch_replies=branch_replies,
            chat_delay={"lint": 3.0, "types": 3.0, "tests": 3.0})
    try:
        page, errors = open_chat(browser, ui)
        send(page, f"run the release checks in {folder}")
        running = wait_for(page, lambda c: c["status"] == "active" and len(c["branches"]) == 3
                           and sum("gw-branch-running" in cls for _, _, cls in c["branches"]) == 3,
                           "three branches running")
        assert [name for name, _, _ in running["branches"]] == ["Lint", "Type check", "Unit tests"]
        assert [step for _, step, _ in running["branches"]] == ["at Lint (attempt 1 of 2)",
                                                                "at Type check (attempt 1 of 2)",
                                                                "at Unit tests (attempt 1 of 2)"]
        assert {"lint", "types", "tests"} <= set(running["currents"])
        shot(page, "6-branches-running")
        done = wait_for(page, lambda c: c["status"] == "completed", "the run completed", timeout=120)
        assert {"prepare", "lint", "types", "tests", "report"} <= set(done["done"]) and done["branches"] == []
        shot(page, "7-branches-joined")
        assert errors == []
    finally:
        ui.close()
