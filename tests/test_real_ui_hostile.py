"""Nothing a plan, a tool result or a model says runs in Agent-Zero's real web UI (issue 48).

A plan whose every field holds hostile text (markup that would run script or load a URL, Agent-Zero's icon:// and
img:// syntax, a markdown image, direction controls) runs in v1.7's own run_ui.py, the pack installed by its
installer in both forms, the model scripted (tests/a0ui.py), in headless Chromium: its first step passes on a
tool result that holds HTML, its second fails, and the run escalates with a hostile reason.  A MutationObserver
installed before the page's own scripts records every element added anywhere in the page; no element may come
from the hostile text, no script may run, no request may go to a hostile URL, and the plan's name must be shown as
the text it is.  A screenshot goes to ``$GRAPH_ENGINE_UI_SHOTS`` (default build/ui-shots).  Run with
``make real-ui A0_TREES=DIR``; skipped with one line when there is no tree, no Chromium or no Playwright.
"""

from __future__ import annotations

import json
import re
import time

from a0real import respond, terminal
from test_real_ui import SHOTS, UI, browser, open_chat, pytestmark, send, tree, wait_for  # noqa: F401 (fixtures)

MARK = "evilprobe"  # every URL and icon of the hostile texts carries this word; every script sets __xss
IMG = f'<img src="/{MARK}-img" onerror="window.__xss=1">'
SCRIPT = "<script>window.__xss=2</script>"
SVG = f'<svg onload="window.__xss=3"><image href="/{MARK}-svg"></image></svg>'
ICON = f"icon://{MARK}_icon"
PICTURE = f"img:///{MARK}-kvp"
MARKDOWN = f"![x](/{MARK}-md)"
BIDI = "\u202e"
NAME = f"Evil {IMG} {ICON} {BIDI}plan"


def hostile(word: str) -> str:
    return f"{word} {SCRIPT} {SVG} {ICON} {MARKDOWN} {BIDI}{word}"


def hostile_plan(folder) -> dict:
    return {"name": NAME, "description": hostile("A plan"), "triggers": ["run the hostile checks"],
            "trigger_threshold": 1, "graph": {
                "start": "start",
                "nodes": {"start": {"type": "start"},
                          "find": {"type": "task", "name": f"{PICTURE} {hostile('Find')}",
                                   "description": hostile("Find it"), "action": f"cat {folder}/found.txt",
                                   "tool_hint": f"cat {folder}/found.txt # {IMG}",
                                   "verify": {"type": "output_matches", "value": "found",
                                              "capture": "found (?P<thing>.+)", "describe": hostile("it is found")}},
                          "check": {"type": "task", "name": hostile("Check"), "description": hostile("Check it"),
                                    "action": f"sh {folder}/check.sh", "tool_hint": f"sh {folder}/check.sh",
                                    "max_retries": 0, "verify": {"type": "exit_code_zero"}},
                          "done": {"type": "exit", "name": hostile("Done")},
                          "stuck": {"type": "escalate", "name": hostile("Stuck"),
                                    "reason": f"{PICTURE} {IMG} {hostile('the check failed')}"}},
                "edges": [{"from": "start", "to": "find"},
                          {"from": "find", "to": "check", "condition": "on_success", "label": hostile("Found")},
                          {"from": "find", "to": "stuck", "condition": "on_exhaust", "label": hostile("Lost")},
                          {"from": "check", "to": "done", "condition": "on_success", "label": IMG},
                          {"from": "check", "to": "stuck", "condition": "on_exhaust", "label": hostile("Broken")}]}}


WATCH = """
window.__added = [];
new MutationObserver((records) => {
  for (const r of records) {
    for (const n of r.addedNodes) {
      if (n.nodeType !== 1) continue;
      for (const e of [n, ...n.querySelectorAll('*')]) {
        window.__added.push({tag: e.tagName.toLowerCase(), cls: String(e.className?.baseVal ?? e.className ?? ''),
                             text: e.tagName === 'SCRIPT' || e.classList?.contains('material-symbols-outlined')
                                   ? e.textContent : '',
                             attrs: [...e.attributes].map(a => [a.name, a.value])});
      }
    }
    if (r.type === 'attributes' && r.target.nodeType === 1) {
      const a = r.attributeName;
      window.__added.push({tag: r.target.tagName.toLowerCase(), cls: '', text: '',
                           attrs: [[a, r.target.getAttribute(a) || '']]});
    }
  }
}).observe(document, {childList: true, subtree: true, attributes: true});
"""
# an attribute that loads, links or runs what it holds; text attributes (aria-label, title, data-say) hold text
ACTIVE = ("src", "href", "xlink:href", "srcset", "srcdoc", "action", "formaction", "style", "poster", "data")


