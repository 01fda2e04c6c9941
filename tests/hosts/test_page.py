"""Nothing a plan, a tool result or a model says becomes markup in Agent-Zero's web UI (host/page.py).

Each place a text lands is modelled here as Agent-Zero's web UI treats it (v1.7 ``webui/js/messages.js`` and
``webui/index.js``; v0.9.8.2 the same for the item types the pack uses): a standalone message's title
(``h4.innerHTML = convertIcons(escapeHTML(heading))``), a process step's title (``cleanStepTitle``, then
``textContent``), a key of the table (``convertIcons``, then ``innerHTML`` when it changed), a value of the table
(``img://...`` becomes an image), and the progress bar (``innerHTML = convertIcons(progress)``, the heading of the
newest item that feeds it).  The generated tests put hostile text in every field of a plan and in the tool's output,
run it through both hook files in the stand-in, and read every item of Agent-Zero's log through those models.
"""

import importlib.util
import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenario import IDLE, use_library

from graph_engine.hosts.agent_zero import adapter, page
from graph_engine.texts import view as component
from graph_engine.tools.demo import cards
from graph_engine.tools.standin import ROOT, Agent, Log, Session, cmd, install_framework

# ── the web UI's treatment of a text, per place ─────────────────────────────

ICON = re.compile(r"icon://([a-zA-Z0-9_]+)(\[(?:\\.|[^\]])*\])?")  # convertIcons: icon://name[tooltip]
ESCAPED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&#39;", '"': "&quot;"}  # escapeHTML
FIRST_PROGRESS = "Waiting for input"  # Log.set_initial_progress


class Parsed(HTMLParser):
    """What a browser builds from an HTML fragment: the elements, and the text a person reads."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list]] = []
        self.parts: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, attrs))

    def handle_data(self, data):
        self.parts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def escape_html(text: str) -> str:
    return re.sub(r"[&<>'\"]", lambda m: ESCAPED[m.group(0)], text)


def convert_icons(text: str) -> str:
    return ICON.sub(lambda m: f'<span class="icon material-symbols-outlined">{m.group(1)}</span>', text)


def standalone_title(heading: str) -> Parsed:
    """A hint's, an error's or the card's title (drawMessageDefault)."""
    return Parsed(convert_icons(escape_html(heading)))


def step_title(heading: str) -> str:
    """A process step's title (info, util, a warning in a group): cleanStepTitle, then textContent."""
    return " ".join(re.sub(r"icon://[a-zA-Z0-9_]+(\[(?:\\.|[^\]])*\])?\s*", "", heading).split())


def key_cell(key: str) -> Parsed:
    converted = convert_icons(key)
    return Parsed(converted) if converted != key else Parsed(escape_html(key))


def value_cells(value) -> list[Parsed]:
    """drawKvpsIncremental's addValue, for a value or each item of a list."""
    out = []
    for v in value if isinstance(value, list) else [value]:
        if isinstance(v, str) and v.startswith("img://"):
            out.append(Parsed(f'<img src="/api/image_get?path={escape_html(v[6:])}">'))
        else:
            out.append(Parsed(escape_html(v if isinstance(v, str) else json.dumps(v, indent=2))))
    return out


def seen(text: str) -> str:
    """What the person reads: the word joiner page.py puts after icon: and img: is invisible."""
    return text.replace(page.JOINER, "")


# ── hostile texts ───────────────────────────────────────────────────────────

HOSTILE = ['Evil <img src=x onerror="window.__xss=1">', "<script>window.__xss=1</script>", "icon://bug_report",
           "icon://close[<b>tip</b>]", "img://../../etc/passwd", "&lt;b&gt; &amp;", "\u202eevil\u202c",
           "![x](http://127.0.0.1:9/x)", "<svg onload=alert(1)>", "'\"&<>", "icon://", "img://x"]
FRAGMENT = st.sampled_from(HOSTILE) | st.text(max_size=12)
TEXT = st.lists(FRAGMENT, min_size=1, max_size=3).map(lambda parts: "".join(parts).strip()).filter(bool)


# ── each place, for any text ────────────────────────────────────────────────


