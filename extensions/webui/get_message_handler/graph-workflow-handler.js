// The workflow component: Agent-Zero v1.x draws the pack's run card (log items of type "graph_workflow") with it.
// Everything it shows comes from the item's data (kvps.graph, the plan's drawing, and kvps.graph_run, the run on
// it; both made by graph_engine/texts/view.py), so it rebuilds
// itself after a reload or a restored chat; a button sends the words a person would type, through the chat input.
import { drawMessageDefault } from "/js/messages.js";
import { store as inputStore } from "/components/chat/input/input-store.js";

const TYPE = "graph_workflow";
const ROW = 58, COL = 178, NODE_W = 160, NODE_H = 36, PAD = 10;
const MARKS = { c: "current", d: "done", s: "skipped", f: "failed", r: "reached", p: "pending" };
const MARK_TEXT = { current: "current step", done: "done", failed: "failed", skipped: "skipped",
                    pending: "not reached", reached: "where the run ended" };

export default async function registerGraphWorkflowHandler(extData) {
  if (extData?.type === TYPE) {
    extData.handler = drawGraphWorkflow;
  }
}

function drawGraphWorkflow(args) {
  const { id, heading, content, kvps } = args;
  const data = parsed(kvps);
  const table = { ...(kvps || {}) };
  delete table.graph;
  delete table.graph_run;
  if (!data) {  // not ours, or a version this script does not know: the text card
    return drawMessageDefault({ ...args, kvps: table });
  }
  const drawn = drawMessageDefault({ id, heading, content: "", kvps: null });
  const host = drawn.element.querySelector(".message") || drawn.element;
  host.querySelector(".graph-workflow")?.remove();
  host.appendChild(component(data, String(content ?? "")));
  return drawn;
}

// The drawing and the run in one value: each node [id, name, kind, row, column, mark], each edge [from, to,
// condition, taken]; null when either is missing, unreadable or of a version this script does not know.
function parsed(kvps) {
  let drawing = null, run = null;
  try {
    drawing = JSON.parse(kvps?.graph || "null");
    run = JSON.parse(kvps?.graph_run || "null");
  } catch (e) {
    return null;
  }
  if (drawing?.v !== 1 || run?.v !== 1 || typeof run.marks !== "string"
      || run.marks.length !== drawing.nodes?.length || !Array.isArray(drawing.edges)) {
    return null;
  }
  const taken = new Set(run.taken || []);
  return { ...run, plan: drawing.plan,
           nodes: drawing.nodes.map((n, i) => [...n.slice(0, 5), MARKS[run.marks[i]] || "pending"]),
           edges: drawing.edges.map((e, i) => [...e.slice(0, 3), taken.has(i)]) };
}

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

function svgEl(tag, attrs = {}) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function component(d, text) {
  const root = el("div", { class: `graph-workflow gw-${d.status}`, "data-run": d.run, "data-status": d.status });
  root.appendChild(style());
  const status = d.paused ? "paused" : d.status;
  root.appendChild(el("div", { class: "gw-head" },
    el("span", { class: "gw-plan", text: d.plan }),
    el("span", { class: `gw-badge gw-badge-${status}`, text: status })));
  const facts = [];
  if (d.status === "active") {
    facts.push(d.step ? `${d.step}: ${d.current}` : d.current);
    if (d.attempt) facts.push(`attempt ${d.attempt}`);
  } else {
    facts.push(`${d.done} of ${d.total} steps done`);
  }
  facts.push(`PACE ${d.pace}`);
  root.appendChild(el("div", { class: "gw-facts", text: facts.join(" · ") }));
  if (d.branches && d.branches.length) {  // branches running at once, each in a subordinate agent
    const row = el("div", { class: "gw-branches", role: "list", "aria-label": "Branches" });
    for (const [name, status, step, attempt] of d.branches) {
      const what = step ? `at ${step}${attempt ? ` (attempt ${attempt})` : ""}` : status;
      row.appendChild(el("div", { class: `gw-branch gw-branch-${step ? "running" : status}`, role: "listitem" },
        el("span", { class: "gw-branch-name", text: name }), el("span", { class: "gw-branch-step", text: what })));
    }
    root.appendChild(row);
  }
  if (d.check) {
    root.appendChild(el("div", { class: `gw-check gw-check-${d.check.outcome}`,
      text: `Last check: ${d.check.step}: ${d.check.outcome}${d.check.reason ? ", " + d.check.reason : ""}` }));
  }
  if (d.status === "stopped" && d.said) {
    root.appendChild(el("div", { class: "gw-outcome", text: `Stopped by the user: "${d.said}"` }));
  }
  root.appendChild(graph(d));
  if (d.controls.length) {
    const bar = el("div", { class: "gw-controls", role: "group", "aria-label": "Steer the workflow" });
    for (const [label, words, node] of d.controls) {
      if (node) continue;  // going back: chosen on the graph
      const button = el("button", { class: "gw-button", type: "button", "data-say": words, text: label,
                                    title: `Sends "${words}"` });
      button.addEventListener("click", () => say(words, button));
      bar.appendChild(button);
    }
    root.appendChild(bar);
  }
  if (d.picture) {
    root.appendChild(el("a", { class: "gw-picture", href: `/api/image_get?path=${encodeURIComponent(d.picture)}`,
                               target: "_blank", rel: "noopener", text: "Open the picture of the run" }));
  }
  // the card's text: what a screen reader reads, and what the person can open
  const details = el("details", { class: "gw-text" }, el("summary", { text: "As text" }),
                     el("pre", { text }));
  root.appendChild(details);
  return root;
}

