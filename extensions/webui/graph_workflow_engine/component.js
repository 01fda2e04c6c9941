// The workflow component: one per run, in the chat's log item of type "graph_workflow", made from the item's data
// alone (kvps.graph, the plan's drawing in chunks, and kvps.graph_run, the run on it: graph_engine/texts/view.py),
// so it is the same after a reload. Updated in place when the item changes: what has focus keeps it, and the
// line read to screen readers (aria-live) changes only when the run does. From the top: the plan and its status,
// where the run is, the controls (through the plugin's API: control.js), going back to a step done, then the
// graph (graph.js). A plan of FOLD_AT nodes or more shows the steps around the current one, the rest folded.
import { draw, layout, layoutLibrary, metrics } from "./graph.js";
import { answerFor, answerText, controlButtons, disable, onAnswer, pendingControl, pendingLabel, press } from "./control.js";
import { refreshStrip } from "./strip.js";
import { injectStyle } from "./style.js";

export const FOLD_AT = 40;
const MARKS = { c: "current", d: "done", e: "recovered", v: "passed", s: "skipped", f: "failed", r: "reached",
                p: "pending" };
const MARK_TEXT = { current: "current step", done: "done", recovered: "done after a failed check",
                    passed: "passed", failed: "failed", skipped: "skipped", reached: "where the run ended",
                    pending: "not reached", unknown: "mark not sent (only the steps around the current one have theirs)" };
const LEGEND = ["current", "done", "recovered", "passed", "failed", "skipped", "reached", "pending"];
const STYLE = { on_fail: "retry", on_retry: "retry", on_exhaust: "exhaust" };
// a workflow proposed in the chat, before it runs
const PROPOSAL = { proposed: "Workflow proposed, waiting for approval", approved: "Workflow approved",
                   rejected: "Workflow rejected", replaced: "Workflow replaced by a newer proposal" };

// ── the item's data ─────────────────────────────────────────────────────────────────────────────────────────

const drawings = new Map(); // the drawing's JSON -> the drawing read, for the latest few (a pass sends the same)
let drawn = 0;

function drawingOf(value) {
  const text = Array.isArray(value) ? value.join("") : typeof value === "string" ? value : "";
  if (!text) return null;
  let found = drawings.get(text);
  if (!found) {
    const d = JSON.parse(text);
    if (d?.v !== 2 || !Array.isArray(d.nodes) || !Array.isArray(d.edges)) return null;
    const n = d.nodes.length;
    const place = (i) => Number.isInteger(i) && i >= 0 && i < n;
    found = { plan: String(d.plan ?? ""), key: `drawing${++drawn}`,
              nodes: d.nodes.map((node) => {
                const [id, name, kind] = Array.isArray(node) ? node : [];
                return { id: String(id ?? ""), name: String(name ?? ""), kind: String(kind ?? "task") };
              }),
              edges: d.edges.map((e, i) => (Array.isArray(e) ? { a: e[0], b: e[1], cond: String(e[2] ?? ""), i } : null))
                .filter((e) => e && place(e.a) && place(e.b)) };
    found.start = found.nodes.findIndex((n) => n.kind === "start");
    if (drawings.size >= 8) drawings.delete(drawings.keys().next().value);
    drawings.set(text, found);
  }
  return found;
}

