// The workflow's graph: laid out by dagre (the layered layout also behind mermaid's flowcharts), with each node's
// size measured from its label at the page's font, then its edges routed from dagre's points so that none
// crosses a node: an edge runs straight up or down inside a row of nodes (at its own port on its node, or at the
// place dagre kept free for it between two nodes) and turns only in the gaps between rows, where no node is, each
// sideways run at a height of its own in its gap (no two edges run along each other); every arrow ends on its
// target's border; a loop back runs up through the places dagre keeps for it, a self-loop is a loop on the
// node's right. Without the library (a plugin installed from a Git URL that could not download it) a plain layered
// layout is drawn with the same routing, and the caller says "layout library missing".
// Everything put in the page is text (textContent, setAttribute).

const NS = "http://www.w3.org/2000/svg";
const LOOP = 32; // room on a node's right for a loop to itself

let library = null;
let loading = null;

// dagre, imported once from beside this file (its ES module, made by the build); null when it is not there
export function loadLayoutLibrary() {
  if (!loading) {
    loading = import(new URL("./dagre.js", import.meta.url).href)
      .then((m) => (library = m.default || m))
      .catch(() => (library = null));
  }
  return loading;
}

export function layoutLibrary() {
  return library;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

// ── sizes from the labels, at the page's font ──────────────────────────────────────────────────────────────

let canvas = null;
export function metrics() {
  const body = getComputedStyle(document.body);
  const size = parseFloat(body.fontSize) || 16;
  canvas = canvas || document.createElement("canvas");
  const ctx = canvas.getContext("2d");
  ctx.font = `600 ${size}px ${body.fontFamily}`; // bold: the current step's label is, and every label must fit
  return { size, px: body.fontSize, family: body.fontFamily, line: Math.round(size * 1.25),
           text: (s) => ctx.measureText(s).width, wrapAt: size * 13, padX: size * 0.75, padY: size * 0.45 };
}

// a label's lines, none wider than m.wrapAt (a word longer than that is cut into pieces that fit)
export function wrap(label, m) {
  const lines = [];
  let line = "";
  for (const word of String(label).split(/\s+/).filter(Boolean)) {
    const pieces = [];
    let rest = word;
    while (m.text(rest) > m.wrapAt && rest.length > 1) {
      let n = rest.length - 1;
      while (n > 1 && m.text(rest.slice(0, n)) > m.wrapAt) n--;
      pieces.push(rest.slice(0, n));
      rest = rest.slice(n);
    }
    pieces.push(rest);
    for (const piece of pieces) {
      const next = line ? `${line} ${piece}` : piece;
      if (line && m.text(next) > m.wrapAt) {
        lines.push(line);
        line = piece;
      } else {
        line = next;
      }
    }
  }
  if (line || !lines.length) lines.push(line);
  return lines;
}

// the box a node's label needs, by its kind's shape
function box(node, m) {
  const lines = wrap(node.name, m);
  const textW = Math.max(...lines.map(m.text));
  const h = lines.length * m.line + 2 * m.padY;
  let w = textW + 2 * m.padX;
  if (node.kind === "start" || node.kind === "exit") w += h / 2; // a pill: its round ends hold no text
  if (node.kind === "decision" || node.kind === "fan_in") w += h * 0.7; // a hexagon: its points hold no text
  return { lines, w: Math.ceil(Math.max(w, m.size * 5)), h: Math.ceil(h) };
}

// how far from a box's corner an edge may meet its top or bottom (inside the flat part of its shape)
function inset(n) {
  if (n.kind === "start" || n.kind === "exit") return n.h / 2;
  if (n.kind === "decision" || n.kind === "fan_in") return n.h * 0.35 + 4;
  return 8;
}

// ── the layout ───────────────────────────────────────────────────────────────────────────────────────────

// nodes: [{id, name, kind}], edges: [{from, to, ...}] (ids). Returns {width, height, nodes: Map key -> node with
// x, y (centre), w, h, lines, edges: [{edge, d, end}]}, with `library` false when the plain layout was used. A
// node that ends the run (an escalation, an exit) reached from more than SHARED steps is drawn once beside each
// of them (the same id, its own key): one escalation every step shares would otherwise pull an edge from each
// step across the whole drawing.
const SHARED = 2;

export function layout(nodes, edges, m) {
  const { drawn, links } = copies(nodes, edges);
  const placed = new Map();
  const loops = new Set(links.filter((e) => e.fromKey === e.toKey).map((e) => e.fromKey));
  for (const n of drawn) placed.set(n.key, { ...n, ...box(n, m), loop: loops.has(n.key) });
  const others = links.filter((e) => e.fromKey !== e.toKey && placed.has(e.fromKey) && placed.has(e.toKey));
  const dagre = layoutLibrary();
  const points = dagre ? withDagre(dagre, placed, others, m) : plain(placed, others, m);
  let routed = route(placed, others, points);
  if (roomy(placed, points, routed.crowded)) routed = route(placed, others, points); // gaps made taller: again
  const edgesOut = routed.edges;
  for (const e of links) {
    if (e.fromKey === e.toKey && placed.has(e.fromKey)) edgesOut.push({ edge: e, ...selfLoop(placed.get(e.fromKey)) });
  }
  const bounds = { right: 0, bottom: 0 };
  for (const n of placed.values()) {
    bounds.right = Math.max(bounds.right, n.x + n.w / 2 + (n.loop ? LOOP : 0));
    bounds.bottom = Math.max(bounds.bottom, n.y + n.h / 2);
  }
  for (const pts of points) for (const q of pts) bounds.right = Math.max(bounds.right, q.x);
  return { width: Math.ceil(bounds.right + 8), height: Math.ceil(bounds.bottom + 8), nodes: placed, edges: edgesOut,
           library: !!dagre };
}

function copies(nodes, edges) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const sources = new Map();
  for (const e of edges) {
    const n = byId.get(e.to);
    if (n && byId.has(e.from) && e.from !== e.to && (n.kind === "escalate" || n.kind === "exit")) {
      (sources.get(e.to) || sources.set(e.to, new Set()).get(e.to)).add(e.from);
    }
  }
  const shared = new Set([...sources].filter(([, from]) => from.size > SHARED).map(([id]) => id));
  const drawn = nodes.filter((n) => !shared.has(n.id)).map((n) => ({ ...n, key: n.id }));
  const made = new Set();
  const links = edges.filter((e) => byId.has(e.from) && byId.has(e.to)).map((e) => {
    if (!shared.has(e.to)) return { ...e, fromKey: e.from, toKey: e.to };
    const key = `${e.to}@${e.from}`;
    if (!made.has(key)) {
      made.add(key);
      drawn.push({ ...byId.get(e.to), key, copy: true });
    }
    return { ...e, fromKey: e.from, toKey: key };
  });
  return { drawn, links };
}

