"""The workflow card in Agent-Zero's chat, the picture of a run, and the facts the supervisor reads.

Driven through both extension files in Agent-Zero's hook order (the stand-in's log has Agent-Zero's item API:
``log()`` returns an item, ``item.update()`` changes it in place).  Golden files: ``fixtures/cards/*.txt``
hold the card as the chat shows it after every pass of three sessions (the demo's bug fix with a retry, an
escalation, a linear plan); ``make prompts`` accepts a change after review.
"""

import dataclasses
import json
import os
import re
import shutil
import threading
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest
from golden import text_files
from scenario import IDLE, LEGACY, FixtureModel, message_for, started

from graph_engine.hosts.agent_zero import adapter, cards as card_module

from graph_engine.session import audit, salute

from graph_engine.texts import card
from graph_engine.texts import view as component

from graph_engine.authoring import render_graph
from graph_engine.tools import demo
from graph_engine.tools.demo import cards, view
from graph_engine.tools.standin import FIXTURES, LineLog, Reply, Session, cmd

ROLES = FIXTURES / "organizations" / "roles"
GIT_MESSAGE = "create branch for login, start feature work on a new branch"


CardFile = text_files(FIXTURES / "cards", lambda name: name.removeprefix("test_card_"))  # one file per session


@pytest.fixture
def golden(snapshot):
    return snapshot.use_extension(CardFile)


def transcript(s: Session, replies, masks: dict[str, str]) -> str:
    """The card after each pass, as a reviewer reads it; a pass that changed nothing says so."""
    blocks = []
    for reply in replies:
        before = len(s.log.updates)
        record = s.run_pass(reply)
        shown = cards(s.log)
        changed = shown and shown[-1].no in s.log.updates[before:]
        did = demo._reply_summary(record.reply).splitlines()[0] if record.reply else "(no call)"
        head = f"── pass {record.iteration}: card {'updated' if changed else 'unchanged'}; then the model: {did}"
        blocks.append(head + ("\n" + view(shown[-1]) if changed else ""))
        if not s.monologue_open or (s.state is None and shown and "Status      active" not in view(shown[-1])):
            break
    text = "\n\n".join(blocks) + "\n"
    for real, shown_as in masks.items():
        text = text.replace(real, shown_as)
    return text


def run_ids(s: Session) -> dict[str, str]:
    return {c.kvps["Run"]: "<run>" for c in cards(s.log)}


def begin(project, layout: str = "new", log=None) -> tuple[Session, list[Reply]]:
    """The demo's bug-fix session, its message sent; the model's replies still to play."""
    message, replies = demo._script(project / "project")
    s = Session(layout=layout)
    if log is not None:
        s.agent.context.log = None if log is False else log
    s.user(message)
    return s, replies


def play(s: Session, replies) -> Session:
    for reply in replies:
        s.run_pass(reply)
    return s


def demo_session(project, layout: str = "new") -> tuple[Session, str]:
    s, replies = begin(project, layout)
    return s, transcript(s, replies, {})


def masked(s: Session, text: str, tmp_path) -> str:
    for real, shown_as in {**run_ids(s), os.environ["A0_ROOT"]: "<a0>", str(tmp_path): "<tmp>"}.items():
        text = text.replace(real, shown_as)
    return text


# ── the card's text, pass by pass (golden files) ────────────────────────────


@pytest.fixture
def project(tmp_path):
    (tmp_path / "project").mkdir()
    return tmp_path


@pytest.fixture
def no_graphviz(monkeypatch):
    """Pictures as mermaid text, as in a container without Graphviz: the golden files read the same on every
    machine (the SVG picture has its own test)."""
    monkeypatch.setattr(render_graph.shutil, "which", lambda name: None)


def test_card_bugfix_demo(project, golden, no_graphviz):
    s, text = demo_session(project)
    assert masked(s, text, project) == golden


def test_the_card_reads_the_same_on_both_layouts(project, tmp_path_factory, no_graphviz):
    new_s, new = demo_session(project, "new")
    other = tmp_path_factory.mktemp("old")
    (other / "project").mkdir()
    old_s, old = demo_session(other, "old")
    assert masked(new_s, new, project) == masked(old_s, old, other)


