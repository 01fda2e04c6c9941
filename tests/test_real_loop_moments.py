"""A message the person writes while the agent works, at every moment of a pass Agent-Zero takes it, in Agent-Zero's
real message loop (`make real-loop`, both layouts): each result is judged once, against the step its call was
shown, no step passes whose command never ran, and the run completes as if the message had come between two steps.

The message is put where Agent-Zero's own ``handle_intervention`` will take it: a test extension in the tree's
copy calls ``context.communicate`` at one of Agent-Zero's extension points (before the prompt, after the hooks,
after the model's reply, when the tool starts (then while it runs), after the tool, at the pass's end), or the
driver says it while the scripted model's call takes its time (during the call).  The model reads its prompt
(the driver's ``by_step``): it runs the command of the step it is shown, whose output names that step, and answers
the person when it is shown no step.  Every check reads the exit status, which any command's result would pass:
a result judged against a step it was not issued for would fake that step.  The engine's judging is recorded in
the Agent-Zero process (``record_judged``).  The same moments with the stand-in: tests/hosts/test_message_moments.py.
"""

import json
from pathlib import Path

import pytest

from a0real import CHAIN, CHAIN_NAMES, A0Copy, lint_chain_library, respond, terminal
from test_real_loop import WARM_UP

QUESTION = "also, which python version is installed?"
STEPS, NAMES = CHAIN, CHAIN_NAMES
SAY_AT = 2  # the workflow's pass whose step is lint_2 (pass 0 shows prepare)
EXTENSION = '''
import json, os, threading
try:
    from helpers.extension import Extension
except ImportError:
    from python.helpers.extension import Extension

POINT = {point!r}
SAY = json.loads(os.environ.get("GRAPH_ENGINE_TEST_SAY") or "{{}}")


class GraphEngineTestSay(Extension):
    """Test only: the person writes while the agent works, at this extension point of one pass."""

    async def execute(self, **kwargs):
        agent = self.agent
        loop_data = kwargs.get("loop_data") or getattr(agent, "loop_data", None)
        if SAY.get("point") != POINT or getattr(agent, "number", 0) != 0 or os.path.exists(SAY["flag"]):
            return
        if not isinstance(getattr(agent, "_htn_state", None), dict) or \\
                getattr(loop_data, "iteration", None) != SAY["iteration"]:
            return
        open(SAY["flag"], "w").close()
        import agent as a0
        message = a0.UserMessage(message=SAY["text"], attachments=[])
        context = agent.context
        if SAY.get("delay"):
            threading.Timer(SAY["delay"], lambda: context.communicate(message)).start()
        else:
            context.communicate(message)
'''
POINTS = {"before_prompt": ("message_loop_start", 0.0), "after_hooks": ("before_main_llm_call", 0.0),
          "after_call": ("response_stream_end", 0.0), "during_tool": ("tool_execute_before", 1.5),
          "after_tool": ("tool_execute_after", 0.0), "before_next": ("message_loop_end", 0.0)}
MOMENTS = ("before_prompt", "after_hooks", "during_call", "after_call", "during_tool", "after_tool", "before_next")


def library(tree: A0Copy) -> dict:
    """Five steps in a row, each checked by its exit status alone."""
    return lint_chain_library(tree.root.parent / "moments_library.json", lambda n: f"echo done:{n}", max_retries=1)


def by_step(sleep: float) -> dict:
    """A model that runs the command of the step it is shown (the output names the step; ``sleep`` seconds after
    its first line), answers the person when shown no step, and says it is done when the run ended."""
    def run(n: str) -> str:
        return terminal(f'echo "working on {n}"; sleep {sleep}; echo "done:{n}"; echo "[exit:$?]"  # call {{n}}',
                        f"Run {NAMES[n]}")
    return {"steps": {NAMES[n]: run(n) for n in STEPS},
            "paused": terminal('python3 --version; echo "[exit:$?]"  # call {n}', "Answer the question"),
            "other": respond("Done: every step of the lint chain passed (call {n}).")}


def install_say(tree: A0Copy, point: str) -> None:
    """The test extension at ``point``, where this layout reads extensions."""
    folder = tree.root / ("usr/extensions/python" if tree.layout == "new" else "python/extensions") / point
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_99_graph_engine_test_say.py").write_text(EXTENSION.format(point=point))


def issued_for(judged: dict) -> str:
    """The step whose command made the judged result (the reply runs it; the output names it)."""
    return next((n for n in STEPS if f"working on {n}" in judged["reply"]), "")