// gaps too crowded for a height of their own per sideways run are made taller (the rows below moved down, and
// dagre's points with them); true when anything moved
function roomy(placed, points, crowded) {
  if (!crowded.length) return false;
  const shift = (y) => crowded.reduce((sum, g) => sum + (y > g.top ? g.extra : 0), 0);
  for (const n of placed.values()) n.y += shift(n.y);
  for (const pts of points) for (const q of pts) q.y += shift(q.y);
  return true;
}

function withDagre(dagre, placed, edges, m) {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "TB", nodesep: m.size * 2, ranksep: m.size * 4, edgesep: m.size, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of placed.values()) g.setNode(n.key, { width: n.w + (n.loop ? LOOP : 0), height: n.h });
  edges.forEach((e, i) => g.setEdge(e.fromKey, e.toKey, {}, `e${i}`));
  dagre.layout(g);
  for (const n of placed.values()) {
    const at = g.node(n.key);
    n.x = at.x - (n.loop ? LOOP / 2 : 0); // the loop's room is on the right of the box dagre placed
    n.y = at.y;
  }
  return edges.map((e, i) => (g.edge({ v: e.fromKey, w: e.toKey, name: `e${i}` })?.points || []).map((p) => ({ ...p })));
}

// Without dagre: rows by the number of edges from the first node, in the order reached; an edge to the next row
// turns in the gap between, any other goes round the right of everything, each in a lane of its own.
function plain(placed, edges, m) {
  const ids = [...placed.keys()];
  const out = new Map(ids.map((id) => [id, []]));
  for (const e of edges) out.get(e.fromKey).push(e.toKey);
  const first = ids.find((id) => placed.get(id).kind === "start") ?? ids[0];
  const rank = new Map([[first, 0]]);
  const order = [first];
  for (let i = 0; i < order.length; i++) {
    for (const next of out.get(order[i])) {
      if (!rank.has(next)) {
        rank.set(next, rank.get(order[i]) + 1);
        order.push(next);
      }
    }
  }
  let last = Math.max(...rank.values());
  for (const id of ids) if (!rank.has(id)) rank.set(id, ++last);
  for (let round = 0, moved = true; moved && round < ids.length; round++) { // no edge within a row: its end
    moved = false; // goes one row down
    for (const e of edges) {
      if (rank.get(e.toKey) === rank.get(e.fromKey) && e.toKey !== first) {
        rank.set(e.toKey, rank.get(e.toKey) + 1);
        moved = true;
      }
    }
  }
  order.sort((p, q) => rank.get(p) - rank.get(q));
  const rows = [];
  const reached = new Set(order);
  for (const id of [...order, ...ids.filter((id) => !reached.has(id))]) (rows[rank.get(id)] ||= []).push(id);
  const gap = m.size * 4;
  let y = 8, right = 0;
  const mids = [];
  for (const row of rows.filter(Boolean)) {
    const h = Math.max(...row.map((id) => placed.get(id).h));
    let x = 8;
    for (const id of row) {
      const n = placed.get(id);
      n.x = x + n.w / 2;
      n.y = y + h / 2;
      x += n.w + (n.loop ? LOOP : 0) + m.size * 2;
    }
    right = Math.max(right, x);
    mids.push(y + h + gap / 2);
    y += h + gap;
  }
  let lane = right;
  return edges.map((e) => {
    const a = placed.get(e.fromKey), b = placed.get(e.toKey);
    const ra = rank.get(e.fromKey), rb = rank.get(e.toKey);
    if (rb === ra + 1) return [{ x: a.x, y: a.y }, { x: (a.x + b.x) / 2, y: mids[ra] }, { x: b.x, y: b.y }];
    lane += m.size * 0.75;
    const dir = rb > ra ? 1 : -1;
    const pts = [{ x: a.x, y: a.y }];
    for (let r = ra; r !== rb; r += dir) {
      pts.push({ x: lane, y: dir > 0 ? mids[r] : mids[r - 1] });
      if (r + dir !== rb) pts.push({ x: lane, y: placed.get(rows[r + dir][0]).y });
    }
    pts.push({ x: b.x, y: b.y });
    return pts;
  });
}