def test_card_bugfix_escalation(tmp_path, golden, no_graphviz):
    s = Session()
    s.user(message_for("bugfix_workflow"))
    model = FixtureModel("bugfix_workflow", {"fix": 3})
    text = transcript(s, [IDLE] + [model] * 12, {})
    assert masked(s, text, tmp_path) == golden


def test_card_linear_git_feature_branch(monkeypatch, tmp_path, golden, no_graphviz):
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(LEGACY))
    s = Session()
    s.user(GIT_MESSAGE)
    replies = [IDLE, cmd("git status && git branch", "On branch main\nnothing to commit, working tree clean\n* main"),
               cmd("git checkout -b feature/login main", "fatal: a branch named 'feature/login' already exists"),
               cmd("git checkout -b feature/login-2 main", "Switched to a new branch 'feature/login-2'"), IDLE]
    text = transcript(s, replies, {})
    assert masked(s, text, tmp_path) == golden
    last = cards(s.log)[-1]
    assert last.content.splitlines()[:3] == ["[done] 1. Check current branch status", "[done] 2. Create feature branch",
                                             "[current] 3. Make changes"]


def test_every_card_golden_file_has_its_test():
    assert sorted(p.stem for p in (FIXTURES / "cards").glob("*.txt")) == [
        "bugfix_demo", "bugfix_escalation", "linear_git_feature_branch"]


# ── one card per run, updated in place ──────────────────────────────────────


def test_one_card_per_run_updated_in_place_only_when_something_changed(project):
    s, replies = begin(project)
    changed = []
    for reply in replies:
        before, seq = len(s.log.updates), (s.state or {}).get("seq")
        s.run_pass(reply)
        assert len(cards(s.log)) == 1  # never a new line per pass
        card = cards(s.log)[0]
        changed.append(card.no in s.log.updates[before:])
        now = (s.state or s.agent._htn_last_run).get("seq")
        assert changed[-1] == (now != seq)  # updated exactly when the run's state moved
    assert changed.count(False) == 1  # the misformatted reply: nothing judged, nothing to show
    first = view(cards(s.log)[0])
    s.user("Fix the bug in /tmp/other.py: it crashes with a KeyError")
    s.run_pass(IDLE)
    assert len(cards(s.log)) == 2 and view(cards(s.log)[0]) == first  # a new run: a new card; the old one stays
    assert cards(s.log)[1].kvps["Run"] != cards(s.log)[0].kvps["Run"]


def test_retry_and_escalation_are_shown_with_their_reasons(project, tmp_path):
    s, _ = demo_session(project)
    retry = [c for c in _history(project) if "Route:" in c]
    assert retry == ["Last check: Test the fix: fail, the output shows a failure: 'SyntaxError: '\n"
                     "Route: Test the fix failed -> back to Implement the fix"]
    e = Session()
    e.user(message_for("bugfix_workflow"))
    transcript(e, [IDLE] + [FixtureModel("bugfix_workflow", {"fix": 3})] * 12, {})
    end = cards(e.log)[-1]
    reason = e.agent._htn_last_run["escalation"]["reason"]
    assert end.heading == "Workflow: Bug Fix Workflow: escalated to PACE level contingent"
    assert f"Outcome: escalated to PACE level contingent: {reason}" in end.content.splitlines()
    assert "Route: Implement the fix failed with no attempts left -> Escalate: unable to fix" in end.content


def _history(project) -> list[str]:
    """The 'Last check' and 'Route' lines of every state the demo session's card showed."""
    s, replies = begin(project)
    seen = []
    for reply in replies:
        s.run_pass(reply)
        lines = [line for line in cards(s.log)[0].content.splitlines() if line.startswith(("Last check", "Route"))]
        if lines and "\n".join(lines) not in seen:
            seen.append("\n".join(lines))
    return seen


def test_the_key_value_table_holds_the_key_facts(project):
    s, replies = begin(project)
    card = cards(play(s, replies[:5]).log)[0]
    card.kvps.pop(component.KEY)  # v1.x: the web UI's component draws the graph from it, and the run on it
    data = json.loads(card.kvps.pop(component.RUN_KEY))
    assert card.kvps == {"Plan": "Bug Fix Workflow", "Run": s.state["run_id"],
                         "Step": "step 3 of 5: Implement the fix", "Done": "3 of 5 steps", "Attempt": "1 of 3",
                         "PACE level": "primary", "Status": "active"}
    assert card.type == component.TYPE and data["step"] == "step 3 of 5" and data["current"] == "Implement the fix"
    s.run_pass(replies[5])
    assert cards(s.log)[0].kvps["Attempt"] == "2 of 3" and cards(s.log)[0].kvps["Step"] == "step 4 of 5: Test the fix"


