"""Workflows the agent writes, in Agent-Zero's real message loop (`make real-loop`, both layouts): the pack installed
by its own installer (the `graph_workflow` tool in usr/tools/, its prompt in usr/prompts/), Agent-Zero's own tool
lookup, prompt building, terminal and persistence; only the model's replies are scripted.  The agent proposes a
plan with a mistake and gets the lint's lines back, proposes the fixed plan, the person says "go ahead", the steps
run as real commands and pass their checks; saved, the next request in other words starts it by its text.  A run
amended mid-way keeps its done steps; a run killed mid-call resumes from the text stored with it."""

import json
from pathlib import Path

from a0real import A0Copy, reply, respond, terminal
from test_real_loop import WARM_UP, types, verdicts

REQUEST = "turn the settings.ini of my app into settings.toml while keeping the INI loader working"
AGAIN = "switch my app from ini settings to toml settings, the old ini loader must still work"
# (no path in the requests: the words of a test's temporary path, "test_killed_...", can start a shipped plan)
INI = "[server]\nport = 8080\nhost = example.org\n"
CONVERT = ("import configparser\nc = configparser.ConfigParser()\nc.read('settings.ini')\n"
           "with open('settings.toml', 'w') as f:\n"
           "    for s in c.sections():\n"
           "        f.write(f'[{s}]\\n')\n"
           "        for k, v in c[s].items():\n"
           "            f.write(f'{k} = {v}\\n' if v.isdigit() else f'{k} = \"{v}\"\\n')\n")
CHECK = ("import configparser, tomllib\nc = configparser.ConfigParser()\nc.read('settings.ini')\n"
         "t = tomllib.load(open('settings.toml', 'rb'))\n"
         "print('BOTH OK' if str(t['server']['port']) == c['server']['port'] else 'DIFFERENT')\n")
PLAN = """digraph ini_to_toml {
  graph [label="INI to TOML migration", goal="move the settings from INI to TOML and keep the old INI loader working"]
  start [shape=Mdiamond]
  convert [label="Write the TOML settings", prompt="Convert settings.ini to settings.toml", tool_hint="python3 convert.py; echo \\"[exit:$?]\\"", verify="exit_code_zero", max_retries=1]
  loaders [label="Check both loaders", prompt="Load the settings with the old and the new loader", tool_hint="python3 check.py", verify="output_contains", "verify.value"="BOTH OK", max_retries=1]
  stuck [type="escalate", reason="the settings cannot be moved to TOML with both loaders working", pace_level="alternate"]
  exit [shape=Msquare]
  start -> convert
  convert -> loaders [condition="outcome=success"]
  convert -> stuck [condition="outcome=fail"]
  loaders -> exit [condition="outcome=success"]
  loaders -> stuck [condition="outcome=fail"]
}"""
MISTAKE = PLAN.replace(', verify="output_contains", "verify.value"="BOTH OK"', "")
AMENDED = PLAN.replace("  exit [shape=Msquare]", """  keep [label="Keep the INI file", prompt="Make sure settings.ini is still there", tool_hint="test -f settings.ini; echo \\"[exit:$?]\\"", verify="exit_code_zero"]
  exit [shape=Msquare]""").replace('  loaders -> exit [condition="outcome=success"]', """  loaders -> keep [condition="outcome=success"]
  keep -> exit [condition="outcome=success"]
  keep -> stuck [condition="outcome=fail"]""")


def project(tree: A0Copy) -> Path:
    folder = tree.root / "usr" / "workdir" / "app"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.ini").write_text(INI)
    (folder / "convert.py").write_text(CONVERT)
    (folder / "check.py").write_text(CHECK)
    return folder


def propose(plan: str, p: Path, method: str = "propose") -> str:
    return reply(f"graph_workflow:{method}", "Proposing a workflow", plan=plan, request=REQUEST.format(p=p))


def convert(p: Path) -> str:
    return terminal(f'cd {p} && python3 convert.py; echo "[exit:$?]"', "Write the TOML file")


def check(p: Path, headline: str = "Check both loaders") -> str:
    return terminal(f"cd {p} && python3 check.py", headline)


def composed_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("type") == "plan_activated" and e.get("by") == "composed"]