// ── routing: straight runs through rows, turns in the gaps ─────────────────────────────────────────────────

// the rows of nodes (one per rank: dagre puts a rank's nodes at one height), top to bottom, each as the band
// from its highest top to its lowest bottom
function bands(placed) {
  const rows = new Map();
  for (const n of placed.values()) {
    const key = Math.round(n.y);
    const r = rows.get(key) || { top: Infinity, bottom: -Infinity };
    r.top = Math.min(r.top, n.y - n.h / 2);
    r.bottom = Math.max(r.bottom, n.y + n.h / 2);
    rows.set(key, r);
  }
  const list = [...rows.values()].sort((p, q) => p.top - q.top);
  const at = (y) => list.find((r) => y >= r.top - 0.5 && y <= r.bottom + 0.5) || null;
  const gap = (y) => { // the gap a height between two rows is in: its index (rows above it), top and bottom
    const i = list.findIndex((r) => r.top > y);
    return { i, top: i > 0 ? list[i - 1].bottom : y - 1, bottom: i >= 0 ? list[i].top : y + 1 };
  };
  return { at, gap };
}

const RUN = 10; // the straight end of an edge: its arrowhead's length and a little more
const START = 4; // the straight start of an edge below (or above) its node

function route(placed, edges, points) {
  const rows = bands(placed);
  const ends = new Map(); // "id:top" | "id:bottom" -> the edges meeting that side
  const drafts = edges.map((e, i) => {
    const a = placed.get(e.fromKey), b = placed.get(e.toKey);
    const dir = b.y > a.y ? 1 : b.y < a.y ? -1 : 0;
    const runs = []; // where it crosses a row: at the place dagre kept free for it (the points in gaps are not
    for (const q of points[i].slice(1, -1)) { // needed: a gap holds no node)
      const r = rows.at(q.y);
      if (r && dir !== 0) runs.push(dir > 0 ? { x: q.x, y0: r.top, y1: r.bottom } : { x: q.x, y0: r.bottom, y1: r.top });
    }
    const draft = { edge: e, a, b, dir, runs, sx: a.x, ex: b.x };
    if (dir !== 0) {
      const exit = `${a.key}:${dir > 0 ? "bottom" : "top"}`, entry = `${b.key}:${dir > 0 ? "top" : "bottom"}`;
      const first = runs[0]?.x ?? b.x, last = runs[runs.length - 1]?.x ?? a.x;
      (ends.get(exit) || ends.set(exit, []).get(exit)).push({ toward: first, node: a, set: (x) => (draft.sx = x) });
      (ends.get(entry) || ends.set(entry, []).get(entry)).push({ toward: last, node: b, set: (x) => (draft.ex = x) });
    }
    return draft;
  });
  for (const side of ends.values()) ports(side);
  const crossings = drafts.flatMap((d) => (d.dir ? legs(d, rows) : []));
  const crowded = tracks(crossings);
  return { edges: drafts.map((d) => ({ edge: d.edge, ...path(d) })), crowded };
}