# ── the picture of a run ────────────────────────────────────────────────────


def _finished_demo(project) -> Session:
    return play(*begin(project))


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_the_picture_is_written_beside_the_audit_log_and_named_by_the_card(project):
    s = _finished_demo(project)
    run = s.agent._htn_last_run["run_id"]
    folder = project / "a0" / "usr" / "graph_engine" / "runs" / s.agent.context.id
    picture = folder / f"{run}.svg"
    assert sorted(p.name for p in folder.iterdir()) == [f"{run}.jsonl", f"{run}.state.json", f"{run}.svg"]
    assert cards(s.log)[0].content.splitlines()[-1] == f"Picture of the run: {picture}"
    assert s.agent._htn_last_run["picture"] == str(picture)
    words = " ".join(t.text or "" for t in ET.parse(picture).iter("{http://www.w3.org/2000/svg}text"))
    assert "the run ended here" in words and "× 2" in words  # the fix and its test ran twice
    assert "still failing (on_retry) × 1" in words


def test_the_pass_that_ends_a_run_does_not_wait_for_its_picture(project, monkeypatch, no_graphviz):
    """The picture is drawn off the loop: the last pass returns while it is drawn; the card names it once
    it is written."""
    release, real = threading.Event(), card_module.run_picture

    def slow_drawing(plan, events):
        assert release.wait(30)
        return real(plan, events)

    monkeypatch.setattr(card_module, "run_picture", slow_drawing)
    s, replies = begin(project)
    s.wait_for_display = False
    play(s, replies)
    assert s.agent._htn_last_run["status"] == "completed" and "picture" not in s.agent._htn_last_run
    assert "Picture of the run" not in cards(s.log)[0].content
    assert not card_module.wait_for_display(timeout=0.01)  # still drawing
    release.set()
    assert card_module.wait_for_display()
    picture = Path(s.agent._htn_last_run["picture"])
    assert picture.read_text().startswith("flowchart TD")
    assert len(cards(s.log)) == 1 and cards(s.log)[0].content.endswith(f"Picture of the run: {picture}")


def test_a_card_update_sends_only_what_changed(project):
    """Agent-Zero's log masks every string it is given (an @extensible lookup each): a pass sends the card's
    changed texts and pairs only, and the card shows the same as a full update would."""
    s, replies = begin(project)
    play(s, replies[:2])
    item, sent = cards(s.log)[0], []
    real_update = item.update
    item.update = lambda **kwargs: (sent.append(kwargs), real_update(**kwargs))
    s.run_pass(replies[2])
    given = {k for k, v in sent[0].items() if v is not None and k != "type"}
    assert len(sent) == 1 and "kvps" not in given and {"Step", "Done"} <= given
    assert not given & {"Plan", "Run", "PACE level", "Status", component.KEY}  # unchanged: not sent again
    drawing = "".join(item.kvps[component.KEY])  # the plan's drawing, in chunks
    assert component.RUN_KEY in given and len(sent[0][component.RUN_KEY]) < len(drawing)  # the run: smaller
    plan = next(iter(adapter._runtimes.values())).lookup(s.state["plan_id"], s.state["plan_version"])
    heading, content, kvps = card.text(plan, s.state, "primary")
    kvps.update(component.view(plan, s.state, "primary"))
    assert (item.heading, item.content, item.kvps) == (heading, content, kvps)


def test_without_graphviz_the_picture_is_mermaid_text(project, no_graphviz):
    s = _finished_demo(project)
    run = s.agent._htn_last_run["run_id"]
    picture = project / "a0" / "usr" / "graph_engine" / "runs" / s.agent.context.id / f"{run}.mmd"
    text = picture.read_text()
    assert text.startswith("flowchart TD") and 'done(["Bug fix complete x1 (the run ended here)"])' in text
    assert 'test ==>|"on_success x1 / still failing (on_retry) x1"| fix' in text or "x1" in text
    assert "class done final" in text and cards(s.log)[0].content.endswith(f"Picture of the run: {picture}")