def test_proposed_with_a_mistake_fixed_approved_run_saved_and_started_again_by_its_text(a0_tree):
    p = project(a0_tree)
    turns = [WARM_UP, REQUEST.format(p=p), "go ahead", "save this workflow", {"wait": 3}, AGAIN.format(p=p)]
    replies = [terminal(f"ls {p}", "List the folder"), respond("settings.ini, convert.py and check.py."),
               propose(MISTAKE, p), propose(PLAN, p), respond("I wrote a two-step workflow; say go ahead to run it."),
               convert(p), check(p), respond("Moved to TOML; both loaders read the same settings."),
               respond("Saved."),
               convert(p), check(p, "Check both loaders again"), respond("Done again.")]
    run = a0_tree.run(turns, replies)
    assert run.overrun == 0 and not run.hung and len(run.calls) == len(replies)
    # the lint's lines reach the agent as the tool's result, in the prompt of the call after it
    assert "The workflow was not accepted: 1 problem." in run.calls[3]
    assert "node 'loaders': the step has no check" in run.calls[3]
    assert "passed its checks (2 steps) and waits for the person's approval" in run.calls[4]
    assert "[WORKFLOW" not in run.last_user[4], run.last_user[4][-3000:]  # nothing runs before the person approves
    assert "Started the proposed workflow 'INI to TOML migration' (approved by the person)" in run.last_user[5]
    assert "Current step: Write the TOML settings" in run.last_user[5]
    assert "Current step: Check both loaders" in run.last_user[6]
    assert "graph_workflow" in run.calls[0]  # the tool's prompt is in the system prompt
    events = a0_tree.audit(run.chat_id)
    assert len(composed_events(events)) == 1
    assert verdicts(events, "convert") == ["success", "success"], [(e["type"], e.get("node"), e.get("reason")) for e in events]
    assert verdicts(events, "loaders") == ["success"] * 2
    assert types(events).count("plan_completed") == 2
    assert (p / "settings.toml").is_file()
    saved = a0_tree.installed("htn_plan_library.json").parent / "ini_to_toml.dot"
    assert saved.is_file() and REQUEST.format(p=p) in saved.read_text()
    assert "The workflow 'INI to TOML migration' was saved" in run.last_user[8]
    again = [e for e in events if e.get("type") == "plan_activated" and e.get("by") != "composed"]
    assert [e.get("plan") for e in again] == ["ini_to_toml"]  # started by its own text, as any plan of the library
    assert "[WORKFLOW: INI to TOML migration] step 1 of 2" in run.last_user[9]


def test_an_amended_run_keeps_its_done_steps(a0_tree):
    p = project(a0_tree)
    turns = [WARM_UP, REQUEST.format(p=p), "go ahead", "yes"]
    replies = [terminal(f"ls {p}", "List the folder"), respond("three files."),
               propose(PLAN, p), respond("Approve the workflow?"),
               convert(p), propose(AMENDED, p, "amend"), respond("I want to add a step that keeps the INI file; ok?"),
               check(p), terminal(f'cd {p} && test -f settings.ini; echo "[exit:$?]"', "Keep the INI"),
               respond("Done.")]
    run = a0_tree.run(turns, replies)
    assert run.overrun == 0 and len(run.calls) == len(replies)
    assert "The change to the running workflow passed its checks (3 steps)" in run.calls[6]
    assert "it goes on at 'Check both loaders' with the steps done so far kept" in run.last_user[7]
    events = a0_tree.audit(run.chat_id)
    assert [e["node"] for e in events if e.get("type") == "plan_amended"] == ["loaders"]
    assert verdicts(events, "convert") == ["success"] and verdicts(events, "loaders") == ["success"]
    assert verdicts(events, "keep") == ["success"]
    assert types([e for e in events if e.get("plan") == "ini_to_toml"])[-1] == "plan_completed"


def test_killed_during_a_call_the_composed_run_resumes_from_its_stored_text(a0_tree):
    p = project(a0_tree)
    first = a0_tree.run([WARM_UP, REQUEST.format(p=p), "go ahead"],
                        [terminal(f"ls {p}", "List the folder"), respond("three files."), propose(PLAN, p),
                         respond("Approve?"), convert(p), "HANG"])
    assert first.hung
    state = a0_tree.state(first.chat_id)
    assert state["source"]["text"] == PLAN and "ini_to_toml" not in json.dumps(
        json.loads(a0_tree.installed("htn_plan_library.json").read_text())["plans"])
    second = a0_tree.run([{"load": first.chat_id}, {"nudge": True}], [check(p), respond("Done.")])
    assert second.overrun == 0
    assert "[WORKFLOW RESUMED" in second.last_user[0] and "Current step: Check both loaders" in second.last_user[0]
    events = a0_tree.audit(first.chat_id)
    assert verdicts(events, "convert") == ["success"] and verdicts(events, "loaders") == ["success"]
    assert types([e for e in events if e.get("plan") == "ini_to_toml"])[-1] == "plan_completed"


def test_a_proposal_over_the_node_limit_or_a_loop_without_exit_is_refused(a0_tree):
    """(100,000 nodes, 1.3 MB, are refused by the tool at once: tests/hosts/test_composed.py.  Not sent through the
    real loop: Agent-Zero parses a streamed reply again at each chunk, and spent over two minutes of CPU on a reply of
    30 KB (3,000 nodes) before any tool ran.)"""
    p = project(a0_tree)
    huge = "digraph big {\n" + "\n".join(f"n{i} -> n{i + 1}" for i in range(60)) + "\n}"
    loop = PLAN.replace('loaders -> exit [condition="outcome=success"]', 'loaders -> convert [condition="outcome=success"]')
    run = a0_tree.run([REQUEST.format(p=p)], [propose(huge, p), propose(loop, p), respond("No workflow, then.")])
    assert run.overrun == 0 and len(run.calls) == 3
    assert "the plan has 61 nodes, over the limit of 40" in run.calls[1]
    assert "can repeat without spending a retry budget" in run.calls[2]
    assert a0_tree.state(run.chat_id) is None and not composed_events(a0_tree.audit(run.chat_id))
