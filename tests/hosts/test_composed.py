"""Workflows the agent writes in the chat (the ``graph_workflow`` tool) and the person approves, rejects, pastes or
saves, in the stand-in's Agent-Zero loop: a plan with a mistake comes back as the lint's lines, the corrected plan
waits for the person, runs on approval like any plan (checks, retries, audit log, a restart with no library entry),
can be amended mid-run keeping its steps done, and is saved beside the library to start by its own text.  The
same in Agent-Zero's real loop: tests/test_real_loop_composed.py."""

import asyncio
import json
import sys
import types

import pytest
from scenario import events, library_edited, told, use_library, verdicts

from graph_engine.authoring import compose
from graph_engine.hosts.agent_zero import adapter, composed
from graph_engine.tools.standin import ROOT as SRC, SELECTOR, Reply, Session, cmd

REQUEST = "set up a backup of the photos folder and prove a restore works"
GOOD = """digraph photo_backup {
  graph [label="Photo backup", goal="back up the photos folder and prove a restore works"]
  start [shape=Mdiamond]
  copy [label="Copy the photos", prompt="Copy the photos folder to the backup folder", tool_hint="cp -a photos backup; echo \\"[exit:$?]\\"", verify="exit_code_zero", max_retries=1]
  restore [label="Restore and compare", prompt="Restore into a scratch folder and compare", tool_hint="diff -rq photos backup && echo SAME", verify="output_contains", "verify.value"="SAME", max_retries=1]
  stuck [type="escalate", reason="the backup cannot be made or restored", pace_level="alternate"]
  exit [shape=Msquare]
  start -> copy
  copy -> restore [condition="outcome=success"]
  copy -> stuck [condition="outcome=fail"]
  restore -> exit [condition="outcome=success"]
  restore -> stuck [condition="outcome=fail"]
}"""
MISTAKE = GOOD.replace(', verify="output_contains", "verify.value"="SAME"', "")  # a step with no check
AMENDED = GOOD.replace("""  exit [shape=Msquare]""", """  clean [label="Remove the scratch folder", prompt="Remove it", tool_hint="rm -rf scratch; echo \\"[exit:$?]\\"", verify="exit_code_zero"]
  exit [shape=Msquare]""").replace("""  restore -> exit [condition="outcome=success"]""", """  restore -> clean [condition="outcome=success"]
  clean -> exit [condition="outcome=success"]
  clean -> stuck [condition="outcome=fail"]""")


@pytest.fixture(autouse=True)
def library(monkeypatch, tmp_path):
    """A library of one unrelated plan, in a folder of the test's own (a saved workflow is written beside it)."""
    plan = json.loads((SRC / "plan_library" / "htn_plan_library.json").read_text())["plans"]["git_feature_branch"]
    monkeypatch.delenv("GRAPH_ENGINE_RUN_PROPOSED", raising=False)
    monkeypatch.setenv("A0_ROOT", str(tmp_path / "a0"))
    return use_library(monkeypatch, tmp_path, {"git_feature_branch": plan})


def tool(s: Session, method: str, **args) -> Reply:
    """The agent calls the workflow tool: the reply, and its result as the tool returns it."""
    text = asyncio.run(adapter.tool_call(s.agent, method, args, str(SELECTOR)))
    return Reply(tool=f"graph_workflow:{method}", output=text)


def calls(s: Session, method: str, **args):
    """A model that calls the workflow tool in this pass: the tool runs after the pass's hooks, as in Agent-Zero."""
    return lambda text, state: tool(s, method, **args)


def proposed(plan: str = GOOD) -> Session:
    """A chat where the person asked for the job and the agent proposed ``plan``; the monologue ended."""
    s = Session()
    s.user(REQUEST)
    s.run_pass(calls(s, "propose", plan=plan, request=REQUEST))
    s.run_pass(Reply(final="I wrote a workflow for this; approve it to start."))
    return s


def approved(plan: str = GOOD) -> Session:
    s = proposed(plan)
    s.user("go ahead")
    return s


