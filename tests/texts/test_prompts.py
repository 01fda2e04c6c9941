"""What the model reads, pinned and proofread.

Golden files: ``fixtures/prompts/<plan>.txt`` hold every text each shipped plan can show the model
(``graph_engine.tools.prompts``: each step at its first visit, after one and after all failed attempts, each
decision route, escalation, completion, expiry, end, withdrawal, pause, hold and resume notice; a human-gate
plan, a plan with a step that accepts a partial result, a plan whose branches run at once, and a linear plan beside
them).  A change to any of it fails here until it is accepted with
``make prompts`` (pytest --snapshot-update), so a reviewer reads the new text in the diff.

Proofreading the goldens cannot do by eye is done below: every command parses with ``bash -n`` and runs
known programs, no word is misspelt (cut) or doubled, each step says once how to print the exit status,
steps and attempts are counted one way with correct plurals, and each text stays within its size budget.
"""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from golden import text_files
from spellchecker import SpellChecker

from graph_engine.texts import render
from graph_engine.tools import prompts
from graph_engine.authoring.library import load_library_file
from graph_engine.tools.standin import FIXTURES, LIBRARY

SHIPPED = load_library_file(str(LIBRARY)).plans
EXTRA_PLANS = load_library_file(str(FIXTURES / "prompt_plans.json")).plans
EXTRA = {"human_gate__release_approval": EXTRA_PLANS["release_approval"],
         "allow_partial__lint_then_test": EXTRA_PLANS["lint_then_test"],
         "parallel__release_checks": EXTRA_PLANS["release_checks"],
         "linear__git_feature_branch": load_library_file(
             str(FIXTURES / "legacy_linear_htn_plan_library.json")).plans["git_feature_branch"]}
ALL = {**SHIPPED, **EXTRA}
SECTIONS = {name: prompts.sections(plan) for name, plan in ALL.items()}
CONTROLLED = ("bugfix_workflow", "human_gate__release_approval")  # the texts of the user's controls, pinned
CONTROL_SECTIONS = {name: list(prompts.control_sections(ALL[name], list(SHIPPED.values()))) for name in CONTROLLED}
PROOFREAD = {**SECTIONS, **{f"controls/{name}": sections for name, sections in CONTROL_SECTIONS.items()}}

STEP_BUDGET = 1_500  # characters of one step's context (about 400 tokens)
CALL_BUDGET = 2_000  # characters of everything one call receives (a notice above a new run's first step)


PromptFile = text_files(FIXTURES / "prompts", lambda name: name[name.index("[") + 1:name.rindex("]")])  # per plan


@pytest.fixture
def golden(snapshot):
    return snapshot.use_extension(PromptFile)


@pytest.mark.parametrize("name", sorted(ALL))
def test_texts_match_the_golden_file(name, golden):
    assert prompts.document(ALL[name]) == golden


ControlFile = text_files(FIXTURES / "prompts" / "controls", lambda name: name[name.index("[") + 1:name.rindex("]")])


@pytest.fixture
def control_golden(snapshot):
    return snapshot.use_extension(ControlFile)


@pytest.mark.parametrize("name", CONTROLLED)
def test_control_texts_match_the_golden_file(name, control_golden):
    assert prompts.control_document(ALL[name], list(SHIPPED.values())) == control_golden


def test_every_control_has_its_text_and_each_says_what_happened():
    for name, sections in CONTROL_SECTIONS.items():
        texts = {s.title.split(":")[0]: s.text for s in sections}
        assert texts["stop"].startswith("[WORKFLOW STOPPED by the user: ")
        assert texts["pause"].startswith("[WORKFLOW PAUSED by the user: ") and "Current step" not in texts["pause"]
        assert texts["status"].startswith("[WORKFLOW STATUS: ") and "Current step: " in texts["status"]
        assert texts["list"].startswith("[WORKFLOWS you can run: 10]") and texts["list"].count("\n- ") == 10
        assert all(texts[k].startswith("[WORKFLOW CONTROL] ") for k in ("skip", "back", "retry", "restart",
                                                                          "start by name", "resume"))
        assert all(t.startswith("[WORKFLOW CONTROL] No workflow is active") and "\n" not in t
                   for k, t in texts.items() if k.startswith("no run active"))


def test_every_golden_file_belongs_to_a_plan():
    assert sorted(p.stem for p in (FIXTURES / "prompts").glob("*.txt")) == sorted(ALL)


