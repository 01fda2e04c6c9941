"""Every CLI verb, every bad input a user gives: one clear line on stderr, the documented exit code (2 an input
that cannot be used, 1 a finding), no traceback, nothing half-written on stdout. Each new verb joins the table."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from graph_engine.tools import cli
from graph_engine.tools.standin import FIXTURES, LIBRARY, ROOT

CLEAN = json.loads((FIXTURES / "lint" / "clean.json").read_text())
DOT = ('digraph smoke { start [shape=Mdiamond]; run [prompt="run it"]; exit [shape=Msquare]; '
       'start -> run -> exit }')
UNROUTED = {"plans": {"p": {"name": "P", "triggers": ["go p"], "trigger_threshold": 1, "graph": {
    "start": "t", "nodes": {"t": {"type": "task", "verify": {"type": "any_output"}}, "done": {"type": "exit"}},
    "edges": [{"from": "t", "to": "done", "condition": "on_success"}]}}}}


@pytest.fixture
def files(tmp_path):
    f = {"missing": tmp_path / "missing.json", "folder": tmp_path}
    data = {"binary": b"\x00\x01\x02\xff\xfe", "empty": b"", "malformed": b"{not json",
            "one": json.dumps(CLEAN).encode(), "unrouted": json.dumps(UNROUTED).encode(),
            "expect_bad": b'{"type": "plan_completed"}', "expect_ok": b'[{"type": "plan_completed"}]',
            "transcript_bad": b'{"user": "fix the bug"}\nnot json\n', "run_bad": b"not an audit line\n"}
    for name, blob in data.items():
        path = tmp_path / (name + (".jsonl" if name.startswith(("transcript", "run")) else ".json"))
        path.write_bytes(blob)
        f[name] = path
    dots = tmp_path / "dots"
    dots.mkdir()
    (dots / "smoke.dot").write_text(DOT)
    (dots / "bad.dot").write_text("digraph Bad { a -- b }")
    f["dot"], f["bad_dot"] = dots / "smoke.dot", dots / "bad.dot"
    f["other_run"] = tmp_path / "other_run.json"  # a saved state of another plan
    f["other_run"].write_text(json.dumps({"plan_id": "git_merge_pr", "events": [
        {"type": "plan_activated", "node": "start", "seq": 1}, {"type": "node_entered", "node": "start", "seq": 2}]}))
    return {k: str(v) for k, v in f.items()}


B = str(LIBRARY)
NO_FILE, FOLDER, BINARY, EMPTY, BAD_JSON = ("no such", "is a folder", "is a binary file", "is empty",
                                           "not valid JSON")
BAD_FILES = [("missing", NO_FILE), ("folder", FOLDER), ("binary", BINARY), ("empty", EMPTY), ("malformed", BAD_JSON)]

# (verb and arguments, with {name} for a file of the fixture) -> (exit code, what stderr says)
TABLE = [
    *[(["validate", "{%s}" % n], 2, said) for n, said in BAD_FILES],
    (["validate", "{dot}"], 0, ""),
    (["validate", "{bad_dot}"], 1, ""),  # a finding, printed on stdout with line:column
    *[(["triggers", "--library", "{%s}" % n], 2, said) for n, said in BAD_FILES],
    (["triggers", "--library", "{dot}"], 0, "has no golden set"),
    (["triggers", "--cases", "{malformed}"], 2, BAD_JSON),
    (["triggers", "--cases", "{missing}"], 2, NO_FILE),
    *[(["prompts", "{%s}" % n], 2, said) for n, said in BAD_FILES],
    (["prompts", B, "--plan", "bugfix_workflw"], 2, "no plan 'bugfix_workflw'; did you mean 'bugfix_workflow'?"),
    (["prompts", "{one}"], 0, ""),
    *[(["explain", "{%s}" % n], 2, said) for n, said in BAD_FILES],
    (["explain", "{run_bad}"], 2, "holds no event of a run"),
    (["explain", "{other_run}", "--library", "{malformed}"], 2, BAD_JSON),
    (["explain", "{other_run}", "--library", "{dot}"], 0, ""),
    *[(["inspect", "{%s}" % n], 2, said) for n, said in BAD_FILES if n != "malformed"],
    (["inspect", B], 2, "inspect reads DOT plans"),
    (["inspect", "{bad_dot}"], 2, r"bad\.dot:1:\d+: "),
    *[(["export", "--library", "{%s}" % n, "--plan", "p"], 2, said) for n, said in BAD_FILES],
    (["export", "--plan", "bugfix"], 2, "did you mean 'bugfix_workflow'?"),
    (["export"], 2, "holds 10 plans; pick one with --plan"),
    (["export", "--library", "{one}"], 0, ""),  # a one-plan library needs no --plan
    (["export", "--plan", "bugfix_workflow", "--format", "svg"], 2, "--format 'svg': use one of dot, mermaid"),
    *[(["render", "{%s}" % n, "--plan", "p"], 2, said) for n, said in BAD_FILES],
    (["render", B, "--plan", "bugfix_workflow", "--format", "gif"], 2, "--format 'gif'"),
    (["render", B, "--plan", "bugfix_workflow", "--trace", "{other_run}"], 2,
     "is a run of plan 'git_merge_pr', not of 'bugfix_workflow'"),
    (["render", B, "--plan", "bugfix_workflow", "--trace", "{missing}"], 2, NO_FILE),
    (["render", "{dot}", "--format", "mermaid"], 0, ""),
    (["select", B, "--plan", "bugfix_workflow", "--from", "tset", "--outcome", '{"status": "fail"}'], 2,
     "no node 'tset'; did you mean 'test'?"),
    (["select", B, "--plan", "bugfix_workflow", "--from", "test", "--outcome", "{status: fail}"], 2,
     "--outcome is not valid JSON"),
    (["select", B, "--plan", "bugfix_workflow", "--from", "test", "--outcome", '{"status": "failed"}'], 2,
     "unknown status 'failed'; did you mean 'fail'?"),
    (["select", B, "--plan", "bugfix_workflow", "--from", "test", "--outcome", '{"status": "fail"}',
      "--context", "[1]"], 2, "--context must be a JSON object"),
    (["select", "{unrouted}", "--from", "t", "--outcome", '{"status": "fail"}'], 0, ""),  # no edge: null, an answer
    (["simulate", B, "--plan", "bugfix_workflow", "--outcomes", '{"tset": [{"status": "fail"}]}'], 2,
     "no node 'tset'; did you mean 'test'?"),
    (["simulate", B, "--plan", "bugfix_workflow", "--outcomes", '{"test": [{"status": "flaky"}]}'], 2,
     "unknown status 'flaky'"),
    (["simulate", B, "--plan", "bugfix_workflow", "--outcomes", "{test: 1}"], 2, "--outcomes is not valid JSON"),
    (["simulate", B, "--plan", "bugfix_workflow", "--outcomes", "{}", "--expect", "{expect_bad}"], 2,
     "--expect needs a JSON list of event objects"),
    (["simulate", B, "--plan", "bugfix_workflow", "--outcomes", "{}", "--expect", "{missing}"], 2, NO_FILE),
    (["simulate", B, "--plan", "bugfix_workflow", "--outcomes", "{}", "--expect", "{expect_ok}"], 0, ""),
    (["simulate", B, "--plan", "bugfix_workflow", "--outcomes", '{"reproduce": [{"status": "fail"}, '
      '{"status": "fail"}, {"status": "fail"}]}', "--expect", "{expect_ok}"], 1, "expected event"),
    (["simulate", "{unrouted}", "--outcomes", '{"t": [{"status": "fail"}]}'], 2,
     "has 1 error\\(s\\), first: \\[failure_unrouted\\].*--allow-invalid"),
    (["simulate", "{unrouted}", "--outcomes", '{"t": [{"status": "fail"}]}', "--allow-invalid"], 1,
     "the run stalled at 't'"),
    (["simulate", B, "--plan", "bugfix_workflow", "--transcript", "{transcript_bad}"], 2, r"transcript_bad\.jsonl:2:"),
    (["simulate", "{one}", "--outcomes", "{}"], 0, ""),  # a one-plan library needs no --plan
    (["simulate", B, "--outcomes", "{}"], 2, "holds 10 plans; pick one with --plan"),
]


@pytest.mark.parametrize("argv, code, said", TABLE, ids=[" ".join(a[:4]) + f" -> {c}" for a, c, _ in TABLE])
def test_bad_input(files, capsys, argv, code, said):
    args = [re.sub(r"\{(\w+)\}", lambda m: files.get(m.group(1), m.group(0)), a) for a in argv]
    assert cli.main(args) == code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith(f"graph-engine {argv[0]}: "), err
        assert out in ("", "[]\n") or out.startswith('{"ok": false'), out  # nothing half-written
    if said:
        assert re.search(said, err), err


def run_cli(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graph_engine.tools.cli", *args], capture_output=True, env=env,
                          timeout=60, **kw)


def test_a_usage_error_exits_2_without_a_traceback():
    r = run_cli("simulate", str(LIBRARY), "--outcomes", "{}", "--transcript", "chat.jsonl")
    assert r.returncode == 2 and b"Traceback" not in r.stderr and b"not allowed with argument" in r.stderr
    r = run_cli("select", str(LIBRARY), "--plan", "bugfix_workflow")
    assert r.returncode == 2 and b"Traceback" not in r.stderr and b"the following arguments are required: --from" \
        in r.stderr


def test_output_cut_short_by_head_ends_quietly():
    r = subprocess.run(f"'{sys.executable}' -m graph_engine.tools.cli prompts | head -1", shell=True,
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(b"# Texts the model reads") and r.stderr == b""


def test_png_without_graphviz_writes_nothing_and_says_how_to_install_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python3")
    env = dict(os.environ, PATH=str(bin_dir))  # no 'dot' on this PATH
    picture = tmp_path / "plan.png"
    r = run_cli("render", str(LIBRARY), "--plan", "bugfix_workflow", "--format", "png", "--output", str(picture),
                env=env)
    assert r.returncode == 2 and not picture.exists() and r.stdout == b""
    assert b"apt-get install graphviz" in r.stderr and b"nothing was written" in r.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_png_with_graphviz_is_a_png(tmp_path):
    picture = tmp_path / "plan.png"
    r = run_cli("render", str(LIBRARY), "--plan", "bugfix_workflow", "--format", "png", "--output", str(picture))
    assert r.returncode == 0 and picture.read_bytes().startswith(b"\x89PNG")


def test_the_trace_counts_each_node_as_often_as_the_run_entered_it():
    from graph_engine.authoring.render_graph import trace_counts
    events = [{"type": "plan_activated", "node": "start"}, {"type": "node_entered", "node": "start"},
              {"type": "edge_followed", "from": "start", "to": "a", "condition": "always"},
              {"type": "node_entered", "node": "a"}]
    assert trace_counts(events)["nodes"] == {"start": 1, "a": 1}


def test_the_readme_documents_the_exit_codes_and_the_expect_format():
    readme = (ROOT / "docs" / "plans.md").read_text()
    assert "2 an input that cannot be used" in readme and "1 a finding" in readme
    assert '--expect EVENTS.json' in readme and '[{"type": "retry_triggered", "node": "test"}' in readme