def passed(text: str) -> Reply:
    return cmd('run; echo "[exit:$?]"', text + "\n[exit:0]")


def test_a_plan_with_a_mistake_comes_back_as_the_lints_lines_and_the_fixed_plan_waits_for_the_person():
    s = Session()
    s.user(REQUEST)
    first = tool(s, "propose", plan=MISTAKE, request=REQUEST)
    assert first.output.startswith("The workflow was not accepted: 1 problem.")
    assert "1. node 'restore': the step has no check" in first.output and "Fix: add \"verify\"" in first.output
    assert composed.pending(s.agent) is None
    s.run_pass(first)
    second = tool(s, "propose", plan=GOOD, request=REQUEST)
    assert "passed its checks (2 steps) and waits for the person's approval" in second.output
    waiting = composed.pending(s.agent)
    assert waiting["name"] == "Photo backup" and waiting["request"] == REQUEST and waiting["by"] == "agent"
    s.run_pass(second)
    assert s.state is None  # nothing runs before the person approves
    assert any("proposed by the agent (2 steps): it waits for the person's approval" in t for t in s.log.texts())


def test_approved_it_runs_like_any_plan_and_completes_on_its_checks():
    s = approved()
    first = s.run_pass(passed("copied"))  # the call of the pass that read "go ahead" is shown the first step
    assert s.state["plan_id"] == "photo_backup" and s.state["source"]["text"] == GOOD
    assert s.state["source"]["request"] == REQUEST
    assert "Started the proposed workflow 'Photo backup' (approved by the person)" in told(first)
    assert "Copy the photos" in told(first)
    assert events(s, "plan_activated")[0]["by"] == "composed"
    s.run_pass(cmd("diff -rq photos backup && echo SAME", "nope"))  # fails: one retry left
    s.run_pass(cmd("diff -rq photos backup && echo SAME", "SAME"))
    s.run_pass(Reply(final="Backed up and restored."))
    assert verdicts(s) == [("copy", "success"), ("restore", "fail"), ("restore", "success")]
    assert s.agent._htn_last_run["status"] == "completed"
    assert composed.pending(s.agent) is None


def test_the_persons_no_rejects_it_and_other_words_leave_it_waiting():
    s = proposed()
    s.user("what time zone is the server in?")
    record = s.run_pass(Reply(final="UTC."))
    assert composed.pending(s.agent) is not None and s.state is None and told(record) == ""
    s.user("no")
    record = s.run_pass(Reply(final="OK, I will not run it."))
    assert composed.pending(s.agent) is None and s.state is None
    assert "The person rejected the proposed workflow 'Photo backup'; it does not run" in told(record)


def test_the_tools_own_results_are_never_a_steps_evidence():
    s = approved()
    record = s.run_pass(calls(s, "status"))
    assert "Copy the photos" in record.reply.output
    s.run_pass(calls(s, "status"))
    s.run_pass(calls(s, "status"))
    assert verdicts(s) == [] and s.state["current_node"] == "copy"  # a check that reads any output: not judged


def test_a_restart_resumes_the_composed_run_from_its_stored_text_with_no_library_entry():
    s = approved()
    s.run_pass(passed("copied"))
    s = s.restarted()  # a new process: no runtime remembers the plan; the chat's data has its text
    s.user("continue")
    record = s.run_pass(cmd("diff -rq photos backup && echo SAME", "SAME"))
    assert "'Photo backup' resumed at 'Copy the photos'" in " ".join(s.log.texts())
    assert "Current step: Restore and compare" in told(record)  # the copy judged on the output before the restart
    s.run_pass(Reply(final="Restored."))
    assert s.agent._htn_last_run["status"] == "completed"
    assert verdicts(s) == [("copy", "success"), ("restore", "success")]


