// The strip above the chat input (the `chat-input-start` anchor; its slot is the plugin's
// extensions/webui/chat-input-start/graph-workflow-strip.html): the newest active run of the chat on screen, in one
// line (plan, step, status) with its controls, where the person types. Pressing the line scrolls to the run's
// component and moves the focus there. It follows what the chat's log shows: gone when no run is active (the run
// ended, or another chat was opened).
import { answerFor, answerText, controlButtons, press } from "./control.js";
import { injectStyle } from "./style.js";

let scheduled = false;
let watched = null;

export function refreshStrip() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    draw();
  });
}

function watch() {
  const history = document.getElementById("chat-history");
  if (!history || history === watched) return;
  watched = history;
  new MutationObserver(refreshStrip).observe(history, { childList: true }); // another chat opened, or cleared
}

function slot() {
  return document.getElementById("graph-workflow-strip");
}

// the newest component of an active run in the chat on screen
function newest() {
  const all = document.querySelectorAll("#chat-history .graph-workflow[data-status='active']");
  return all.length ? all[all.length - 1] : null;
}

function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  if (text) node.textContent = text;
  return node;
}

function draw() {
  watch();
  const strip = slot();
  if (!strip) return;
  const root = newest();
  const d = root?._gw?.data;
  if (!root || !d) {
    strip.hidden = true;
    strip.replaceChildren();
    delete strip.dataset.run;
    return;
  }
  injectStyle();
  strip.hidden = false;
  strip.classList.add("gw-strip");
  strip.setAttribute("role", "region");
  strip.setAttribute("aria-label", "Active workflow");
  strip.dataset.run = d.run;
  strip.dataset.status = d.paused ? "paused" : d.status;
  let open = strip.querySelector(".gw-strip-open");
  if (!open) {
    open = el("button", { class: "gw-strip-open", type: "button" });
    open.append(el("span", { class: "gw-badge" }), el("span", { class: "gw-strip-text" }));
    open.addEventListener("click", () => show(newest()));
    strip.replaceChildren(open, el("div", { class: "gw-controls", role: "group", "aria-label": "Steer the workflow" }),
                          el("span", { class: "gw-answer" }));
  }
  const status = d.paused ? "paused" : d.status;
  const badge = open.querySelector(".gw-badge");
  badge.className = `gw-badge gw-badge-${status}`;
  badge.textContent = status;
  const where = d.step ? `${d.step[0].toUpperCase()}${d.step.slice(1)}: ${d.current}` : d.current;
  open.querySelector(".gw-strip-text").textContent = `${d.plan}: ${where}`;
  open.setAttribute("aria-label", `Workflow ${d.plan}, ${status}: ${where}. Show it in the chat`);
  open.title = "Show the workflow in the chat";
  const row = strip.querySelector(".gw-controls");
  controlButtons(row, d, (kind) => press(d.run, kind));
  const answer = strip.querySelector(".gw-answer");
  const line = answerText(answerFor(d));
  if (answer.textContent !== line) answer.textContent = line;
}

// scroll the chat to the run's component and put the focus on it
function show(root) {
  if (!root) return;
  root.scrollIntoView({ block: "start" }); // at once: the chat's own scrolling then sees the person moved away
  root.focus({ preventScroll: true });
  root.classList.remove("gw-flash");
  void root.offsetWidth;
  root.classList.add("gw-flash");
}