def test_every_shipped_task_step_and_ending_has_its_texts():
    for name, plan in SHIPPED.items():
        titles = [s.title for s in SECTIONS[name]]
        for node in plan.nodes.values():
            if node.type == "task":
                assert f"{node.id}: first visit" in titles, (name, node.id)
                if node.verify is not None:
                    assert any(t.startswith(f"{node.id}: after 1 failed") for t in titles), (name, node.id)
                if node.verify is not None and node.max_retries:
                    assert any(t.startswith(f"{node.id}: after all") for t in titles), (name, node.id)
            if node.type in ("escalate", "exit"):
                assert any(t.endswith(f" {node.id}") for t in titles), (name, node.id)
        for wanted in ("expiry", "ended by a new request", "withdrawn", "paused", "on hold", "resumed"):
            assert any(t.startswith(wanted) for t in titles), (name, wanted)


# ── commands: what the model runs literally ─────────────────────────────────

PLACEHOLDER = re.compile(r"<[^<>\n]+>")
KNOWN_PROGRAMS = {"git", "python3", "pip", "docker", "cat", "ls", "grep", "sed", "cp", "mkdir", "du", "diff",
                  "rm", "curl", "test", "echo", "tail", "head", "sort", "uniq", "cut", "find"}
STARTS_A_COMMAND = {";", "&&", "||", "|", "(", ")", "&"}


def commands():
    """(plan, node, the command as the model reads it) for every step that shows a command."""
    return [(name, node, render.command_text(node)) for name, plan in ALL.items()
            for node in plan.nodes.values() if node.type == "task" and render.is_command(node)]