def test_an_amendment_moves_the_run_to_the_new_version_keeping_the_steps_done():
    s = approved()
    s.run_pass(passed("copied"))
    version = s.state["plan_version"]
    s.run_pass(calls(s, "amend", plan=AMENDED, request=REQUEST))
    assert composed.pending(s.agent)["amend"] == s.state["run_id"]
    s.run_pass(Reply(final="I want to add a clean-up step; approve?"))
    s.user("yes")
    record = s.run_pass(cmd("diff -rq photos backup && echo SAME", "SAME"))
    assert s.state["plan_version"] != version and s.state["source"]["text"] == AMENDED
    assert "it goes on at 'Restore and compare' with the steps done so far kept" in told(record)
    assert events(s, "plan_amended")[0]["reason"].startswith(f"from version {version}")
    s.run_pass(passed("removed"))
    s.run_pass(Reply(final="All done."))
    assert verdicts(s) == [("copy", "success"), ("restore", "success"), ("clean", "success")]
    assert s.agent._htn_last_run["status"] == "completed"


def test_an_amendment_that_drops_the_current_step_is_refused_with_the_reason():
    s = approved()
    s.run_pass(passed("copied"))
    dropped = GOOD.replace('copy -> restore [condition="outcome=success"]', 'copy -> exit [condition="outcome=success"]'
                           ).replace("  restore [", "  // restore [").replace("  restore -> exit", "  // ").replace(
        "  restore -> stuck", "  // ")
    answer = tool(s, "amend", plan=dropped.replace("  copy [", "  kopie ["), request=REQUEST)
    assert answer.output.startswith("Not accepted:") or answer.output.startswith("The workflow was not accepted")
    gone = tool(s, "amend", plan=GOOD.replace("copy", "duplicate"), request=REQUEST)
    assert gone.output.startswith("Not accepted: it drops the current step 'Copy the photos'")
    assert composed.pending(s.agent) is None and s.state["current_node"] == "copy"


def test_saved_after_it_completed_it_is_a_plan_of_the_library_with_the_request_as_its_example(library):
    s = approved()
    for reply in (passed("copied"), cmd("x", "SAME"), Reply(final="done")):
        s.run_pass(reply)
    assert s.agent._htn_last_run["status"] == "completed"
    s.user("save this workflow")
    record = s.run_pass(Reply(final="Saved."))
    path = library.parent / "photo_backup.dot"
    assert path.is_file() and "The workflow 'Photo backup' was saved" in told(record)
    from graph_engine.authoring.dot_plan import load_dot_plan
    pid, raw, found = load_dot_plan(path.read_text())
    assert pid == "photo_backup" and raw["examples"] == [REQUEST] and not [d for d in found if d.severity == "error"]
    library_edited()
    rt = next(iter(adapter._runtimes.values()))
    rt.library.refresh()
    assert rt.library.current.get("photo_backup") is not None  # loaded with the library, as any DOT plan
    assert not [line for line in rt.standing if "photo_backup" in line]  # and nothing to say about it
    s.user("save this workflow")
    again = s.run_pass(Reply(final="Not saved."))
    assert "exists already" in told(again) and "nothing was overwritten" in told(again)
    assert path.read_text().count("digraph") == 1


def test_saving_a_run_that_did_not_complete_says_so_and_writes_nothing(library):
    s = approved()
    s.run_pass(passed("copied"))
    s.user("save this workflow")
    record = s.run_pass(Reply(final="later"))
    assert "is active; it is saved once a run of it has completed" in told(record)
    assert not list(library.parent.glob("*.dot"))


def test_with_the_setting_on_it_runs_without_asking(monkeypatch):
    monkeypatch.setenv("GRAPH_ENGINE_RUN_PROPOSED", "on")
    s = Session()
    s.user(REQUEST)
    record = s.run_pass(calls(s, "propose", plan=GOOD, request=REQUEST))
    assert "takes effect now" in record.reply.output and composed.pending(s.agent) is None
    record = s.run_pass(passed("copied"))  # the next pass takes it: its call is shown the first step
    assert s.state["plan_id"] == "photo_backup" and verdicts(s) == []
    assert "Started the proposed workflow 'Photo backup' (run without asking" in told(record)
    assert "Copy the photos" in told(record)


