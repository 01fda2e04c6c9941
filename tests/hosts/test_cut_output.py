"""An output that comes back without the [exit:N] line its command prints (a terminal just opened can answer
before the command's end: 2 of 88 branch runs in the real loop) is no verdict: the step is shown again with a
note, its attempt unspent, once; a second such output is judged as it is."""

from scenario import events, use_library

from graph_engine.tools.standin import Reply, Session


def plan() -> dict:
    return {"name": "Build", "triggers": ["build the thing"], "trigger_threshold": 1, "graph": {
        "start": "start",
        "nodes": {"start": {"type": "start"},
                  "build": {"type": "task", "name": "Build", "action": "make", "tool": "code_execution_tool",
                            "tool_hint": "make all", "verify": {"type": "exit_code_zero"}, "max_retries": 0},
                  "done": {"type": "exit"}, "stuck": {"type": "escalate", "reason": "the build fails"}},
        "edges": [{"from": "start", "to": "build"}, {"from": "build", "to": "done", "condition": "on_success"},
                  {"from": "build", "to": "stuck", "condition": "on_exhaust"}]}}


def ran(output: str, command: str = 'make all; echo "[exit:$?]"') -> Reply:
    from graph_engine.tools.standin import cmd
    return cmd(command, output)


def test_a_cut_output_is_shown_again_once_then_judged(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"build": plan()})
    s = Session()
    s.user("build the thing")
    s.run_pass(Reply(warning="x"))
    s.run_pass(ran("gcc -c main.c"))  # cut: no [exit:N] line
    again = s.run_pass(ran("gcc -c main.c\nld main.o"))
    shown = again.prompt_extras["htn_active_plan"]
    assert "its [exit:N] line: it was cut before the command ended" in shown and "Current step: Build" in shown
    ignored = events(s, "evidence_ignored")
    assert len(ignored) == 1 and ignored[0]["reason"].startswith("the output came back without the [exit:N] line")
    assert events(s, "node_verified") == []
    s.run_pass(Reply(warning="y"))  # the second cut output is judged: the step fails (no retries)
    assert [e["outcome"] for e in events(s, "node_verified")] == ["fail"]


def test_a_command_that_does_not_print_its_status_is_judged_at_once(monkeypatch, tmp_path):
    use_library(monkeypatch, tmp_path, {"build": plan()})
    s = Session()
    s.user("build the thing")
    s.run_pass(Reply(warning="x"))
    s.run_pass(ran("gcc -c main.c", command="make all"))
    s.run_pass(Reply(warning="y"))
    assert [e["outcome"] for e in events(s, "node_verified")] == ["fail"] and events(s, "evidence_ignored") == []