// the run on the drawing, or null when either is missing, unreadable or of a version this script does not know
export function parse(kvps) {
  let drawing, run;
  try {
    drawing = drawingOf(kvps?.graph);
    run = JSON.parse(kvps?.graph_run || "null");
  } catch (e) {
    return null;
  }
  if (!drawing || run?.v !== 2 || typeof run.marks !== "string" || !Array.isArray(run.controls)) return null;
  const n = drawing.nodes.length;
  const window = Array.isArray(run.window) ? run.window.filter((i) => Number.isInteger(i) && i >= 0 && i < n) : null;
  let marks;
  if (run.marks.length === n) marks = [...run.marks].map((m) => MARKS[m] || "pending");
  else if (window && run.marks.length === window.length) {
    marks = new Array(n).fill("unknown");
    window.forEach((i, k) => (marks[i] = MARKS[run.marks[k]] || "pending"));
  } else return null;
  const taken = new Set(Array.isArray(run.taken) ? run.taken : []);
  const text = (v) => String(v ?? "");
  const check = run.check && typeof run.check === "object"
    ? { step: text(run.check.step), outcome: text(run.check.outcome), reason: text(run.check.reason) } : null;
  const branches = (Array.isArray(run.branches) ? run.branches : []).filter(Array.isArray).map((b) => b.map(text));
  const source = Array.isArray(kvps?.graph_source) ? kvps.graph_source.map(text).join("") : text(kvps?.graph_source);
  return { ...run, source, run: text(run.run), status: text(run.status), step: text(run.step),
           current: text(run.current),
           attempt: text(run.attempt), pace: text(run.pace), said: text(run.said), picture: text(run.picture),
           done: Number(run.done) || 0, total: Number(run.total) || 0, check, branches,
           plan: drawing.plan, drawing, window, marks, taken,
           controls: run.controls.filter((c) => Array.isArray(c) && c.length >= 4).map(([label, kind, node, words]) =>
             ({ label: String(label), kind: String(kind), node: String(node || ""), words: String(words || "") })) };
}

// ── building and updating ───────────────────────────────────────────────────────────────────────────────────

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c) node.appendChild(c);
  return node;
}

function cap(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}

function statusOf(d) {
  return d.paused && d.status === "active" ? "paused" : d.status;
}

// where the run is, in the words read out when it changes: "Step 3 of 5: Implement the fix", "Workflow stopped"
export function now(d) {
  const status = statusOf(d);
  if (PROPOSAL[status]) return PROPOSAL[status];
  if (status === "active") return d.step ? `${cap(d.step)}: ${d.current}` : d.current ? `At ${d.current}` : "Workflow active";
  if (status === "escalated") return `Workflow escalated to PACE level ${d.pace}`;
  return `Workflow ${status}`;
}

function accessibleName(d) {
  return `${d.plan}, ${statusOf(d)}: ${now(d)}; ${d.done} of ${d.total} steps done`;
}

let ids = 0;