def test_a_plan_the_person_pastes_is_checked_and_waits_for_their_go_ahead():
    s = Session()
    s.user(MISTAKE)
    record = s.run_pass(Reply(final="It needs a check."))
    assert "does not pass its checks" in told(record) and "node 'restore'" in told(record)
    assert composed.pending(s.agent) is None and s.state is None
    s.user(GOOD)
    record = s.run_pass(Reply(final="Shall I run it?"))
    assert composed.pending(s.agent)["by"] == "person" and "Ask them to approve it" in told(record)
    s.user("ok go ahead")
    record = s.run_pass(passed("copied"))
    assert s.state["plan_id"] == "photo_backup" and "Copy the photos" in told(record)


def test_the_agent_starts_a_library_plan_by_name():
    s = Session()
    s.user("hello, I have some work for you today")
    record = s.run_pass(calls(s, "start", name="Git Feature Branch"))
    assert "starts now" in record.reply.output
    record = s.run_pass(passed("On branch main"))
    assert s.state["plan_id"] == "git_feature_branch" and "source" not in s.state
    assert "Started the plan 'Git Feature Branch' (started by the agent)" in told(record)
    wrong = tool(s, "start", name="teleport")
    assert wrong.output.startswith("No single plan is named 'teleport'") and "git_feature_branch" in wrong.output


@pytest.mark.parametrize("layout", ["new", "old"])
def test_the_tool_file_runs_as_agent_zero_loads_it(monkeypatch, layout):
    """tools/graph_workflow.py with a Tool base class as Agent-Zero's (``helpers.tool`` on v1.x,
    ``python.helpers.tool`` on v0.9.x)."""
    Session(layout=layout)  # the framework's modules
    name = "helpers.tool" if layout == "new" else "python.helpers.tool"
    module = types.ModuleType(name)

    class Tool:
        def __init__(self, agent, name, method, args, message, loop_data, **kwargs):
            self.agent, self.name, self.method, self.args = agent, name, method, args

    class Response:
        def __init__(self, message, break_loop, **kwargs):
            self.message, self.break_loop = message, break_loop

    module.Tool, module.Response = Tool, Response
    monkeypatch.setitem(sys.modules, name, module)
    import importlib.util
    spec = importlib.util.spec_from_file_location("graph_workflow", str(SRC / "tools" / "graph_workflow.py"))
    tool_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool_module)
    s = Session(layout=layout)
    s.user(REQUEST)
    t = tool_module.GraphWorkflow(s.agent, "graph_workflow", "propose", {}, "", None)
    response = asyncio.run(t.execute(plan=MISTAKE, request=REQUEST))
    assert response.break_loop is False and response.message.startswith("The workflow was not accepted")
    response = asyncio.run(t.execute(plan=GOOD, request=REQUEST))
    assert "waits for the person's approval" in response.message


@pytest.mark.parametrize("plan", [None, 42, "", "digraph {", "{\"name\": 1}", "x" * 70_000, {"plans": {}},
                                  {"name": "n", "steps": [{"name": "a"}]}, "[1, 2]", "digraph g { a -> a }"])
def test_hostile_proposals_are_refused_with_one_numbered_reason_and_nothing_waits(plan):
    s = Session()
    s.user(REQUEST)
    answer = tool(s, "propose", plan=plan)
    assert answer.output.startswith("The workflow was not accepted:") and "\n1. " in answer.output
    assert composed.pending(s.agent) is None
    s.run_pass(answer)
    assert s.state is None and not s.log.texts("error")


