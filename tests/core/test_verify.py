"""Checks give the right verdict, with a reason, on real Agent-Zero tool output."""

import os

import pytest

from graph_engine.core.model import PlanError, compile_plan
from graph_engine.core.verify import Evidence, check, clean_output

PROMPT = "\nroot@vm:/a0/usr/workdir#"


def verify(vtype, value="", flags=""):
    spec = {"type": vtype, "value": value}
    if flags:
        spec["flags"] = flags
    plan = compile_plan("p", {"steps": [{"name": "s", "verify": spec}]})
    return plan.nodes["step_1"].verify


def run(vtype, output, value="", reply="", flags=""):
    return check(verify(vtype, value, flags), Evidence(tool="code_execution_tool", text=output, reply=reply))


def test_the_shell_prompt_line_cannot_satisfy_a_check():
    assert clean_output("\nhello\nroot@vm:/a0/usr/workdir#") == "\nhello"
    assert clean_output("(venv) user@box:~/proj$ ") == ""
    assert not run("output_contains", "\nnothing here" + PROMPT, "workdir").ok
    assert run("output_not_contains", "\nclean" + PROMPT, "workdir").ok


def test_contains_is_case_insensitive_and_says_why():
    v = run("output_contains", "\nOn branch main" + PROMPT, "on BRANCH")
    assert v.ok and "found 'on BRANCH'" in v.reason
    v = run("output_contains", "\nfatal: not a git repository" + PROMPT, "On branch")
    assert not v.ok and v.reason == "expected 'On branch' in the output"


def test_regex_checks():
    assert run("output_matches", "\n5 passed in 0.1s" + PROMPT, r"\b\d+ passed\b").ok
    v = run("output_not_matches", "\n1 failed, 4 passed" + PROMPT, r"\b\d+ failed\b")
    assert not v.ok and "'1 failed'" in v.reason
    assert run("output_matches", "\nERROR x" + PROMPT, "error", flags="i").ok
    assert not run("output_matches", "\nERROR x" + PROMPT, "error").ok


def test_catastrophic_regex_is_rejected_at_load():
    with pytest.raises(PlanError, match="a quantifier inside a quantified group"):
        verify("output_matches", "(a+)+$")


def test_no_output_placeholder_is_no_output():
    v = run("any_output", "[SYSTEM: No output returned. Consider double-checking the command.]")
    assert not v.ok and v.reason == "the command printed no output"
    assert not run("any_output", PROMPT).ok
    assert run("any_output", "\nx" + PROMPT).ok


@pytest.mark.parametrize("output, ok, reason", [
    ('\nok\n[exit:0]' + PROMPT, True, "exit status 0"),
    ('\n[exit:0]\nmore\n[exit:2]' + PROMPT, False, "exit status 2"),
    ('\nexit=1' + PROMPT, False, "exit status 1"),
    ('\nall good' + PROMPT, False, 'the output has no [exit:N] line, so the exit status is unknown'),
])
def test_exit_code_zero_reads_the_printed_status(output, ok, reason):
    v = run("exit_code_zero", output)
    assert (v.ok, v.reason) == (ok, reason)


def looked(path):
    """file_exists, with what the host saw of the path before the check (reading.file_fact)."""
    from graph_engine.boundary.reading import file_fact
    return check(verify("file_exists", path, ""), Evidence(tool="t", text="", files={path: file_fact(path)}))


def test_file_exists_really_checks(tmp_path):
    f = tmp_path / "a.txt"
    assert not looked(str(f)).ok
    f.write_text("x")
    assert looked(str(f)).ok
    assert looked(str(tmp_path)).reason.endswith("is a directory, not a file")
    link = tmp_path / "dangling"
    os.symlink(tmp_path / "missing", link)
    assert looked(str(link)).reason.endswith("is a dangling symbolic link")


def test_file_exists_judges_only_what_the_host_saw(tmp_path):
    """The check reads no disk: a path the host did not look at fails, whatever the disk holds."""
    f = tmp_path / "a.txt"
    f.write_text("x")
    v = run("file_exists", "", str(f))
    assert not v.ok and v.reason == f"{f} was not looked at before the check"


def test_manual_needs_an_explicit_confirmation():
    assert not run("manual", "\ndone" + PROMPT, reply='{"thoughts": ["I think it is done"]}').ok
    assert run("manual", "\ndone" + PROMPT, reply='{"thoughts": ["STEP COMPLETE: made the changes"]}').ok


def test_truncated_output_says_so_on_failure():
    v = check(verify("output_contains", "needle"),
              Evidence(tool="t", text="hay<<\n10 CHARACTERS REMOVED\n>>stack", truncated=True))
    assert not v.ok and v.reason.endswith("(the output was shortened by history compression)")