@given(text=TEXT | st.text())
def test_a_heading_or_key_is_shown_as_the_text_it_is(text):
    sent = page.text(text)
    title = standalone_title(sent)
    assert title.elements == [] and seen(title.text) == seen(text)
    assert step_title(sent) == " ".join(sent.split())  # the title keeps every word (icon:// is not removed)
    key = key_cell(sent)
    assert key.elements == [] and seen(key.text) == seen(text)


@given(value=TEXT | st.text() | st.lists(TEXT | st.text(), max_size=3))
def test_a_value_is_shown_as_the_text_it_is(value):
    sent = page.value(value)
    cells = value_cells(sent)
    assert all(c.elements == [] for c in cells)
    assert [seen(c.text) for c in cells] == [seen(v) for v in (value if isinstance(value, list) else [value])]


def test_without_page_the_places_make_markup_of_such_text():
    """The models above are the web UI's: raw text of these shapes becomes an icon, an image, a tag."""
    assert standalone_title("icon://bug_report").elements == [("span", [("class", "icon material-symbols-outlined")])]
    assert step_title("Run icon://bug_report now") == "Run now"
    assert value_cells("img://../../etc/passwd")[0].elements[0][0] == "img"
    assert Parsed(convert_icons(HOSTILE[0])).elements[0] == ("img", [("src", "x"), ("onerror", "window.__xss=1")])


def test_page_never_feeds_the_progress_bar_also_for_an_item_restored_with_the_chat():
    log = Log()
    item = page.log(log, "info", HOSTILE[0], HOSTILE[0], {"Plan": HOSTILE[0]})
    assert item.update_progress == "none" and log.progress == FIRST_PROGRESS
    restored = log.restored()  # Agent-Zero rebuilds items from chat.json: they feed the progress bar again
    again = restored.logs[0]
    assert again.update_progress == "persistent"
    page.update(again, heading=HOSTILE[2], Plan=HOSTILE[4])
    assert again.update_progress == "none" and restored.progress == FIRST_PROGRESS
    assert again.heading == f"icon:{page.JOINER}//bug_report"
    assert again.kvps["Plan"] == f"img:{page.JOINER}//../../etc/passwd"
    plain = Log()
    plain.log(type="info", heading=HOSTILE[0])  # an Agent-Zero item of its own: its heading is the bar's HTML
    assert Parsed(convert_icons(plain.progress)).elements[0][0] == "img"


# ── every field of a plan and the tool's output, through both hook files ────


def hostile_plan(t: dict) -> dict:
    return {"name": t["plan"], "description": t["description"], "triggers": ["run the hostile checks"],
            "trigger_threshold": 1, "graph": {
                "start": "start",
                "nodes": {"start": {"type": "start"},
                          "find": {"type": "task", "name": t["first"], "description": t["description"],
                                   "action": "look", "tool_hint": t["hint"],
                                   "verify": {"type": "output_matches", "value": "found .+",
                                              "capture": "found (?P<thing>.+)", "describe": t["describe"]}},
                          "check": {"type": "task", "name": t["second"], "action": "check", "max_retries": 0,
                                    "verify": {"type": "exit_code_zero"}},
                          "done": {"type": "exit"},
                          "stuck": {"type": "escalate", "reason": t["reason"]}},
                "edges": [{"from": "start", "to": "find"},
                          {"from": "find", "to": "check", "condition": "on_success", "label": t["label"]},
                          {"from": "find", "to": "stuck", "condition": "on_exhaust"},
                          {"from": "check", "to": "done", "condition": "on_success"},
                          {"from": "check", "to": "stuck", "condition": "on_exhaust"}]}}


def run_hostile(monkeypatch, tmp_path, t: dict, layout: str) -> tuple[Session, list]:
    """The hostile plan started, its first step passed on the hostile output, its second failed: escalated."""
    use_library(monkeypatch, tmp_path, {"hostile": hostile_plan(t)})
    adapter._runtimes.clear()  # this example's library, read afresh
    s = Session(layout=layout)
    s.user("run the hostile checks")
    records = [s.run_pass(cmd("look", f"found {t['output']}")), s.run_pass(cmd("check", "broken\n[exit:1]")),
               s.run_pass(IDLE)]
    return s, records