function build(run) {
  injectStyle();
  const uid = `gw${++ids}`;
  const parts = {
    plan: el("h3", { class: "gw-plan", id: `${uid}-plan` }),
    badge: el("span", { class: "gw-badge" }),
    facts: el("div", { class: "gw-facts" }),
    live: el("div", { class: "gw-live gw-visually-hidden", role: "status", "aria-live": "polite" }),
    branches: el("div", { class: "gw-branches", role: "list", "aria-label": "Branches running at once" }),
    check: el("div", { class: "gw-check" }),
    outcome: el("div", { class: "gw-outcome" }),
    controls: el("div", { class: "gw-controls", role: "group", "aria-label": "Steer the workflow" }),
    answer: el("span", { class: "gw-answer", role: "status", "aria-live": "polite" }),
    back: el("div", { class: "gw-back" }),
    select: el("select", { class: "gw-select", id: `${uid}-back` }),
    backButton: el("button", { class: "gw-button gw-back-button", type: "button", text: "Go back" }),
    foldBar: el("div", { class: "gw-fold-bar" }),
    foldText: el("span", { class: "gw-fold-text" }),
    foldButton: el("button", { class: "gw-button gw-fold-button", type: "button" }),
    box: el("div", { class: "gw-graph-box" }),
    note: el("div", { class: "gw-note" }),
    legend: el("ul", { class: "gw-legend", "aria-label": "What the marks mean" }),
    picture: el("a", { class: "gw-picture", target: "_blank", rel: "noopener", text: "Open the picture of the run" }),
    textToggle: el("button", { class: "gw-button gw-text-toggle", type: "button", "aria-pressed": "false",
                               text: "Show as text" }),
    text: el("pre", { class: "gw-text gw-visually-hidden", id: `${uid}-text` }),
    editor: el("div", { class: "gw-editor", hidden: "" }),
    source: el("textarea", { class: "gw-source", id: `${uid}-source`, rows: "14", spellcheck: "false" }),
    saveEdit: el("button", { class: "gw-button gw-save-edit", type: "button", text: "Check and save" }),
    cancelEdit: el("button", { class: "gw-button gw-cancel-edit", type: "button", text: "Cancel" }),
  };
  const root = el("div", { class: "graph-workflow", "data-run": run, tabindex: "-1", role: "region",
                           "aria-labelledby": `${uid}-plan` },
    el("div", { class: "gw-head" }, parts.plan, parts.badge), parts.facts, parts.live, parts.branches, parts.check,
    parts.outcome, parts.controls, parts.editor, parts.back, parts.foldBar, parts.box, parts.note, parts.legend,
    parts.picture,
    el("div", {}, parts.textToggle), parts.text);
  parts.controls.appendChild(parts.answer);
  parts.back.append(el("label", { for: `${uid}-back`, text: "Go back to a step done:" }), parts.select,
                    parts.backButton);
  parts.foldBar.append(parts.foldText, " ", parts.foldButton);
  parts.editor.append(el("label", { for: `${uid}-source`, text: "The workflow's text (DOT or JSON):" }), parts.source,
                      el("div", { class: "gw-edit-buttons" }, parts.saveEdit, parts.cancelEdit));
  parts.saveEdit.addEventListener("click", async () => {
    const d = root._gw.data;
    if (!d || parts.saveEdit.getAttribute("aria-disabled") === "true") return;
    disable(parts.saveEdit, true);
    const answer = await press(d.run, "edit", "", parts.source.value);
    disable(parts.saveEdit, false);
    if (answer.status === "applied") closeEditor(root);
  });
  parts.cancelEdit.addEventListener("click", () => closeEditor(root));
  root._gw = { uid, parts, expanded: false, announced: null, current: "", layoutKey: "", laid: null, data: null };
  parts.backButton.addEventListener("click", () => {
    const node = parts.select.value;
    if (node && parts.backButton.getAttribute("aria-disabled") !== "true") act(root, "back", node);
  });
  parts.select.addEventListener("change", () => (parts.select.dataset.chosen = parts.select.value));
  parts.foldButton.addEventListener("click", () => toggleFold(root));
  parts.textToggle.addEventListener("click", () => {
    const shown = parts.text.classList.toggle("gw-visually-hidden") === false;
    parts.textToggle.setAttribute("aria-pressed", String(shown));
    parts.textToggle.textContent = shown ? "Hide the text" : "Show as text";
  });
  return root;
}

function act(root, kind, node = "") {
  const d = root._gw.data;
  if (!d) return;
  if (kind === "edit") openEditor(root);
  else press(d.run, kind, node);
}

// Edit on a proposed workflow: its text in place, checked by the engine when saved (the answer line says why not)
function openEditor(root) {
  const p = root._gw.parts;
  if (p.editor.hidden) p.source.value = root._gw.data.source;
  p.editor.hidden = false;
  p.source.focus();
}

function closeEditor(root) {
  const p = root._gw.parts;
  p.editor.hidden = true;
  root.querySelector('.gw-button[data-kind="edit"]')?.focus();
}

onAnswer((run) => {
  for (const root of document.querySelectorAll(".graph-workflow")) {
    if (root.dataset.run === run && root._gw?.data) syncControls(root, root._gw.data);
  }
  refreshStrip();
});

