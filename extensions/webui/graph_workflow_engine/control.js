// A control pressed on the component (or on the strip above the chat input) goes to the plugin's own API, never
// through the chat input: the person's draft stays as it was, and the control acts while the agent works (a
// message typed then would wait in Agent-Zero's queue). The engine answers at once ("applied", "refused") or at
// its next pass ("pending"); the run's data then carries its answer too ("answer"), so a reload still shows it.
import { callJsonApi } from "/js/api.js";

// the plugin's handler, or, installed by the shell installer on v1.x, the one in Agent-Zero's api/ folder
export const API = import.meta.url.includes("/plugins/graph_workflow_engine/")
  ? "/plugins/graph_workflow_engine/workflow_control"
  : "/graph_workflow_control";

const PENDING = { stop: "Stopping…", pause: "Pausing…", resume: "Resuming…", skip: "Skipping…", retry: "Retrying…",
                  back: "Going back…", restart: "Restarting…", approve: "Approving…", edit: "Checking…",
                  reject: "Rejecting…", save: "Saving…" };
const APPLIED = { stop: "Stopped", pause: "Paused", resume: "Resumed", skip: "Skipped", retry: "Attempts restored",
                  back: "Went back", restart: "Restarted", approve: "Approved", edit: "Changed", reject: "Rejected",
                  save: "Saved" };

const pressed = new Map(); // run id -> {id, control, status, text} of the last control pressed in this page
const listeners = new Set();

export function onAnswer(listener) {
  listeners.add(listener);
}

function changed(run) {
  for (const listener of listeners) listener(run);
}

let counter = 0;
function requestId() {
  const random = Math.random().toString(36).slice(2, 10);
  return `gw-${Date.now().toString(36)}-${(++counter).toString(36)}-${random}`.slice(0, 40);
}

// the answer to show for a run: the one to a control pressed in this page (the engine's, once the run's data
// carries it), else the engine's answer to the last control pressed anywhere (another tab, before a reload)
export function answerFor(data) {
  const mine = pressed.get(data.run);
  const theirs = data.answer && typeof data.answer === "object" && data.answer.status ? data.answer : null;
  if (mine && theirs && theirs.id === mine.id && mine.status !== "sending" && mine.status !== "failed") return theirs;
  return mine || theirs;
}

export function pendingControl(data) {
  const a = answerFor(data);
  return a && a.status === "sending" ? a.control : "";
}

// one line for the person: "Stopping…", "Stopped", "Not applied: <why>", "not sent: <why>"
export function answerText(a) {
  if (!a) return "";
  const said = String(a.text || "").trim();
  switch (a.status) {
    case "sending":
      return PENDING[a.control] || "Sending…";
    case "failed":
      return `not sent: ${said || "no answer"}`;
    case "applied":
      return said || APPLIED[a.control] || "Done";
    case "refused":
      return `Not applied: ${said || "the engine refused it"}`;
    case "pending":
      return said || `${PENDING[a.control] || "Sent…"} (at the agent's next step)`;
    default:
      return said;
  }
}

export function pendingLabel(kind) {
  return PENDING[kind] || "Sending…";
}

function reason(error) {
  const text = String(error?.message || error || "").replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").trim();
  return text.length > 140 ? `${text.slice(0, 137)}...` : text || "no answer";
}

// press a control of a run (or of a proposed workflow: approve, edit with its new text, reject): {run, control,
// node, text}; the page's draft is never touched
export async function press(run, control, node = "", text = "") {
  const id = requestId();
  pressed.set(run, { id, control, status: "sending", text: "" });
  changed(run);
  let answer;
  try {
    const context = typeof globalThis.getContext === "function" ? globalThis.getContext() : "";
    const body = { context, run, control, node: control === "back" ? node : "", id };
    if (control === "edit") body.text = text;
    const res = await callJsonApi(API, body);
    if (!res || typeof res !== "object" || !["applied", "refused", "pending"].includes(res.status)) {
      throw new Error("the answer was not one the component knows");
    }
    answer = { id, control, status: res.status, text: String(res.text || ""), run: String(res.run || run) };
  } catch (error) {
    answer = { id, control, status: "failed", text: reason(error) };
  }
  if (pressed.get(run)?.id === id) pressed.set(run, answer);
  changed(run);
  return answer;
}

export function disable(button, off) {
  if (off) button.setAttribute("aria-disabled", "true");
  else button.removeAttribute("aria-disabled");
}

// the controls that apply now, in `row`: a button each, kept while it applies (so the focus stays); `make(kind)`
// presses one (the component's and the strip's rows)
export function controlButtons(row, d, make) {
  const wanted = d.controls.filter((c) => c.kind !== "back");
  const waiting = pendingControl(d);
  const have = new Map([...row.querySelectorAll(":scope > .gw-button")].map((b) => [b.dataset.kind, b]));
  let before = row.firstChild;
  for (const c of wanted) {
    let button = have.get(c.kind);
    have.delete(c.kind);
    if (!button) {
      button = document.createElement("button");
      button.className = "gw-button";
      button.type = "button";
      button.dataset.kind = c.kind;
      button.addEventListener("click", () => {
        if (button.getAttribute("aria-disabled") !== "true") make(button.dataset.kind);
      });
    }
    button.dataset.say = c.words;
    button.title = `Same as typing "${c.words}"`;
    disable(button, !!waiting); // (not `disabled`: the pressed button keeps the focus)
    button.textContent = waiting === c.kind ? pendingLabel(c.kind) : c.label;
    if (button !== before) row.insertBefore(button, before);
    before = button.nextSibling;
  }
  for (const old of have.values()) old.remove();
}