def program_words(command: str) -> list[str]:
    lexer = shlex.shlex(PLACEHOLDER.sub("PLACEHOLDER", command), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    return [tok for i, tok in enumerate(tokens) if i == 0 or tokens[i - 1] in STARTS_A_COMMAND]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("name, node, command", commands(), ids=[f"{n}.{node.id}" for n, node, _ in commands()])
def test_each_command_parses_with_bash(name, node, command):
    filled = PLACEHOLDER.sub("word", command)
    done = subprocess.run(["bash", "-n", "-c", filled], capture_output=True, text=True)
    assert done.returncode == 0, f"{name}.{node.id}: {command!r}: {done.stderr}"


@pytest.mark.parametrize("name, node, command", commands(), ids=[f"{n}.{node.id}" for n, node, _ in commands()])
def test_each_command_runs_known_programs(name, node, command):
    unknown = [w for w in program_words(command) if w not in KNOWN_PROGRAMS | {"PLACEHOLDER"}]
    assert unknown == [], f"{name}.{node.id}: {command!r} runs {unknown}"


def test_the_known_programs_are_real():
    missing = [p for p in KNOWN_PROGRAMS - {"docker"} if shutil.which(p) is None]
    assert missing == []


def test_the_command_checker_catches_a_cut_word():
    assert program_words('git stash push -m "x"; ommand with ; echo "[exit:$?]"') == ["git", "ommand", "echo"]


# ── words ───────────────────────────────────────────────────────────────────

# words the English dictionary does not know and that are right here
TECHNICAL = {"api", "app", "auth", "bak", "behaviour", "bugfix", "codegen", "pyflakes", "config", "cp", "diff", "dockerfile",
             "docstrings", "ff", "grep", "http", "lockfile", "mkdir", "org", "pytest", "readme", "refactor",
             "refactored", "rm", "rq", "sdk", "sed", "sdist", "timestamps", "traceback", "twine", "txt", "uniq",
             "unmerged", "untracked", "url", "workflow", "xx", "checkout", "dist", "pr",
             "workflows", "dockerize", "refactoring", "deps", "mypy"}  # the last: trigger phrases the list quotes
SPELLING = SpellChecker()


def words_of(text: str) -> list[str]:
    text = re.sub(r"/[^/\n]+/", " ", text)  # regular expressions quoted in checks are not words
    return re.findall(r"[A-Za-z]+", text)


def test_no_word_is_misspelt_or_cut():
    found = {}
    for name, sections in PROOFREAD.items():
        for section in sections:
            for word in words_of(section.text):
                if word.lower() not in TECHNICAL and SPELLING.unknown([word.lower()]):
                    found.setdefault(word, f"{name}: {section.title}")
    assert found == {}


def test_the_spelling_check_catches_a_cut_word():
    assert SPELLING.unknown(["ommand"]) and not SPELLING.unknown(["command"])


def test_no_word_is_doubled():
    doubled = [(name, s.title, m.group(0)) for name, sections in PROOFREAD.items() for s in sections
               for m in re.finditer(r"\b(\w+)[ \t]+\1\b", s.text, re.IGNORECASE)]
    assert doubled == []


# ── the exit status: told once ──────────────────────────────────────────────


def test_each_step_says_once_how_to_print_its_exit_status():
    for name, plan in ALL.items():
        for section in SECTIONS[name]:
            if not section.title.endswith("first visit") or plan.mode == "linear":
                continue
            node = plan.nodes[section.title.split(":")[0]]
            told = section.text.count('echo "[exit:$?]"')
            assert told == (1 if render.reads_exit_status(node) else 0), (name, node.id, section.text)


def test_a_step_without_a_command_is_told_in_its_check():
    from graph_engine.core.model import compile_plan
    plan = compile_plan("p", {"graph": {"start": "a", "nodes": {
        "a": {"type": "task", "tool": "code_execution_tool", "verify": {"type": "exit_code_zero"}},
        "b": {"type": "exit"}}, "edges": [{"from": "a", "to": "b", "condition": "on_success"}]}})
    text = render.graph_context(plan, {**_fresh(plan)})
    assert text.count('echo "[exit:$?]"') == 1 and "end the command with" in text


def _fresh(plan):
    from graph_engine.core.state import new_state
    state = new_state(plan, "m", "m:0", 0)
    state["current_node"] = "a"
    return state


# ── counting ────────────────────────────────────────────────────────────────

COUNTS = re.compile(r"(\d+) of (\d+) (steps?|main steps?) done|step (\d+) of (\d+)|(\d+) of the (\d+) main steps?")


def test_steps_are_counted_one_way_everywhere():
    for name, plan in ALL.items():
        for section in SECTIONS[name]:
            text = section.text
            assert not re.search(r"\d+/\d+", text), (name, section.title)  # no "2/6 steps done"
            for m in re.finditer(r"(\d+) of (\d+) steps? done", text):
                done, total = int(m.group(1)), int(m.group(2))
                assert total == plan.total_steps and done <= total, (name, section.title, m.group(0))
            for m in re.finditer(r"\bstep (\d+) of (\d+)", text, re.IGNORECASE):
                assert int(m.group(2)) == plan.total_steps and 1 <= int(m.group(1)) <= plan.total_steps


def test_the_header_and_the_current_step_agree():
    for name, plan in SHIPPED.items():
        for section in SECTIONS[name]:
            m = re.search(r"^\[WORKFLOW: [^\]]+\] step (\d+) of \d+", section.text)
            current = re.search(r"^Current step: (.+?)(?: \(attempt|$)", section.text, re.MULTILINE)
            if m and current:
                assert plan.nodes[plan.success_path[int(m.group(1)) - 1]].name == current.group(1), section.title


def test_attempts_are_counted_one_way():
    for name, sections in SECTIONS.items():
        for section in sections:
            for m in re.finditer(r"attempt (\d+) of (\d+)", section.text):
                assert 1 <= int(m.group(1)) <= int(m.group(2)), (name, section.title)
            assert "retry" not in section.text.lower(), (name, section.title)  # one word: attempt


@pytest.mark.parametrize("word", ["step", "attempt", "turn", "main step"])
def test_plurals_are_right(word):
    for name, sections in SECTIONS.items():
        for section in sections:
            assert not re.search(rf"(?<![\d.])1 {word}s\b", section.text), (name, section.title)
            assert not re.search(rf"\b(0|[2-9]|\d\d+) {word}\b(?!s)", section.text), (name, section.title)


@pytest.mark.parametrize("count, word, said", [(1, "branch", "1 branch"), (2, "branch", "2 branches"),
                                               (0, "step", "0 steps"), (3, "pass", "3 passes")])
def test_plural_adds_es_after_a_hissing_sound(count, word, said):
    assert render.plural(count, word) == said


def test_log_lines_count_steps_the_same_way():
    from scenario import FixtureModel, message_for
    from graph_engine.tools.standin import Session, cmd
    for plan_id in ("bugfix_workflow", "git_feature_branch"):
        s = Session()
        s.user(message_for(plan_id))
        s.run_pass(cmd("pwd", "/root"))
        model = FixtureModel(plan_id)
        for _ in range(30):
            if s.state is None:
                break
            if not s.monologue_open:
                s.user("go on")
            s.run_pass(model)
        total = SHIPPED[plan_id].total_steps
        lines = s.log.texts()
        assert any(f"{total} of {total} steps done" in line for line in lines), lines
        assert not any(re.search(r"\d+/\d+", line) for line in lines), lines


# ── size ────────────────────────────────────────────────────────────────────


def test_each_text_stays_within_its_budget():
    for name, sections in SECTIONS.items():
        for section in sections:
            assert len(section.text) <= STEP_BUDGET, (name, section.title, len(section.text))


def test_a_switch_stays_within_the_call_budget():
    longest_notice = max(len(s.text) for sections in SECTIONS.values() for s in sections
                         if s.text.startswith(("[WORKFLOW ENDED", "[WORKFLOW WITHDRAWN", "[WORKFLOW EXPIRED")))
    longest_step = max(len(s.text) for sections in SECTIONS.values() for s in sections)
    assert longest_notice + 2 + longest_step <= CALL_BUDGET