function graph(d) {
  const rows = Math.max(...d.nodes.map((n) => n[3])) + 1;
  const cols = Math.max(...d.nodes.map((n) => n[4])) + 1;
  const width = cols * COL + PAD, height = rows * ROW + PAD;
  const at = {};
  for (const n of d.nodes) at[n[0]] = { x: PAD + n[4] * COL, y: PAD + n[3] * ROW };
  const svg = svgEl("svg", { class: "gw-graph", viewBox: `0 0 ${width} ${height}`, width: String(width),
                             role: "img", "aria-label": `The steps of ${d.plan}` });
  const defs = svgEl("defs");
  const marker = svgEl("marker", { id: `gw-arrow-${d.run}`, viewBox: "0 0 10 10", refX: "10", refY: "5",
                                   markerWidth: "8", markerHeight: "8", markerUnits: "userSpaceOnUse",
                                   orient: "auto" });
  marker.appendChild(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "gw-arrowhead" }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  for (const [src, dst, cond, taken] of d.edges) {
    const a = at[src], b = at[dst];
    if (!a || !b) continue;
    const x1 = a.x + NODE_W / 2, y1 = a.y + NODE_H, x2 = b.x + NODE_W / 2, y2 = b.y;
    const back = b.y <= a.y;
    const path = back
      ? `M ${a.x + NODE_W} ${a.y + NODE_H / 2} C ${a.x + NODE_W + 40} ${a.y}, ${b.x + NODE_W + 40} ${b.y + NODE_H}, ${b.x + NODE_W} ${b.y + NODE_H / 2}`
      : `M ${x1} ${y1} L ${x2} ${y2}`;
    const fails = cond === "on_fail" || cond === "on_retry" || cond === "on_exhaust";
    svg.appendChild(svgEl("path", { d: path, class: `gw-edge${taken ? " gw-taken" : ""}${fails ? " gw-fail" : ""}`,
                                    "marker-end": `url(#gw-arrow-${d.run})`, "data-cond": cond }));
  }
  const backTo = {};
  for (const [label, words, node] of d.controls) if (node) backTo[node] = words;
  for (const [nid, name, kind, , , mark] of d.nodes) {
    const p = at[nid];
    const g = svgEl("g", { class: `gw-node gw-${kind} gw-mark-${mark}`, "data-node": nid, "data-mark": mark,
                           transform: `translate(${p.x} ${p.y})` });
    const round = kind === "start" || kind === "exit" ? 18 : kind === "decision" ? 2 : 6;
    g.appendChild(svgEl("rect", { width: String(NODE_W), height: String(NODE_H), rx: String(round) }));
    const label = svgEl("text", { x: String(NODE_W / 2), y: String(NODE_H / 2 + 4), "text-anchor": "middle" });
    label.textContent = name.length > 24 ? name.slice(0, 23) + "…" : name;
    g.appendChild(label);
    const title = svgEl("title");
    title.textContent = `${name}: ${MARK_TEXT[mark] || mark}${backTo[nid] ? ` (click: "${backTo[nid]}")` : ""}`;
    g.appendChild(title);
    if (backTo[nid]) {
      g.classList.add("gw-can-go-back");
      g.setAttribute("tabindex", "0");
      g.setAttribute("role", "button");
      g.addEventListener("click", () => say(backTo[nid], g));
      g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") say(backTo[nid], g); });
    }
    svg.appendChild(g);
  }
  return el("div", { class: "gw-graph-box" }, svg);
}