// where the edges meeting one side of a node meet it: in the order of where they come from, spread over the
// side's flat part (one edge: straight below or above where it comes from, when that is on the node)
function ports(side) {
  side.sort((p, q) => p.toward - q.toward);
  const n = side[0].node, pad = inset(n);
  const lo = n.x - n.w / 2 + pad, hi = n.x + n.w / 2 - pad;
  if (side.length === 1) {
    side[0].set(Math.min(hi, Math.max(lo, side[0].toward)));
    return;
  }
  side.forEach((p, i) => p.set(lo + ((hi - lo) * (i + 1)) / (side.length + 1)));
}

// an edge as straight pieces: down (or up) from its port out of its row, across each gap to where it enters the
// next row it crosses, through that row, ..., into its target's port; each crossing of a gap is a leg
function legs(d, rows) {
  const { a, b, dir } = d;
  const sy = dir > 0 ? a.y + a.h / 2 : a.y - a.h / 2;
  const ey = dir > 0 ? b.y - b.h / 2 : b.y + b.h / 2;
  const ra = rows.at(a.y), rb = rows.at(b.y);
  d.sy = sy;
  d.ey = ey;
  d.pieces = [];
  let x = d.sx, y = dir > 0 ? Math.max(sy + START, ra.bottom) : Math.min(sy - START, ra.top);
  const stops = [...d.runs, { x: d.ex, y0: dir > 0 ? Math.min(ey - RUN, rb.top) : Math.max(ey + RUN, rb.bottom), y1: ey }];
  for (const s of stops) {
    const leg = { x1: x, y1: y, x2: s.x, y2: s.y0, dir, gap: rows.gap((y + s.y0) / 2) };
    d.pieces.push(leg, { x: s.x, y1: s.y0, y2: s.y1 });
    x = s.x;
    y = s.y1;
  }
  return d.pieces.filter((p) => p.gap && Math.abs(p.x2 - p.x1) >= 1);
}

