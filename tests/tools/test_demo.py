"""`make demo` (graph-engine demo) reads true: it completes, counts one way, says why a pass judges nothing,
and leaves its audit log where the user can open it; its commands run for real (the outputs shown are what
they printed) and the project it leaves runs clean."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from graph_engine.tools import cli, demo

pytestmark = pytest.mark.skipif(demo.shutil.which("bash") is None, reason="the demo runs its commands in bash")


def test_the_demo_completes_and_reads_true(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    passes = out.split("── pass ")[1:]
    assert passes[0].splitlines()[3].startswith("prompt   [WORKFLOW: Bug Fix Workflow] step 1 of 5")  # first call
    assert "judged   nothing: the last call's reply was misformatted" in out
    assert not re.search(r"\d+/\d+ steps", out) and "5 of 5 steps done" in out
    assert {m for m in re.findall(r"^verdict  \w+: (\w+)", out, re.MULTILINE)} == {"success", "fail"}
    log = Path(re.search(r"^Audit log \(\d+ lines, kept\): (\S+)$", out, re.MULTILINE).group(1))
    assert log.is_file() and log.is_relative_to(tmp_path)  # still there after the demo
    assert out.rstrip().endswith(f"the files of this run are in {tmp_path / 'demo'}")


def test_the_demo_prints_the_cards_final_text_as_the_chat_shows_it(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    shown = out.split("The workflow card in the chat (one log item, updated in place each pass):\n")[1]
    card = shown.split("\n\n")[0].splitlines()
    assert card[0] == "  Workflow: Bug Fix Workflow: completed"
    assert "    Outcome: completed at Bug fix complete (5 of 5 steps done)" in card
    picture = Path(next(line for line in card if "Picture of the run:" in line).split(": ", 1)[1])
    assert picture.is_file() and picture.parent == next(tmp_path.rglob("*.jsonl")).parent
    assert "Workflow:" not in out.split("Log lines written to the Agent-Zero UI:")[1].split("\n\n")[0]


def _run_json(capsys, out: Path) -> tuple[dict, list[tuple[str, str]]]:
    assert cli.main(["demo", "--out", str(out), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    return facts, [(p["command"], p["output"]) for p in facts["passes"] if p["command"] is not None]


def test_the_demo_fixes_the_file_for_real_and_leaves_a_project_that_runs(tmp_path, capsys):
    # pytest settings in a folder above the project (as the repository's, when `make demo` runs) do not apply
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "--no-such-option"\n')
    project = tmp_path / "demo" / "project"
    calc = project / "calc.py"
    project.mkdir(parents=True)
    calc.write_text("def average(xs):\n    return 0\n")  # an earlier run's fix: a new run writes the bug again
    facts, ran = _run_json(capsys, tmp_path / "demo")
    assert facts["completed"] is True
    reproduce, fixed = ran[0][1], ran[5][1]
    assert f'File "{calc}", line 3, in average' in reproduce  # the real traceback of the real file
    assert reproduce.endswith("ZeroDivisionError: division by zero\n[exit:1]")
    assert "SyntaxError: unmatched ')'" in ran[3][1] and ran[3][1].endswith("[exit:1]")  # the first fix broke it
    assert fixed == "0\n[exit:0]"
    tests = len(re.findall(r"^    def test_", demo.PROJECT["test_calc.py"], re.MULTILINE))
    assert re.search(rf"^{tests} passed in [\d.]+s$", ran[6][1], re.MULTILINE) and ran[6][1].endswith("[exit:0]")
    # afterwards the project runs clean, checked here without the demo's shell
    done = subprocess.run([sys.executable, "calc.py"], cwd=project, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "0\n", "")
    suite = subprocess.run([sys.executable, "-m", "unittest", "-v"], cwd=project, capture_output=True, text=True)
    assert suite.returncode == 0 and f"Ran {tests} tests" in suite.stderr
    # the tests are real: on the file as the demo wrote it they fail
    calc.write_text(demo.PROJECT["calc.py"])
    suite = subprocess.run([sys.executable, "-m", "unittest"], cwd=project, capture_output=True, text=True)
    assert suite.returncode == 1 and "ZeroDivisionError" in suite.stderr


def test_the_outputs_shown_are_what_the_commands_print(tmp_path, capsys):
    """Each command the printout shows, run again in order on a fresh copy of the project, prints what the
    printout showed under it."""
    out = tmp_path / "demo"
    assert cli.main(["demo", "--out", str(out)]) == 0
    shown = re.findall(r"^model    code_execution_tool: (.*)\n((?:(?:output   |         )\| .*\n)+)",
                       capsys.readouterr().out, re.MULTILINE)
    assert len(shown) == 7
    copy = tmp_path / "copy"
    demo.write_project(copy)

    def same(text: str, folder: Path) -> str:
        return re.sub(r" in \d+\.\d+s\b", " in <time>", text.replace(str(folder), "<project>"))

    for command, block in shown:
        output = "".join(line[11:] + "\n" for line in block.splitlines())
        done = subprocess.run(["bash", "-c", command], cwd=copy, env=demo.shell_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        assert same(done.stdout.strip("\n") + "\n", copy) == same(output, out / "project"), command
    assert (copy / "calc.py").read_text() == (out / "project" / "calc.py").read_text()


def test_python3_in_the_demos_shell_is_the_python_running_it():
    done = subprocess.run(["bash", "-c", "python3 -c 'import sys; print(sys.prefix)'"], env=demo.shell_env(),
                          capture_output=True, text=True)
    assert done.stdout.strip() == sys.prefix


def test_without_pytest_the_model_runs_the_tests_with_unittest(tmp_path, capsys, monkeypatch):
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else find(name, *a))
    facts, ran = _run_json(capsys, tmp_path / "demo")
    assert facts["completed"] is True
    assert ran[-1][0] == 'python3 -m unittest; echo "[exit:$?]"'
    assert re.search(r"^Ran 3 tests in [\d.]+s\n\nOK\n\[exit:0\]$", ran[-1][1], re.MULTILINE)


@pytest.mark.parametrize("missing, says", [("bash", "bash was not found on PATH"),
                                           ("sed", "this sed is not GNU sed")])
def test_without_bash_or_gnu_sed_the_demo_says_so_in_one_line(tmp_path, capsys, monkeypatch, missing, says):
    which = demo.shutil.which
    monkeypatch.setattr(demo.shutil, "which", lambda name: None if name == missing else which(name))
    assert cli.main(["demo", "--out", str(tmp_path / "demo")]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and says in out
    assert not (tmp_path / "demo").exists()


def test_a_sed_that_is_not_gnu_sed_is_named(tmp_path, capsys, monkeypatch):
    bsd = tmp_path / "bin" / "sed"  # BSD sed (macOS) has no --version: "sed: illegal option -- -"
    bsd.parent.mkdir()
    bsd.write_text("#!/bin/sh\necho 'sed: illegal option -- -' >&2\nexit 1\n")
    bsd.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bsd.parent}:{demo.os.environ['PATH']}")
    assert cli.main(["demo", "--out", str(tmp_path / "demo")]) == 2
    assert "this sed is not GNU sed" in capsys.readouterr().out