def test_a_hundred_thousand_nodes_or_a_loop_without_exit_are_refused_before_anything_runs():
    huge = "digraph big {\n" + "\n".join(f"  n{i} -> n{i + 1}" for i in range(100_000)) + "\n}"
    p = compose.check(huge)
    assert not p.ok and "over the limit" in p.problems[0]
    nodes = {f"n{i}": {"type": "task", "verify": {"type": "any_output"}} for i in range(100_000)}
    p = compose.check({"name": "big", "graph": {"start": "n0", "nodes": nodes, "edges": []}})
    assert not p.ok and "the plan holds more than 5,000 values" in p.problems[0]  # counted until the bound, no more
    loop = GOOD.replace('restore -> exit [condition="outcome=success"]', 'restore -> copy [condition="outcome=success"]')
    p = compose.check(loop)
    assert not p.ok and any("can repeat without spending a retry budget" in line for line in p.problems)


# ── the proposal's card and its buttons (the web UI's component; the browser: tests/test_real_ui_composed.py) ──


def press(s: Session, kind: str, run: str | None = None, **extra) -> dict:
    """What the API handler does when a button of the proposal's card is pressed."""
    body = {"context": s.agent.context.id, "run": run or composed.pending(s.agent)["id"], "control": kind,
            "id": "r1", **extra}
    return asyncio.run(adapter.control_api(body, lambda cid: s.agent.context, str(SELECTOR)))


def proposal_card(s: Session) -> dict:
    item = next(i for i in reversed(s.log.logs) if i.kvps and i.kvps.get("Status") in ("proposed", "approved",
                                                                                         "rejected"))
    return {"heading": item.heading, "status": item.kvps["Status"], "run": json.loads(item.kvps["graph_run"]),
            "source": "".join(item.kvps["graph_source"]), "graph": json.loads("".join(item.kvps["graph"]))}


def test_the_proposal_is_a_card_with_its_graph_its_text_and_approve_edit_reject():
    s = proposed()
    card = proposal_card(s)
    assert card["heading"] == "Workflow: Photo backup: proposed, waiting for approval"
    assert card["source"] == GOOD and card["run"]["status"] == "proposed"
    assert [c[1] for c in card["run"]["controls"]] == ["approve", "edit", "reject"]
    assert {n[0] for n in card["graph"]["nodes"]} == {"start", "copy", "restore", "stuck", "exit"}
    assert set(card["run"]["marks"]) == {"p"}


def test_approve_pressed_starts_it_at_the_agents_next_pass():
    s = proposed()
    answer = press(s, "approve")
    assert answer["status"] == "applied" and answer["text"] == "Approved: it starts at the agent's next step."
    assert composed.pending(s.agent) is None and proposal_card(s)["status"] == "approved"
    assert proposal_card(s)["run"]["controls"] == []
    s.nudge()  # what the woken agent's pass reads: a system message, no words of the person's
    record = s.run_pass(passed("copied"))
    assert s.state["plan_id"] == "photo_backup" and "approved by the person in the web UI" in told(record)
    assert "Current step: Copy the photos" in told(record)
    assert press(s, "approve", run="feedbeef")["status"] == "refused"  # nothing waits any more


def test_edit_pressed_checks_the_new_text_and_keeps_waiting():
    s = proposed()
    refused = press(s, "edit", text=MISTAKE)
    assert refused["status"] == "refused" and refused["text"].startswith("the edited text does not pass its checks:\n"
                                                                         "1. node 'restore': the step has no check")
    assert composed.pending(s.agent)["source"]["text"] == GOOD
    changed = press(s, "edit", text=AMENDED)
    assert changed["status"] == "applied" and changed["text"].startswith("Changed (3 steps)")
    assert composed.pending(s.agent)["source"]["text"] == AMENDED and proposal_card(s)["source"] == AMENDED
    assert "clean" in {n[0] for n in proposal_card(s)["graph"]["nodes"]}
    s.user("go ahead")
    s.run_pass(passed("copied"))
    assert s.state["source"]["text"] == AMENDED
    assert press(s, "edit", run="x" * 12, text="")["status"] == "refused"  # an edit needs the text