// each leg that moves sideways in a gap gets a height of its own there (its track), so that no two edges run
// along each other: in each gap, the legs going left, then those going right, each in the order that keeps them
// from crossing one another
const TRACK = 5; // the least height between two sideways runs in one gap

function tracks(crossings) {
  const crowded = [];
  const byGap = new Map();
  for (const c of crossings) (byGap.get(c.gap.i) || byGap.set(c.gap.i, []).get(c.gap.i)).push(c);
  for (const list of byGap.values()) {
    const left = list.filter((c) => c.x2 < c.x1), right = list.filter((c) => c.x2 > c.x1);
    const down = (c) => c.dir > 0;
    left.sort((p, q) => (down(p) ? p.x1 : -p.x2) - (down(q) ? q.x1 : -q.x2));
    right.sort((p, q) => (down(q) ? q.x1 : -q.x2) - (down(p) ? p.x1 : -p.x2));
    const ordered = [...left, ...right];
    const { top, bottom } = list[0].gap;
    const lo = top + START + RUN / 2, hi = bottom - RUN - RUN / 2;
    ordered.forEach((c, k) => (c.track = lo + ((hi - lo) * (k + 1)) / (ordered.length + 1)));
    const extra = (ordered.length + 1) * TRACK - (hi - lo);
    if (extra > 0) crowded.push({ top, extra: Math.ceil(extra) });
  }
  return crowded;
}

// the path: straight pieces, each turn rounded
function path(d) {
  const { a, b, dir } = d;
  if (dir === 0) { // (dagre never puts the two ends of an edge in one row; the plain layout neither)
    return { d: `M ${a.x} ${a.y} L ${b.x} ${b.y}`, end: { x: b.x, y: b.y } };
  }
  const pts = [[d.sx, d.sy]];
  for (const p of d.pieces) {
    if (p.gap) {
      if (p.track === undefined) pts.push([p.x2, p.y2]);
      else pts.push([p.x1, p.track], [p.x2, p.track], [p.x2, p.y2]);
    } else {
      pts.push([p.x, p.y2]);
    }
  }
  const kept = pts.filter((p, i) => i === 0 || Math.abs(p[0] - pts[i - 1][0]) + Math.abs(p[1] - pts[i - 1][1]) > 0.01);
  return { d: rounded(kept), end: { x: d.ex, y: d.ey } };
}

// a polyline whose corners are quarter curves of a few pixels (no more than half of either side)
function rounded(pts) {
  const out = [`M ${round(pts[0][0])} ${round(pts[0][1])}`];
  for (let i = 1; i < pts.length; i++) {
    const [x, y] = pts[i];
    if (i === pts.length - 1) {
      out.push(`L ${round(x)} ${round(y)}`);
      break;
    }
    const [px, py] = pts[i - 1], [nx, ny] = pts[i + 1];
    const before = Math.hypot(x - px, y - py), after = Math.hypot(nx - x, ny - y);
    const r = Math.min(6, before / 2, after / 2);
    const ax = x - ((x - px) / before) * r, ay = y - ((y - py) / before) * r;
    const bx = x + ((nx - x) / after) * r, by = y + ((ny - y) / after) * r;
    out.push(`L ${round(ax)} ${round(ay)}`, `Q ${round(x)} ${round(y)} ${round(bx)} ${round(by)}`);
  }
  return out.join(" ");
}

function selfLoop(n) {
  const r = n.x + n.w / 2, y1 = n.y - n.h * 0.3, y2 = n.y + n.h * 0.3, out = r + LOOP;
  return { d: `M ${round(r)} ${round(y1)} C ${round(out)} ${round(y1 - 8)} ${round(out)} ${round(y2 + 8)} ${round(r)} ${round(y2)}`,
           end: { x: r, y: y2 } };
}

function round(v) {
  return Math.round(v * 10) / 10;
}