// the component of this item in `host` (made, or updated in place)
export function render(host, data, text) {
  let root = host.querySelector(":scope > .graph-workflow");
  const first = !root || root.dataset.run !== data.run;
  if (first) { // filled before it is shown: its live line is read out when the run changes, not when it appears
    root?.remove();
    root = build(data.run);
    update(root, data, text, true);
    host.appendChild(root);
  } else {
    update(root, data, text, false);
  }
  refreshStrip();
  return root;
}

function update(root, d, text, first) {
  const s = root._gw, p = s.parts;
  s.data = d;
  const status = statusOf(d);
  root.className = `graph-workflow gw-${d.status}`;
  root.dataset.status = d.status;
  p.plan.textContent = d.plan;
  p.badge.className = `gw-badge gw-badge-${status}`;
  p.badge.textContent = status;
  const facts = [];
  if (d.status === "active") {
    facts.push(d.step ? `${cap(d.step)}: ${d.current}` : d.current || "-");
    if (d.attempt) facts.push(`attempt ${d.attempt}`);
    facts.push(`${d.done} of ${d.total} steps done`);
  } else {
    facts.push(`${d.done} of ${d.total} steps done`);
  }
  if (PROPOSAL[d.status]) facts.splice(0, facts.length, `${d.total} step${d.total === 1 ? "" : "s"}`);
  else facts.push(`PACE ${d.pace}`);
  p.facts.textContent = facts.join(" · ");
  if (d.status !== "proposed") p.editor.hidden = true;
  const said = now(d);
  if (s.announced !== said) { // read out when it changes, not when the chat is drawn again
    p.live.textContent = said;
    s.announced = said;
  }
  syncBranches(p.branches, d.branches || []);
  p.check.hidden = !d.check;
  if (d.check) {
    p.check.className = `gw-check gw-check-${d.check.outcome}`;
    p.check.textContent = `Last check: ${d.check.step}: ${d.check.outcome}${d.check.reason ? `, ${d.check.reason}` : ""}`;
  }
  p.outcome.hidden = !(d.status === "stopped" && d.said);
  p.outcome.textContent = d.said ? `Stopped by the user: "${d.said}"` : "";
  syncControls(root, d);
  syncGraph(root, d, first);
  p.picture.hidden = !d.picture;
  if (d.picture) p.picture.setAttribute("href", `/api/image_get?path=${encodeURIComponent(d.picture)}`);
  p.text.textContent = text;
}

function syncBranches(row, branches) {
  row.hidden = !branches.length;
  row.replaceChildren(...branches.map(([name, status, step, attempt]) => {
    const what = step ? `at ${step}${attempt ? ` (attempt ${attempt})` : ""}` : status;
    return el("div", { class: `gw-branch gw-branch-${step ? "running" : status}`, role: "listitem" },
      el("span", { class: "gw-branch-name", text: name }), el("span", { class: "gw-branch-step", text: what }));
  }));
}

// the controls that apply now (control.js), the answer line, and going back to a step done (a labelled list and a
// button)
function syncControls(root, d) {
  const p = root._gw.parts;
  controlButtons(p.controls, d, (kind) => act(root, kind));
  const a = answerFor(d);
  p.answer.className = `gw-answer${a ? ` gw-answer-${a.status}` : ""}`;
  const line = answerText(a);
  if (p.answer.textContent !== line) p.answer.textContent = line;
  p.controls.hidden = !d.controls.length && !line;
  const backs = d.controls.filter((c) => c.kind === "back" && c.node);
  p.back.hidden = !backs.length;
  const keys = backs.map((c) => c.node).join("\n");
  if (p.select.dataset.keys !== keys) { // the latest step done is offered first, unless the person chose another
    const chosen = p.select.dataset.chosen;
    p.select.replaceChildren(...backs.map((c) => el("option", { value: c.node, text: c.label.replace(/^Back to /, ""),
                                                                  title: `Same as typing "${c.words}"` })));
    p.select.value = backs.some((c) => c.node === chosen) ? chosen : backs[backs.length - 1]?.node || "";
    p.select.dataset.keys = keys;
  }
  disable(p.backButton, !!pendingControl(d));
  p.backButton.textContent = pendingControl(d) === "back" ? pendingLabel("back") : "Go back";
}