def test_a_linear_run_gets_its_picture_too(monkeypatch, tmp_path, no_graphviz):
    monkeypatch.setenv("GRAPH_ENGINE_LIBRARY", str(LEGACY))
    s = Session()
    s.user(GIT_MESSAGE)
    s.run_pass(IDLE)
    s.user("explain what a monad is")  # another domain: the run ends
    s.run_pass(Reply(final="A monad is ..."))
    end = s.agent._htn_last_run
    text = Path(end["picture"]).read_text()
    assert end["status"] == "ended" and text.startswith("flowchart TD")
    assert 'step_1["Check current branch status x1 (the run ended here)"]' in text
    assert cards(s.log)[0].heading == "Workflow: Git Feature Branch: ended"


def test_a_picture_that_cannot_be_written_is_said_once_and_the_run_goes_on(project, monkeypatch):
    monkeypatch.setattr(card_module, "run_picture", lambda plan, events: (".svg", "\ud800"))  # not encodable
    s = _finished_demo(project)
    assert s.agent._htn_last_run["status"] == "completed" and "picture" not in s.agent._htn_last_run
    warned = [t for t in s.log.texts("warning") if "Picture of the run not written" in t]
    assert len(warned) == 1 and "graph-engine render --trace" in warned[0]
    assert "Picture of the run" not in cards(s.log)[0].content


def test_pruned_runs_take_their_pictures_with_them(project, monkeypatch, no_graphviz):
    monkeypatch.setenv("GRAPH_ENGINE_RUNS_KEEP", "1")
    for _ in range(3):
        s = _finished_demo(project)
    folder = project / "a0" / "usr" / "graph_engine" / "runs" / s.agent.context.id
    run = s.agent._htn_last_run["run_id"]
    assert sorted(p.name for p in folder.iterdir()) == [f"{run}.jsonl", f"{run}.mmd", f"{run}.state.json"]


def test_a_picture_cut_short_by_a_full_disk_leaves_no_file(tmp_path, monkeypatch):
    import errno

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(audit.os, "write", full)
    target = tmp_path / "run.svg"
    with pytest.raises(OSError):
        audit.replace_file(str(target), b"<svg/>")
    assert list(tmp_path.iterdir()) == []


def test_pruning_removes_what_failed_writes_left_behind(project, monkeypatch, no_graphviz):
    monkeypatch.setenv("GRAPH_ENGINE_RUNS_KEEP", "1")
    s = _finished_demo(project)
    folder = project / "a0" / "usr" / "graph_engine" / "runs" / s.agent.context.id
    stray, fresh = folder / "r1.svg.tmp123.456", folder / "r2.svg.tmp123.457"
    stray.write_text("<sv")
    fresh.write_text("<sv")
    old = time.time() - 3600
    os.utime(stray, (old, old))
    for _ in range(2):
        s = _finished_demo(project)
    assert not stray.exists() and fresh.exists()  # a write still under way is left alone


# ── a log of another shape, a reset log, a restart ──────────────────────────


def test_a_log_without_update_turns_the_card_off_and_the_loop_goes_on(project):
    s = play(*begin(project, log=LineLog()))
    off = [t for t in s.log.texts("warning") if "Workflow card turned off" in t]
    assert off == ["[HTN] Workflow card turned off for this agent: Agent-Zero's log API is not the one expected "
                   "(TypeError: log() returned NoneType, which has no update method); the workflow goes on and "
                   "its log lines are still written"]
    assert len(cards(s.log)) == 1  # the one line the failed attempt wrote, never another
    assert s.agent._htn_last_run["status"] == "completed"
    assert not [t for t in s.log.texts("error")]


def test_an_update_that_raises_turns_the_card_off_once(project, monkeypatch):
    from graph_engine.tools import standin

    def broken(self, **kwargs):
        raise RuntimeError("socket closed")

    monkeypatch.setattr(standin.LogItem, "update", broken)
    s = _finished_demo(project)
    off = [t for t in s.log.texts("warning") if "Workflow card turned off" in t]
    assert len(off) == 1 and "RuntimeError: socket closed" in off[0]
    assert s.agent._htn_last_run["status"] == "completed"