def judged_right(run) -> list[tuple[str, str]]:
    judged = run.raw["judged"]
    for j in judged:
        assert issued_for(j) == j["node"], f"{j['node']} judged on a result issued for {issued_for(j) or 'no step'}"
        assert j["outcome"] != "success" or f"done:{j['node']}" in j["text"], j  # a pass: its command ran
    keys = [(j["reply"], j["text"]) for j in judged]
    assert len(keys) == len(set(keys)), "a result was judged twice"
    return [(j["node"], j["outcome"]) for j in judged]


@pytest.mark.parametrize("moment", MOMENTS)
def test_a_message_at_any_moment_of_a_pass_never_fakes_a_step(a0_tree, tmp_path, moment):
    env = library(a0_tree)
    turns: list = [WARM_UP, "run the lint chain"]
    delay = {"": 0.0}
    if moment == "during_call":
        turns[1] = {"user": "run the lint chain", "say": {"after_calls": 2 + 1 + SAY_AT, "text": QUESTION}}
        delay = {"": 1.5}  # each chat call of the chat's agent takes 1.5 s: the message comes during one
    else:
        point, after = POINTS[moment]
        install_say(a0_tree, point)
        env["GRAPH_ENGINE_TEST_SAY"] = json.dumps({"point": point, "iteration": SAY_AT, "text": QUESTION,
                                                   "delay": after, "flag": str(tmp_path / "said")})
    run = a0_tree.run(turns, [terminal("ls", "List the folder"), respond("Some files.")], env=env,
                      chat_delay=delay, by_step=by_step(4.0 if moment == "during_tool" else 0.0),
                      record_judged=True)
    if moment != "during_call":
        assert (tmp_path / "said").is_file(), f"the message was never said at {moment}"
    assert any(QUESTION in c for c in run.calls), "the message never reached the model"
    verdicts = judged_right(run)
    assert [n for n, o in verdicts if o == "success"] == list(STEPS), verdicts
    assert [o for _, o in verdicts if o != "success"] == [], verdicts
    state = a0_tree.state(run.chat_id)
    assert state is None or state.get("status") == "completed"
    events = a0_tree.audit(run.chat_id)
    assert [e["type"] for e in events if e["type"] in ("plan_completed", "plan_expired", "plan_escalated")] == \
        ["plan_completed"]


# ── while branches run (v1.x: each branch in a subordinate agent) ──────────


def test_a_message_while_branches_run_never_fakes_the_step_after_them(a0_tree):
    """The person writes while three branches run (their model calls take 2 s): after the fan-in, the step after
    it (Report, whose check any output passes) is shown, the pass ends before its call (the message), and Report
    passes only on its own command's result, never on Prepare's (issue 48's false completion)."""
    from test_real_loop_macrocosm import ASK, BRANCHES, library as checks_library, needs_subordinates, project
    needs_subordinates(a0_tree)
    p = project(a0_tree)
    names = {"prepare": "Prepare", "lint": "Lint", "types": "Type check", "tests": "Unit tests", "report": "Report"}
    commands = {"prepare": f"ls {p}", "report": 'echo "release checks: done"',
                **{b: f'cd {p} && sh {b}.sh; echo "[exit:$?]"' for b in BRANCHES}}
    steps = {names[n]: terminal(f"{c}  # call {{n}}", f"Run {names[n]}") for n, c in commands.items()}
    script = {"steps": steps, "paused": terminal('python3 --version; echo "[exit:$?]"  # call {n}', "Answer"),
              "other": respond("Done (call {n}).")}
    turn = {"user": ASK.format(p=p), "say": {"after_calls": 2 + 1 + 2, "text": QUESTION}}
    run = a0_tree.run([WARM_UP, turn], [terminal("ls", "List the folder"), respond("Some files.")],
                      chat_delay={b: 2.0 for b in BRANCHES}, env=checks_library(a0_tree, p), by_step=script,
                      record_judged=True)
    assert any(QUESTION in c for c in run.calls)
    for j in run.raw["judged"]:
        node = j["node"]
        assert commands[node] in json.loads(j["reply"])["tool_args"]["code"], (node, j["reply"])
    parent = [(j["node"], j["outcome"]) for j in run.raw["judged"] if not j["branch"]]
    assert parent == [("prepare", "success"), ("report", "success")], parent
    events = a0_tree.audit(run.chat_id)
    assert [e["type"] for e in events if e["type"] in ("plan_completed", "plan_expired", "plan_escalated")] == \
        ["plan_completed"]
