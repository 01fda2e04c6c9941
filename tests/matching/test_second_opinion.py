"""A second opinion from Agent-Zero's utility model for what local matching cannot settle: another language, a
close call, a plan it was never taught; at most one question per message, never for what it is sure of; a
timeout, an exception or an answer that is not a label leaves the local decision, with one line saying why."""

import asyncio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenario import crash, ready, told, use_library
from test_meaning import RELEASE

from graph_engine.matching import second
from graph_engine.tools.standin import Reply, Session, UtilityModel

GERMAN = "Bitte behebe den Fehler in der Datei rechner.py, sie stürzt bei einer Division durch null ab"
CLOSE = "gimme a java class Matrix with add, multiply, transpose"  # the local stage is not sure of it


def picks(label):
    return lambda system, message: label


def test_a_request_in_another_language_starts_its_plan_through_the_utility_model():
    model = UtilityModel(picks("bugfix_workflow"))
    s = ready(Session(utility=model))
    s.user(GERMAN)
    first = s.run_pass(crash())
    assert told(first).startswith("[WORKFLOW: Bug Fix Workflow] step 1 of 5")  # in the first call already
    assert len(model.calls) == 1  # one question for the message, though both hooks saw it
    system, body = model.calls[0]
    assert "one label" in system and GERMAN in body and "- none:" in body
    assert body.count("\n- ") == 11  # every plan the agent may run, and none
    activated = next(e for e in s.state["events"] if e["type"] == "plan_activated")
    assert activated["stage"] == "utility model" and activated["cost_ms"] >= 0
    line = next(t for t in s.log.texts("info") if "Graph plan activated" in t)
    assert "chosen by the utility model" in line
    assert any("utility model was asked" in t and "another language" in t for t in s.log.texts("info"))


def test_its_none_starts_nothing_and_the_next_pass_does_not_ask_again():
    model = UtilityModel(picks("none"))
    s = ready(Session(utility=model))
    s.user("Ich habe den Bug gestern schon behoben, danke")
    s.run_pass(Reply(tool="code_execution_tool", code="ls", output="a.py"))
    s.run_pass(Reply(final="ok"))
    assert s.state is None and len(model.calls) == 1


def test_a_close_call_is_settled_by_it():
    model = UtilityModel(picks("codegen_module"))
    s = ready(Session(utility=model))
    s.user(CLOSE)
    s.run_pass(Reply(final="..."))
    assert s.state is not None and s.state["plan_id"] == "codegen_module"
    assert len(model.calls) == 1 and "a close call" in next(t for t in s.log.texts("info") if "utility model" in t)


@pytest.mark.parametrize("model, said", [
    (UtilityModel("bugfix_workflow", delay=2.0), "no answer within 0.05 s"),
    (UtilityModel(fail=RuntimeError("rate limited")), "RuntimeError: 'rate limited'"),
    (UtilityModel(fail=asyncio.CancelledError("provider gave up")), "CancelledError raised inside its call"),
    (UtilityModel("I think it is probably the bug one"), "is not one of the labels"),
    (UtilityModel(12345), "is not one of the labels"),
    (UtilityModel("unknown_plan"), "is not one of the labels"),
], ids=["timeout", "exception", "provider's CancelledError", "prose", "not text", "no such label"])
def test_no_usable_answer_leaves_the_local_decision(model, said, monkeypatch):
    monkeypatch.setenv("GRAPH_ENGINE_UTILITY_TIMEOUT", "0.05")
    s = ready(Session(utility=model))
    s.user(GERMAN)
    s.run_pass(Reply(final="..."))
    assert s.state is None  # the local stage cannot read it: nothing starts
    lines = [t for t in s.log.texts("warning") if "utility model" in t]
    assert len(lines) == 1 and said in lines[0] and "matching's own decision stands: no workflow" in lines[0]
    s.user("fix the bug in /tmp/test.py")  # phrases decide: no question
    s.run_pass(crash())
    assert s.state["plan_id"] == "bugfix_workflow" and len(model.calls) == 1


@pytest.mark.parametrize("message", ["stop the workflow", "hi there!", "thanks, that's all", "fix the bug in a.py",
                                     "what does git rebase do?"])
def test_never_asked_about_a_control_small_talk_or_what_phrases_decide(message):
    model = UtilityModel(picks("none"))
    s = ready(Session(utility=model))
    s.user(message)
    s.run_pass(Reply(final="..."))
    assert model.calls == []


def test_never_asked_about_a_go_on_to_a_running_workflow_or_a_tool_result():
    model = UtilityModel(picks("none"))
    s = ready(Session(utility=model))
    s.user("fix the bug in /tmp/test.py")
    s.run_pass(crash())
    s.run_pass(Reply(tool="code_execution_tool", code="cat a.py", output="x = 1/0"))
    s.user("ok, continue")
    s.run_pass(Reply(final="..."))
    assert model.calls == [] and s.state["plan_id"] == "bugfix_workflow"


def _with_release_plan(monkeypatch, tmp_path):
    """The shipped library and a user's plan written without examples (a Python release)."""
    import json
    from graph_engine.tools.standin import LIBRARY
    use_library(monkeypatch, tmp_path, {**json.loads(LIBRARY.read_text())["plans"], "python_release": RELEASE})