def test_a_reset_log_gets_a_new_card(project):
    s, replies = begin(project)
    play(s, replies[:3]).log.reset()  # the user cleared the chat's log; the agent goes on
    play(s, replies[3:])
    assert len(cards(s.log)) == 1 and cards(s.log)[0].heading == "Workflow: Bug Fix Workflow: completed"


def test_after_a_restart_the_restored_card_is_updated_not_repeated(project):
    s, replies = begin(project)
    s = play(s, replies[:3] + [Reply(final="Pausing here.")]).restarted()
    assert len(cards(s.log)) == 1
    s.user("continue")
    play(s, replies[3:])
    assert len(cards(s.log)) == 1
    assert cards(s.log)[0].heading == "Workflow: Bug Fix Workflow: completed"


# ── the supervisor and SALUTE read the card's facts ─────────────────────────


def _org(tmp_path, s: Session) -> Path:
    org_dir = tmp_path / "a0" / "usr" / "organizations"
    org_dir.mkdir(parents=True, exist_ok=True)
    (org_dir / "active.json").write_text(json.dumps({"org_id": "software_dev"}))
    s.agent._org_active_role = json.loads((ROLES / "bugfix_specialist.json").read_text())
    s.agent._org_active = {"org_id": "software_dev"}
    return org_dir / "reports"


def _agrees(card, report: dict, state: dict) -> None:
    done, total = map(int, re.fullmatch(r"(\d+) of (\d+) steps?", card.kvps["Done"]).groups())
    assert card.kvps["Plan"] == report["activity"]["htn_plan"] == state["plan_name"]
    assert total == report["activity"]["htn_total_steps"] == state["total_steps"]
    assert round(done / total, 2) == report["status"]["progress"]
    assert done == report["activity"]["htn_step"] == state["current_step"] == len(state["steps_completed"])
    assert card.kvps["PACE level"] == report["status"]["pace_level"]
    assert card.kvps["Run"] == state["run_id"]


def test_salute_and_the_supervisor_read_the_facts_the_card_shows(tmp_path):
    s = Session()
    reports = _org(tmp_path, s)
    s.user(message_for("bugfix_workflow"))
    model = FixtureModel("bugfix_workflow", {"test": 1, "fix": 3})
    for reply in [IDLE] + [model] * 12:
        s.run_pass(reply)
        state = s.state if s.state is not None else s.agent._htn_last_run
        pace = getattr(s.agent, "_org_pace_level", "") or "primary"
        report = salute.build_report(state=state, pace_level=pace, role={}, org={}, agent_number=0, bst_domain="",
                                     now=datetime.now(timezone.utc))
        _agrees(cards(s.log)[-1], report, state)  # every pass: what the person reads, the supervisor reads
        if state["status"] != "active":
            break
    latest = json.loads((reports / "bugfix_specialist_latest.json").read_text())  # the report the run wrote
    _agrees(cards(s.log)[-1], latest, s.agent._htn_last_run)
    assert latest["status"]["pace_level"] == "contingent" == cards(s.log)[-1].kvps["PACE level"]


def test_a_rejected_state_ends_its_restored_card(project):
    s, replies = begin(project)
    play(s, replies[:3] + [Reply(final="Pausing here.")])
    saved = s.agent.get_data("graph_engine_state")
    saved["turn"] = -5  # chat.json edited by hand
    s = s.restarted()
    s.user("continue")
    s.run_pass(IDLE)
    assert s.state is None and len(cards(s.log)) == 1
    card = cards(s.log)[0]
    assert card.heading == "Workflow: Bug Fix Workflow: rejected" and card.kvps["Status"] == "rejected"
    assert card.content.startswith("Outcome: rejected: field 'turn' is -5, below zero (in the chat's saved ")


def test_pictures_can_be_turned_off(project, monkeypatch):
    monkeypatch.setenv("GRAPH_ENGINE_PICTURE", "off")
    s = _finished_demo(project)
    folder = project / "a0" / "usr" / "graph_engine" / "runs" / s.agent.context.id
    assert sorted("".join(p.suffixes) for p in folder.iterdir()) == [".jsonl", ".state.json"]
    assert "picture" not in s.agent._htn_last_run
    assert "Picture of the run" not in cards(s.log)[0].content