async function say(words, source) {
  // the same words a person could type, sent as a person sends them
  source?.classList?.add("gw-sent");
  inputStore.message = words;
  if (globalThis.sendMessage) await globalThis.sendMessage();
}

let sheet = null;
function style() {
  if (!sheet) {
    sheet = el("style", { text: `
.graph-workflow { margin-top: .4rem; font-size: .9rem; color: var(--color-text); max-width: 100%; }
.graph-workflow .gw-head { display: flex; gap: .6rem; align-items: center; flex-wrap: wrap; }
.graph-workflow .gw-plan { font-weight: 600; }
.graph-workflow .gw-badge { border-radius: 1rem; padding: .05rem .6rem; font-size: .8rem;
  border: 1px solid var(--color-border); }
.graph-workflow .gw-badge-active { background: var(--color-highlight); color: #fff; border-color: transparent; }
.graph-workflow .gw-badge-completed { background: #2e7d32; color: #fff; border-color: transparent; }
.graph-workflow .gw-badge-escalated, .graph-workflow .gw-badge-stopped { background: var(--color-accent); color: #fff;
  border-color: transparent; }
.graph-workflow .gw-facts, .graph-workflow .gw-check, .graph-workflow .gw-outcome { margin: .3rem 0;
  color: var(--color-text-muted); }
.graph-workflow .gw-check-fail { color: var(--color-warning-text); }
.graph-workflow .gw-branches { display: flex; flex-wrap: wrap; gap: .4rem; margin: .3rem 0; }
.graph-workflow .gw-branch { display: flex; flex-direction: column; min-width: 8rem; padding: .2rem .5rem;
  border: 1px solid var(--color-border); border-radius: .4rem; }
.graph-workflow .gw-branch-name { font-weight: 600; }
.graph-workflow .gw-branch-step { font-size: .8rem; color: var(--color-text-muted); }
.graph-workflow .gw-branch-running { border-color: var(--color-highlight); }
.graph-workflow .gw-branch-success { border-color: #2e7d32; }
.graph-workflow .gw-branch-fail, .graph-workflow .gw-branch-escalated, .graph-workflow .gw-branch-expired,
.graph-workflow .gw-branch-stopped { border-color: var(--color-warning-text); }
.graph-workflow .gw-graph-box { overflow-x: auto; margin: .4rem 0; }
.graph-workflow .gw-graph { max-width: 100%; height: auto; }
.graph-workflow .gw-node rect { fill: var(--color-panel); stroke: var(--color-border); stroke-width: 1.2; }
.graph-workflow .gw-node text { fill: var(--color-text); font-size: 12px; font-family: inherit; }
.graph-workflow .gw-mark-done rect { fill: #2e7d3233; stroke: #2e7d32; }
.graph-workflow .gw-mark-failed rect { fill: #e79c2333; stroke: var(--color-warning-text); }
.graph-workflow .gw-mark-skipped rect { stroke-dasharray: 4 3; }
.graph-workflow .gw-mark-current rect { fill: var(--color-highlight); stroke: var(--color-highlight); stroke-width: 2.5; }
.graph-workflow .gw-mark-current text { fill: #fff; font-weight: 600; }
.graph-workflow .gw-mark-reached rect { stroke: var(--color-text); stroke-width: 2.5; }
.graph-workflow .gw-escalate rect { stroke: var(--color-accent); }
.graph-workflow .gw-can-go-back { cursor: pointer; }
.graph-workflow .gw-edge { fill: none; stroke: var(--color-border); stroke-width: 1.3; }
.graph-workflow .gw-edge.gw-fail { stroke-dasharray: 5 3; }
.graph-workflow .gw-edge.gw-taken { stroke: var(--color-highlight); stroke-width: 2.2; }
.graph-workflow .gw-arrowhead { fill: var(--color-text-muted); }
.graph-workflow .gw-controls { display: flex; flex-wrap: wrap; gap: .4rem; margin: .4rem 0; }
.graph-workflow .gw-button { font: inherit; font-size: .85rem; padding: .2rem .7rem; border-radius: .4rem;
  border: 1px solid var(--color-border); background: var(--color-panel); color: var(--color-text); cursor: pointer; }
.graph-workflow .gw-button:hover { border-color: var(--color-highlight); }
.graph-workflow .gw-sent { opacity: .6; }
.graph-workflow .gw-picture { display: inline-block; margin: .2rem 0; color: var(--color-highlight); }
.graph-workflow .gw-text summary { cursor: pointer; color: var(--color-text-muted); font-size: .8rem; }
.graph-workflow .gw-text pre { white-space: pre-wrap; font-size: .8rem; }
` });
  }
  return sheet.cloneNode(true);
}