def assert_text_for_its_place(item) -> None:
    assert item.update_progress == "none"
    assert standalone_title(item.heading).elements == []
    assert step_title(item.heading) == " ".join(item.heading.split())
    for key, value in (item.kvps or {}).items():
        assert key_cell(key).elements == []
        assert all(c.elements == [] for c in value_cells(value))


FIELDS = st.fixed_dictionaries({k: TEXT for k in ("plan", "description", "first", "second", "hint", "describe",
                                                   "reason", "label", "output")})


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(t=FIELDS, layout=st.sampled_from(["new", "old"]))
def test_hostile_text_in_every_field_reaches_the_log_as_text_for_its_place(monkeypatch, tmp_path, t, layout):
    s, records = run_hostile(monkeypatch, tmp_path, t, layout)
    assert s.log.logs and [e for e in s.log.texts("error")] == []
    for item in s.log.logs:
        assert_text_for_its_place(item)
    assert s.log.progress == FIRST_PROGRESS  # no heading of the pack's ever became the progress bar's HTML
    card = cards(s.log)[-1]
    assert seen(card.kvps["Plan"]) == seen(t["plan"]) and card.kvps["Status"] == "escalated"
    shown = seen(card.heading)
    assert seen(f"Workflow: {t['plan']}: ").startswith(shown) or shown.startswith(seen(f"Workflow: {t['plan']}: "))
    assert f"2. {t['second']}" in card.content  # the text, not escaped: the web UI escapes it
    if layout == "new":  # the component's data: drawn with textContent, so the exact text
        assert json.loads("".join(card.kvps[component.KEY]))["plan"] == t["plan"]  # (the drawing, in chunks)
    escalated = [i.content for i in s.log.logs if i.content.startswith("[HTN] Workflow") and "escalated" in i.content]
    assert escalated and t["plan"] in escalated[0] and " ".join(t["reason"].split()) in " ".join(escalated[0].split())
    told = records[0].prompt_extras.get("htn_active_plan", "")  # what the model reads: never encoded for a page
    assert t["plan"] in told and t["first"] in told


def test_the_issue_s_plan_name_never_reaches_the_progress_bar(monkeypatch, tmp_path):
    """Issue 48: a plan named this set window.__xss through the progress bar's innerHTML."""
    name = 'Evil <img src=x onerror="window.__xss=1">'
    t = dict.fromkeys(("description", "first", "second", "hint", "describe", "reason", "label", "output"), "x")
    s, _ = run_hostile(monkeypatch, tmp_path, {**t, "plan": name}, "new")
    assert any(name in i.heading for i in s.log.logs)
    assert s.log.progress == FIRST_PROGRESS and all(i.update_progress == "none" for i in s.log.logs)


HOOKS = ["agent_init/_90_graph_engine_warm_up.py", "before_main_llm_call/_15_htn_plan_selector.py",
         "message_loop_prompts_after/_75_graph_workflow_context.py"]


def from_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("hook", HOOKS)
def test_a_hook_file_that_finds_no_loader_warns_without_feeding_the_progress_bar(hook, tmp_path, monkeypatch):
    install_framework("new")
    copy = tmp_path / "python" / hook  # no graph_engine_loader.py beside its folder: an incomplete install
    copy.parent.mkdir(parents=True)
    shutil.copy(ROOT / "extensions" / "python" / hook, copy)
    monkeypatch.delitem(sys.modules, "graph_engine_loader", raising=False)
    agent = Agent()
    assert from_file(copy, "hostile_page_hook")._loader(agent) is None
    [item] = agent.context.log.logs
    assert "Workflow engine not loaded" in item.content and item.update_progress == "none"
    assert agent.context.log.progress == FIRST_PROGRESS


def test_the_loader_s_warning_does_not_feed_the_progress_bar():
    loader = from_file(ROOT / "extensions" / "python" / "graph_engine_loader.py", "hostile_page_loader")
    agent = Agent()
    loader.warn_once(agent, "[HTN] Workflow engine not loaded: <img src=x onerror=1>")
    [item] = agent.context.log.logs
    assert item.update_progress == "none" and agent.context.log.progress == FIRST_PROGRESS