@pytest.mark.parametrize("answer, plan", [("python_release", "python_release"), ("none", None)])
def test_a_plan_without_examples_starts_only_when_the_utility_model_agrees(answer, plan, monkeypatch, tmp_path):
    """Its own text tells its job, not where the job ends: a start of it by meaning or by weak phrases is asked
    about, with every plan listed (library order), and the answer decides."""
    _with_release_plan(monkeypatch, tmp_path)
    model = UtilityModel(picks(answer))
    s = ready(Session(utility=model))
    s.user("the 1.4 release of mylib is due, push it out to the package index")
    s.run_pass(Reply(final="..."))
    assert len(model.calls) == 1
    _, body = model.calls[0]
    listed = [line.split(":")[0][2:] for line in body.splitlines() if line.startswith("- ")]
    assert listed[-2:] == ["python_release", "none"] and listed[0] == "bugfix_workflow" and len(listed) == 12
    assert (s.state or {}).get("plan_id") == plan
    assert any("a workflow without examples would start" in t for t in s.log.texts("info"))


def test_a_taught_plan_started_by_its_phrases_is_not_asked_about_beside_a_plan_without_examples(monkeypatch,
                                                                                                  tmp_path):
    _with_release_plan(monkeypatch, tmp_path)
    model = UtilityModel(picks("none"))
    s = ready(Session(utility=model))
    s.user("fix the bug in /tmp/test.py")
    s.run_pass(crash())
    assert model.calls == [] and s.state["plan_id"] == "bugfix_workflow"


def test_off_by_setting(monkeypatch):
    monkeypatch.setenv("GRAPH_ENGINE_UTILITY_MODEL", "off")
    model = UtilityModel(picks("bugfix_workflow"))
    s = ready(Session(utility=model))
    s.user(GERMAN)
    s.run_pass(Reply(final="..."))
    assert model.calls == [] and s.state is None


@pytest.mark.parametrize("text", [GERMAN, "Arregla el error en pagos.py, por favor, se cae al pagar",
                                  "Corrige le bug dans le module de paiement, s'il te plaît",
                                  "Já fiz o merge da branch de pagamentos ontem.", "请帮我修复 app.py 里的错误",
                                  # Portuguese whose function words are English ones too ("a", "do", "no", "as")
                                  "Faça a migração do banco no servidor", "Roda os testes do projeto",
                                  "Atualiza a branch com a main", "Revisa o pull request", "Sistema a bug nel login",
                                  "Можешь исправить ошибку в app.py?"])
def test_other_languages_are_told_apart(text):
    assert not second.reads_as_english(text)


@pytest.mark.parametrize("text", ["fix the bug in /tmp/test.py", "der_bug.py crashes, fix it",
                                  "merge die-branch into main", "ZeroDivisionError in calc.py",
                                  "ok", "", "```python\nx = 1 / 0\n```", "Do a backup of the users DB",
                                  "merge as soon as possible", "no, fix the login bug instead",
                                  "fix the résumé parser bug", "Was the build green? If not, fix it"])
def test_english_is_read_locally(text):
    assert second.reads_as_english(text)


@pytest.mark.parametrize("reply, label", [("bugfix_workflow", "bugfix_workflow"), ("  `bugfix_workflow`. ", "bugfix_workflow"),
                                          ("Label: none", "none"), ('"BUGFIX_WORKFLOW"', "bugfix_workflow"),
                                          ("none.", "none"), ("bugfix_workflow\nbecause it is a bug", None),
                                          ("the bugfix_workflow", None), ("", None), (None, None)])
def test_an_answer_is_one_label_alone(reply, label):
    assert second.answer(reply, ["bugfix_workflow", "git_merge_pr"]) == label


@given(st.one_of(st.text(max_size=400), st.none(), st.integers(), st.lists(st.text(max_size=5))))
@settings(max_examples=150, deadline=None)
def test_any_answer_is_a_label_or_nothing(reply):
    assert second.answer(reply, ["a_plan", "b_plan"]) in (None, "none", "a_plan", "b_plan")


@given(st.text(max_size=3000))
@settings(max_examples=100, deadline=None)
def test_any_message_makes_a_bounded_question(message):
    system, body = second.question([("a_plan", "A plan", "Does a thing. More."), ("b_plan", "B", "")], message)
    assert len(body) < 3000 and body.endswith("Label:") and "- none:" in body



def test_a_stop_of_the_pass_while_the_utility_model_answers_still_ends_the_pass():
    """Only the cancellation of the pass itself propagates (Agent-Zero's stop while the utility model answers); a
    CancelledError its provider raises is a failed answer (the case above)."""
    from types import SimpleNamespace

    from graph_engine.session import asking

    agent = SimpleNamespace(call_utility_model=UtilityModel("bugfix_workflow", delay=5.0))
    q = asking.Question("m1", "a close call", "system", "body", ("bugfix_workflow", "none"), None, lambda pid: None,
                        None)
    lines = []

    async def stopped() -> None:
        task = asyncio.ensure_future(asking.ask(agent, q, 10.0, lambda level, text: lines.append(text)))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(stopped())
    assert lines == []  # no fallback line: the pass ended