def test_reject_pressed_ends_it_and_the_next_call_is_told():
    s = proposed()
    answer = press(s, "reject")
    assert answer["status"] == "applied" and composed.pending(s.agent) is None
    assert proposal_card(s)["status"] == "rejected"
    s.user("ok then, just tell me what is in the folder")
    record = s.run_pass(Reply(final="photos/"))
    assert "rejected the proposed workflow 'Photo backup' in the web UI" in told(record) and s.state is None


@pytest.mark.parametrize("said", ["/workflow Git Feature Branch", "/workflow git_feature_branch"])
def test_the_persons_slash_workflow_starts_a_library_plan_by_name_or_id(said):
    s = Session()
    s.user(said)
    record = s.run_pass(passed("On branch main"))
    assert s.state["plan_id"] == "git_feature_branch"
    assert "Started by the user: 'Git Feature Branch'" in told(record)


def test_slash_workflow_alone_lists_the_plans_and_an_unknown_name_is_answered():
    s = Session()
    s.user("/workflow")
    record = s.run_pass(Reply(final="Here they are."))
    assert "Git Feature Branch" in told(record) and s.state is None
    s.user("/workflow teleport")
    record = s.run_pass(Reply(final="No such plan."))
    assert "teleport" in told(record) and s.state is None


# ── what the agent and the model read, in a golden file a reviewer reads in the diff (`make prompts`) ──

from golden import text_files  # noqa: E402
from graph_engine.tools.standin import FIXTURES  # noqa: E402

ComposedFile = text_files(FIXTURES / "composed", lambda name: "texts")  # fixtures/composed/texts.txt


def composed_texts() -> str:
    """Every text of a composed workflow's life, as the agent reads it (tool results) or its call is shown."""
    sections: list[tuple[str, str]] = []
    s = Session()
    s.user(REQUEST)
    for title, plan in (("refused: a step without a check", MISTAKE),
                        ("refused: a loop without exit", GOOD.replace('restore -> exit [condition="outcome=success"]',
                                                                       'restore -> copy [condition="outcome=success"]')),
                        ("refused: too many nodes", "digraph big {\n" + "\n".join(f"n{i} -> n{i + 1}"
                                                                                  for i in range(60)) + "\n}"),
                        ("refused: not JSON", '{"name": "x", "graph": '),
                        ("refused: a linear plan", {"name": "Steps", "steps": [{"name": "a"}]})):
        sections.append((f"tool propose, {title}", tool(s, "propose", plan=plan).output))
    sections.append(("tool propose, accepted", tool(s, "propose", plan=GOOD, request=REQUEST).output))
    sections.append(("tool status, waiting", tool(s, "status").output))
    s.run_pass(Reply(final="Approve?"))
    s.user("go ahead")
    sections.append(("approved: the first call", told(s.run_pass(passed("copied")))))
    sections.append(("tool amend, refused", tool(s, "amend", plan=GOOD.replace("copy", "duplicate")).output))
    sections.append(("tool amend, accepted", tool(s, "amend", plan=AMENDED).output))
    s.run_pass(Reply(final="Add a clean-up step?"))
    s.user("yes")
    sections.append(("amended: the next call", told(s.run_pass(cmd("x", "SAME")))))
    s.run_pass(passed("removed"))
    sections.append(("completed", told(s.run_pass(Reply(final="Backed up, restored and cleaned up.")))))
    s.user("save this workflow as Photo backup with clean-up")
    sections.append(("saved", told(s.run_pass(Reply(final="Saved.")))))
    s.user("save this workflow as Photo backup with clean-up")
    sections.append(("not saved: the name is taken", told(s.run_pass(Reply(final="Not saved.")))))
    other = proposed()
    other.user("no")
    sections.append(("rejected in words", told(other.run_pass(Reply(final="OK.")))))
    pasted = Session()
    pasted.user(MISTAKE)
    sections.append(("pasted, refused", told(pasted.run_pass(Reply(final="It needs a check.")))))
    pasted.user(GOOD)
    sections.append(("pasted, accepted", told(pasted.run_pass(Reply(final="Approve?")))))
    sections.append(("tool start, unknown", tool(pasted, "start", name="teleport").output))
    return "\n\n".join(f"== {title} ==\n{text}" for title, text in sections) + "\n"


