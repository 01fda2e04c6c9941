"""`make demo` (graph-engine demo) reads true: it completes, counts one way, says why a pass judges nothing,
and leaves its audit log where the user can open it."""

import re
from pathlib import Path

from graph_engine.tools import cli


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