// ── the graph ───────────────────────────────────────────────────────────────────────────────────────────────

function depths(drawing) {
  if (drawing.depth) return drawing.depth;
  const out = drawing.nodes.map(() => []);
  for (const e of drawing.edges) if (out[e.a] && e.b !== e.a) out[e.a].push(e.b);
  const depth = new Array(drawing.nodes.length).fill(Infinity);
  const first = Math.max(0, drawing.start);
  depth[first] = 0;
  const queue = [first];
  for (let k = 0; k < queue.length; k++) {
    for (const j of out[queue[k]]) {
      if (depth[j] === Infinity) {
        depth[j] = depth[queue[k]] + 1;
        queue.push(j);
      }
    }
  }
  drawing.depth = depth;
  return depth;
}

// what is drawn: every node, or (a large plan, folded) the window and a fold before and after it
function visible(d, folded) {
  const { drawing } = d;
  const all = drawing.nodes.map((n, i) => ({ ...n, i, mark: d.marks[i] }));
  const edges = drawing.edges.map((e) => ({ from: drawing.nodes[e.a].id, to: drawing.nodes[e.b].id, cond: e.cond,
                                            i: e.i, style: STYLE[e.cond] || "plain" }));
  if (!folded) return { nodes: all, edges, key: "all" };
  const shown = new Set(d.window);
  const depth = depths(drawing);
  const here = Math.min(...d.window.filter((i) => ["current", "reached"].includes(d.marks[i])).map((i) => depth[i]));
  const before = (i) => depth[i] < (Number.isFinite(here) ? here : 0);
  let earlier = 0;
  for (let i = 0; i < all.length; i++) if (!shown.has(i) && before(i)) earlier++;
  const later = all.length - shown.size - earlier;
  const folds = { before: { id: "gw-fold-before", name: `⋯ ${earlier} step${earlier === 1 ? "" : "s"} before`,
                            kind: "fold", mark: "fold" },
                  after: { id: "gw-fold-after", name: `⋯ ${later} step${later === 1 ? "" : "s"} after`,
                           kind: "fold", mark: "fold" } };
  const used = new Set();
  const out = [];
  const seen = new Set();
  for (const e of drawing.edges) {
    const ia = shown.has(e.a), ib = shown.has(e.b);
    if (!ia && !ib) continue;
    const from = ia ? drawing.nodes[e.a].id : folds[before(e.a) ? "before" : "after"].id;
    const to = ib ? drawing.nodes[e.b].id : folds[before(e.b) ? "before" : "after"].id;
    if (!ia) used.add(from);
    if (!ib) used.add(to);
    const key = `${from}\n${to}\n${e.cond}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ from, to, cond: e.cond, i: ia && ib ? e.i : -1, style: STYLE[e.cond] || "plain" });
  }
  const nodes = all.filter((n) => shown.has(n.i));
  for (const f of Object.values(folds)) if (used.has(f.id)) nodes.push(f);
  return { nodes, edges: out, key: [...shown].join(",") };
}

function toggleFold(root) {
  const s = root._gw;
  s.expanded = !s.expanded;
  syncGraph(root, s.data, false, true);
  s.parts.foldButton.focus();
}

function syncGraph(root, d, first, toggled = false) {
  const s = root._gw, p = s.parts;
  const big = d.drawing.nodes.length >= FOLD_AT && d.window && d.window.length;
  const folded = big && !s.expanded;
  p.foldBar.hidden = !big;
  if (big) {
    p.foldText.textContent = folded
      ? `Showing the ${d.window.length} steps around the current one, of ${d.drawing.nodes.length}.`
      : `Showing all ${d.drawing.nodes.length} steps.`;
    p.foldButton.textContent = folded ? `Show all ${d.drawing.nodes.length} steps` : "Show the steps around the current one";
    p.foldButton.setAttribute("aria-expanded", String(!folded));
  }
  const m = metrics();
  const view = visible(d, folded);
  const key = `${d.drawing.key}|${view.key}|${m.px}|${m.family}|${layoutLibrary() ? "dagre" : "plain"}`;
  if (key !== s.layoutKey) {
    s.laid = layout(view.nodes, view.edges, m);
    s.layoutKey = key;
  }
  const laid = s.laid;
  const active = d.status === "active";
  const backs = new Map(d.controls.filter((c) => c.kind === "back" && c.node).map((c) => [c.node, c]));
  for (const n of laid.nodes.values()) n.mark = view.nodes.find((v) => v.id === n.id)?.mark || n.mark;
  for (const r of laid.edges) r.edge.taken = r.edge.i >= 0 && d.taken.has(r.edge.i);
  const focused = p.box.contains(document.activeElement) ? document.activeElement.closest?.(".gw-node")?.dataset.node : "";
  const drawn = draw(laid, m, {
    id: `${s.uid}-arrow`, arrows: ["plain", "retry", "exhaust", "taken"],
    look: (n) => {
      if (n.kind === "fold") {
        return { mark: "fold", classes: "gw-fold", label: `${n.name}, folded: show all ${d.drawing.nodes.length} steps`,
                 action: () => toggleFold(root) };
      }
      const mark = n.mark;
      const back = active && backs.get(n.id);
      const label = `${n.name}: ${MARK_TEXT[mark] || mark}`;
      if (!back) return { mark, label };
      return { mark, label: `${label}; go back to this step`, title: `${label}: click to go back to it (same as typing "${back.words}")`,
               classes: "gw-can-go-back", action: () => act(root, "back", n.id) };
    },
  });
  drawn.svg.setAttribute("role", "group");
  drawn.svg.setAttribute("aria-label", accessibleName(d));
  drawn.svg.setAttribute("aria-describedby", p.text.id);
  const top = p.box.scrollTop, left = p.box.scrollLeft;
  p.box.replaceChildren(drawn.svg);
  if (focused && drawn.nodes.get(focused)) drawn.nodes.get(focused).focus({ preventScroll: true });
  const here = [...laid.nodes.values()].find((n) => n.mark === "current" || n.mark === "reached");
  const hereId = here?.id || "";
  if (first || toggled || hereId !== s.current) reveal(p.box, here);
  else {
    p.box.scrollTop = top;
    p.box.scrollLeft = left;
  }
  s.current = hereId;
  p.note.hidden = laid.library;
  p.note.textContent = laid.library ? "" : "layout library missing: a simple layered drawing";
  syncLegend(p.legend, laid);
}

// scroll the graph's box (not the page) so that the current step is in view
function reveal(box, n) {
  if (!n) return;
  requestAnimationFrame(() => {
    const x = n.x - box.clientWidth / 2, y = n.y - box.clientHeight / 3;
    box.scrollLeft = Math.max(0, x);
    box.scrollTop = Math.max(0, y);
  });
}

function syncLegend(list, laid) {
  const marks = new Set([...laid.nodes.values()].map((n) => n.mark));
  const styles = new Set(laid.edges.map((r) => (r.edge.taken ? "taken" : r.edge.style)));
  const items = LEGEND.filter((m) => marks.has(m)).map((m) =>
    el("li", {}, el("span", { class: `gw-swatch gw-mark-${m}`, "aria-hidden": "true" }), el("span", { text: MARK_TEXT[m] })));
  const lines = { taken: "route taken", retry: "on failure or retry", exhaust: "out of attempts" };
  for (const [k, words] of Object.entries(lines)) {
    if (styles.has(k)) items.push(el("li", {}, el("span", { class: `gw-swatch-line gw-swatch-${k}`, "aria-hidden": "true" }),
                                     el("span", { text: words })));
  }
  list.replaceChildren(...items);
}