PATH_LINK = re.compile(r"openFileLink\('[a-zA-Z0-9_/.\-]*'\);")


def path_link(e: dict) -> bool:
    """Agent-Zero's own link of a path written in a text (convertPathsToLinks, on every text it shows: a tool's
    output too): a click opens its file browser there; the path's characters cannot leave the quotes."""
    attrs = dict(e["attrs"])
    return e["tag"] == "a" and attrs.get("class") == "path-link" and attrs.get("href") == "#" and \
        bool(PATH_LINK.fullmatch(attrs.get("onclick", ""))) and set(attrs) == {"class", "href", "onclick"}


def injected(added: list[dict]) -> list[dict]:
    """The elements made of the hostile texts: a script holding their code, an icon of their name, an element
    with an event handler or an attribute that loads or links what they hold (but Agent-Zero's path links)."""
    out = []
    for e in added:
        if path_link(e):
            continue
        if e["tag"] == "script" and "__xss" in e["text"]:
            out.append(e)
        elif "material-symbols" in e["cls"] and MARK in e["text"]:
            out.append(e)
        elif any(name.startswith("on") and ("__xss" in value or MARK in value)
                 or name in ACTIVE and (MARK in value or "__xss" in value) for name, value in e["attrs"]):
            out.append(e)
    return out


class InContext:
    """A browser whose new pages open in one context (open_chat opens its page with browser.new_page)."""

    def __init__(self, context) -> None:
        self.context = context

    def new_page(self, **_):
        return self.context.new_page()


def test_hostile_text_in_every_field_is_shown_as_text_and_nothing_runs(tree, browser, tmp_path, request):
    folder = tree.root / "usr" / "workdir" / "hostile"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "found.txt").write_text(f"found {IMG} {SCRIPT} {SVG} {ICON} {MARKDOWN} {PICTURE} {BIDI}thing\n")
    (folder / "check.sh").write_text(f"echo '{IMG} {SCRIPT} {ICON}'\nexit 1\n")
    library = tmp_path / "hostile.json"
    library.write_text(json.dumps({"_meta": {"version": "2.0"}, "plans": {"hostile": hostile_plan(folder)}}))
    replies = [terminal(f"cat {folder}/found.txt", "Look"),
               terminal(f'sh {folder}/check.sh; echo "[exit:$?]"', "Check"),
               respond("The check failed, so the workflow stopped and asks for help.")]
    ui = UI(tree, replies, tmp_path, env={"GRAPH_ENGINE_LIBRARY": str(library)})
    requests: list[str] = []
    try:
        watched = browser.new_context(viewport={"width": 1280, "height": 1100})
        watched.add_init_script(WATCH)  # before the page's own scripts: every element it ever adds
        watched.on("request", lambda r: requests.append(r.url))
        page, errors = open_chat(InContext(watched), ui)
        send(page, f"run the hostile checks in {folder}")
        escalated = wait_for(page, lambda c: c["status"] == "escalated", "the run escalated", timeout=120)
        page.wait_for_selector("text=The check failed, so the workflow stopped and asks for help.", timeout=60_000)
        time.sleep(2)  # the last updates drawn
        SHOTS.mkdir(parents=True, exist_ok=True)
        shot = SHOTS / f"{request.node.callspec.params['tree']}-hostile.png"
        page.locator(".graph-workflow").last.scroll_into_view_if_needed(timeout=5_000)
        page.screenshot(path=str(shot), full_page=False)
        added = page.evaluate("() => window.__added")
        assert len(added) > 100  # the observer saw the page being built
        assert injected(added) == []
        assert page.evaluate("() => window.__xss") is None
        assert page.evaluate("""() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]
                                   .filter(a => a.name === 'onerror' || a.name === 'onload').map(a => a.name))""") == []
        assert any(u.startswith(ui.url) for u in requests)  # the requests were seen
        assert [u for u in requests if MARK in u] == []
        assert escalated["plan"] == NAME  # the component's name: the exact text
        assert "escalated" in escalated["text"] and SCRIPT in escalated["text"]  # the card's text, as text
        heading = page.evaluate("""() => [...document.querySelectorAll('.msg-heading h4')]
                                   .map(h => h.textContent.replaceAll('\\u2060', ''))""")
        assert any(h.startswith(f"Workflow: {NAME}"[:100]) for h in heading), heading
        titles = page.evaluate("() => [...document.querySelectorAll('.step-title')].map(t => t.textContent)")
        assert any(f"activated: {NAME}"[:60] in t for t in titles), titles  # a log line's title, as text
        assert errors == []
    finally:
        ui.close()