@pytest.mark.parametrize("page, count", [("README.md", 1), ("docs/how-it-works.md", 2)])
def test_the_readme_shows_the_card_as_the_golden_file_pins_it(page, count):
    readme = (Path(__file__).resolve().parents[2] / page).read_text()
    block = readme[readme.index("<!-- card:begin -->"):readme.index("<!-- card:end -->")]
    shown = re.findall(r"```\n(.*?)```", block, re.S)
    pinned = (FIXTURES / "cards" / "bugfix_demo.txt").read_text()
    assert len(shown) == count and all(card in pinned for card in shown)


def test_a_chat_without_a_log_runs_the_workflow_without_a_card(project):
    s = play(*begin(project, log=False))  # no log API at all
    assert s.agent._htn_last_run["status"] == "completed" and s.agent._graph_engine_card is False


def chain(n: int) -> dict:
    nodes = {"start": {"type": "start"}, "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "stuck"}}
    edges = [{"from": "start", "to": "t1"}]
    for i in range(1, n + 1):
        nodes[f"t{i}"] = {"type": "task", "name": f"Step {i}", "verify": {"type": "any_output"}}
        edges += [{"from": f"t{i}", "to": f"t{i + 1}" if i < n else "done", "condition": "on_success"},
                  {"from": f"t{i}", "to": "stuck", "condition": "on_exhaust"}]
    return {"name": "Chain", "domains": ["bugfix"], "triggers": ["run the chain"], "trigger_threshold": 1,
            "graph": {"start": "start", "nodes": nodes, "edges": edges}}


def test_a_long_plan_lists_the_steps_around_the_current_one(monkeypatch, tmp_path):
    from scenario import use_library
    use_library(monkeypatch, tmp_path, {"chain": chain(60)})
    s = Session()
    s.user("run the chain")
    play(s, [cmd("ls", "out")] * 16)
    lines = cards(s.log)[0].content.splitlines()
    assert lines[:9] == ["[...] steps 1 to 12 not listed", "[done] 13. Step 13", "[done] 14. Step 14",
                         "[done] 15. Step 15", "[current] 16. Step 16", "[pending] 17. Step 17",
                         "[pending] 18. Step 18", "[pending] 19. Step 19", "[...] steps 20 to 60 not listed"]
    assert cards(s.log)[0].kvps["Done"] == "15 of 60 steps"


def test_a_large_plan_is_drawn_as_mermaid_without_waiting_for_graphviz(monkeypatch, tmp_path):
    from scenario import use_library
    use_library(monkeypatch, tmp_path, {"chain": chain(render_graph.DOT_MAX_NODES)})

    def no_graphviz(*args, **kwargs):
        raise AssertionError("Graphviz was called for a plan over DOT_MAX_NODES nodes")

    monkeypatch.setattr(render_graph.subprocess, "run", no_graphviz)
    s = Session()
    s.user("run the chain")
    play(s, [cmd("ls", "out")] * (render_graph.DOT_MAX_NODES + 1))
    picture = Path(s.agent._htn_last_run["picture"])
    assert s.agent._htn_last_run["status"] == "completed" and picture.suffix == ".mmd"
    assert f't{render_graph.DOT_MAX_NODES}["Step {render_graph.DOT_MAX_NODES} x1"]' in picture.read_text()


def test_the_picture_thread_draws_with_the_picture_setting_of_the_hook_call_that_ended_the_run(monkeypatch):
    """The setting is read inside the drawing thread: it must be the hook call's (e.g. the plugin's
    settings page), not the process's default."""
    from graph_engine.hosts.agent_zero import adapter, cards
    from graph_engine.authoring import render_graph
    from graph_engine.boundary import settings

    seen = []
    real = render_graph.run_picture

    def spy(plan, events):
        seen.append(render_graph.picture_setting())
        return real(plan, events)

    monkeypatch.setattr(card_module, "run_picture", spy)
    monkeypatch.setattr(settings, "current",
                        lambda agent, later=None: dataclasses.replace(settings.DEFAULTS, picture="mermaid"))
    s, model = started(), FixtureModel("bugfix_workflow", {})
    while s.state is not None and s.state.get("status") == "active":
        s.run_pass(model)
    card_module.wait_for_display()
    assert seen == ["mermaid"]
    assert str(getattr(s.agent, "_htn_last_run", {}).get("picture", "")).endswith(".mmd")
