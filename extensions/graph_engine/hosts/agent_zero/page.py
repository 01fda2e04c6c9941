"""Text for the place it lands in Agent-Zero's web UI.

Everything the pack hands to Agent-Zero's log (a log line's heading and text, the workflow card's heading, text and
key-value table) is plain text: a plan's name, a step's name, a check's reason or a tool's output may hold ``<``,
``&``, ``icon://`` or anything else, and the person must see exactly that, never markup made of it.  What each
place does with what it is sent (Agent-Zero v1.7's ``webui/js/messages.js`` and ``webui/index.js``; v0.9.8.2's
draw the item types the pack uses the same way), and what the pack therefore sends:

- a heading, as the progress bar: ``#progress-bar.innerHTML = convertIcons(heading)`` (v1.7 also shows it, tags
  stripped, as the input's placeholder): HTML.  Sent nothing: every item is ``update_progress="none"``.
- a heading, as a standalone message's title (hint, error, a warning outside a process group, and the card, drawn
  by ``drawMessageDefault`` under the component or as an unknown type): ``h4.innerHTML =
  convertIcons(escapeHTML(heading))``, text in which ``icon://name`` becomes an icon; as a process step's title
  (info, util, a warning in a group): ``cleanStepTitle`` (which deletes ``icon://name``), then ``textContent``.
  Sent the text, ``icon://`` kept from matching.
- the content: ``escapeHTML``, paths made links, ``innerHTML``: text (no type the pack uses is drawn as markdown).
  Sent the text.
- a key of the table: ``convertIcons(key)``, and when that changed it ``th.innerHTML``: HTML.  Sent the text,
  ``icon://`` kept from matching.
- a value of the table: a string starting ``img://`` becomes an ``<img>`` that loads that path from the server;
  any other is escaped: text.  Sent the text, a leading ``img://`` kept from matching.
- the component's data (``graph``, ``graph_run``): drawn with ``textContent`` and ``setAttribute`` only.  Sent
  the text, in JSON.

So nothing is HTML-escaped here: every place but the progress bar escapes for itself, and escaping once more
would show ``&lt;`` to the person.  The progress bar is the one place that reads a heading as HTML, and its one
text is also used as plain text (v1.7's placeholder), so no encoding suits both: the pack's items never feed it
(``update_progress`` is a keyword of ``Log.log`` and ``LogItem.update`` in both versions; an item Agent-Zero
restores with a chat feeds it by default, so every update says it again).  ``icon://`` and a leading ``img://``
are kept from matching by a WORD JOINER (U+2060: invisible, no line break) after the colon, so the person reads
the same characters.  The text the model reads never passes here.  Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

JOINER = "\u2060"  # WORD JOINER: invisible, keeps Agent-Zero's icon:// and img:// syntax from matching
NO_PROGRESS = "none"  # Agent-Zero's update_progress value: the item's heading does not become the progress bar


def text(value: str) -> str:
    """A heading or a key, shown as text: ``icon://name`` does not become an icon (nor vanish from a title)."""
    return value.replace("icon://", f"icon:{JOINER}//") if "icon://" in value else value


def value(item: Any) -> Any:
    """A key-value table's value, shown as text: a string starting ``img://`` does not become an image (a list's
    items each); any other value as it is (Agent-Zero escapes it, or draws it as JSON, which it escapes)."""
    if isinstance(item, str):
        return f"img:{JOINER}//{item[6:]}" if item.startswith("img://") else item
    if isinstance(item, list):
        return [value(v) for v in item]
    return item


def table(kvps: dict) -> dict:
    """A key-value table, each key and value shown as text."""
    return {text(str(k)): value(v) for k, v in kvps.items()}


def log(target: Any, type: str, heading: str, content: str, kvps: dict | None = None) -> Any:
    """A new item of ``target`` (Agent-Zero's ``context.log``) showing these texts as text; the item."""
    return target.log(type=type, heading=text(heading), content=content,
                      kvps=table(kvps) if kvps is not None else None, update_progress=NO_PROGRESS)


def update(item: Any, type: str | None = None, heading: str | None = None, content: str | None = None,
           kvps: dict | None = None, **pairs: Any) -> None:
    """Change an item in place (``None``: unchanged; ``pairs``: values merged into its table), as text."""
    item.update(type=type, heading=text(heading) if heading is not None else None, content=content,
                kvps=table(kvps) if kvps is not None else None, update_progress=NO_PROGRESS,
                **{text(k): value(v) for k, v in pairs.items()})