def test_the_texts_of_a_composed_workflow_match_the_golden_file(snapshot, library):
    assert composed_texts().replace(str(library.parent), "<the library's folder>") == \
        snapshot.use_extension(ComposedFile)


def run_card(s: Session) -> dict:
    item = next(i for i in reversed(s.log.logs) if i.kvps and i.kvps.get("Run") == s.agent._htn_last_run["run_id"])
    return json.loads(item.kvps["graph_run"])


def test_save_pressed_on_the_completed_runs_card_writes_it_once(library):
    s = approved()
    for reply in (passed("copied"), cmd("x", "SAME"), Reply(final="done")):
        s.run_pass(reply)
    assert run_card(s)["controls"] == [["Save as a plan", "save", "", "save this workflow"]]
    answer = press(s, "save", run=s.agent._htn_last_run["run_id"])
    assert answer["status"] == "applied" and answer["text"].startswith("The workflow 'Photo backup' was saved as ")
    assert (library.parent / "photo_backup.dot").is_file()
    card = run_card(s)
    assert card["controls"] == [] and card["answer"]["control"] == "save"
    again = press(s, "save", run=s.agent._htn_last_run["run_id"])
    assert again["status"] == "refused" and "exists already" in again["text"]
    assert run_card(s)["controls"] == [] and run_card(s)["answer"]["status"] == "applied"
    assert press(s, "save", run="nosuchrun")["status"] == "refused"


def test_a_proposal_while_a_run_goes_on_says_it_replaces_it_and_does_on_approval():
    s = Session()
    s.user("hello, I have some work for you today")
    s.run_pass(calls(s, "start", name="Git Feature Branch"))
    s.run_pass(passed("On branch main"))
    answer = tool(s, "propose", plan=GOOD, request=REQUEST)
    assert "Worth knowing: Approved, it replaces the running workflow 'Git Feature Branch', which ends." in \
        answer.output
    s.run_pass(answer)
    s.run_pass(Reply(final="Approve?"))
    s.user("go ahead")
    record = s.run_pass(passed("copied"))
    assert s.state["plan_id"] == "photo_backup" and "It replaces 'Git Feature Branch', which ended." in told(record)


def test_a_branch_agent_proposes_nothing(monkeypatch):
    from graph_engine.hosts.agent_zero import branches
    s = Session()
    monkeypatch.setattr(branches, "branch_of", lambda agent: (object(), "lint"))
    answer = tool(s, "propose", plan=GOOD, request=REQUEST)
    assert answer.output.startswith("You run one branch of a workflow") and composed.pending(s.agent) is None


def test_the_tools_prompt_example_is_a_plan_the_check_accepts_without_a_note():
    """The example the model copies (prompts/agent.system.tool.graph_workflow.md) passes the check cleanly."""
    import re
    text = (SRC / "prompts" / "agent.system.tool.graph_workflow.md").read_text()
    call = json.loads(re.search(r"~~~json\n(.*?)~~~", text, re.S).group(1))
    assert call["tool_name"] == "graph_workflow:propose"
    p = compose.check(call["tool_args"]["plan"])
    assert p.ok and p.notes == (), p.answer() or p.notes
    assert len(text) < 2_600  # every chat call carries it: about 650 tokens at most


def test_the_agent_starts_only_a_plan_the_org_role_allows():
    s = Session(allowed_plans=["bugfix_workflow"])
    s.user("hello, I have some work for you today")
    s.run_pass(Reply(final="Hi."))  # the org kernel's filter is in the agent's data from here
    answer = tool(s, "start", name="Git Feature Branch")
    assert answer.output.startswith("Not started: the active org role does not allow 'Git Feature Branch'")
    assert composed.OFFER_ATTR not in s.agent.__dict__