// ── drawing ──────────────────────────────────────────────────────────────────────────────────────────────

function shape(n) {
  const x = n.x - n.w / 2, y = n.y - n.h / 2;
  if (n.kind === "decision" || n.kind === "fan_in") {
    const p = n.h * 0.35;
    const pts = [[x + p, y], [x + n.w - p, y], [x + n.w, n.y], [x + n.w - p, y + n.h], [x + p, y + n.h], [x, n.y]];
    return svg("polygon", { points: pts.map((q) => q.map(round).join(",")).join(" "), class: "gw-shape" });
  }
  const rx = n.kind === "start" || n.kind === "exit" ? n.h / 2 : n.kind === "task" || n.kind === "human" ? 6 : 2;
  return svg("rect", { x: round(x), y: round(y), width: n.w, height: n.h, rx: round(rx), class: "gw-shape" });
}

// the drawing: {svg, nodes: Map key -> <g>}; `look(node)` gives {mark, label, classes, action} for each node
export function draw(laid, m, { id, look, arrows }) {
  const root = svg("svg", { class: "gw-graph", width: laid.width, height: laid.height,
                            viewBox: `0 0 ${laid.width} ${laid.height}` });
  root.style.fontSize = m.px; // the page's text size: the labels are never scaled down
  const defs = svg("defs");
  for (const kind of arrows) {
    const marker = svg("marker", { id: `${id}-${kind}`, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 9,
                                   markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto" });
    marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: `gw-arrowhead gw-arrowhead-${kind}` }));
    defs.appendChild(marker);
  }
  root.appendChild(defs);
  const edges = svg("g", { class: "gw-edges", "aria-hidden": "true" });
  for (const r of laid.edges) {
    const kind = r.edge.style || "plain";
    const p = svg("path", { d: r.d, class: `gw-edge gw-edge-${kind}${r.edge.taken ? " gw-taken" : ""}`,
                            "marker-end": `url(#${id}-${r.edge.taken ? "taken" : kind})`, "data-from": r.edge.from,
                            "data-to": r.edge.to, "data-from-key": r.edge.fromKey, "data-to-key": r.edge.toKey,
                            "data-cond": r.edge.cond || "" });
    p.dataset.endX = r.end.x;
    p.dataset.endY = r.end.y;
    edges.appendChild(p);
  }
  root.appendChild(edges);
  const drawn = new Map();
  for (const n of laid.nodes.values()) {
    const how = look(n);
    const g = svg("g", { class: `gw-node gw-${n.kind} gw-mark-${how.mark} ${how.classes || ""}`.trim(),
                         "data-node": n.id, "data-key": n.key, "data-mark": how.mark,
                         role: how.action ? "button" : "img", "aria-label": how.label });
    g.dataset.box = [n.x - n.w / 2, n.y - n.h / 2, n.w, n.h].map(round).join(" ");
    if (how.action) g.setAttribute("tabindex", "0");
    const ring = svg("rect", { class: "gw-focus", x: round(n.x - n.w / 2 - 4), y: round(n.y - n.h / 2 - 4),
                               width: n.w + 8, height: n.h + 8, rx: 8 });
    g.appendChild(ring);
    g.appendChild(shape(n));
    const text = svg("text", { x: round(n.x), "text-anchor": "middle", "aria-hidden": "true" });
    const top = n.y - (n.lines.length * m.line) / 2 + m.line / 2;
    n.lines.forEach((line, i) => {
      const span = svg("tspan", { x: round(n.x), y: round(top + i * m.line), "dominant-baseline": "central" });
      span.textContent = line;
      text.appendChild(span);
    });
    g.appendChild(text);
    const title = svg("title");
    title.textContent = how.title || how.label;
    g.appendChild(title);
    if (how.action) {
      g.addEventListener("click", how.action);
      g.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          how.action();
        }
      });
    }
    root.appendChild(g);
    drawn.set(n.key, g);
  }
  return { svg: root, nodes: drawn };
}
