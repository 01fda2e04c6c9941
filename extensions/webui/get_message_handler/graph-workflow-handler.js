// Agent-Zero v1.x draws the pack's run card (log items of type "graph_workflow") with the workflow component
// (../graph_workflow_engine/component.js); an item it cannot read (not ours, or a version this script does not
// know) is drawn as Agent-Zero draws any item: the text card.
import { drawMessageDefault } from "/js/messages.js";
import { parse, render } from "../graph_workflow_engine/component.js";
import { loadLayoutLibrary } from "../graph_workflow_engine/graph.js";

const TYPE = "graph_workflow";

export default async function registerGraphWorkflowHandler(extData) {
  if (extData?.type === TYPE) {
    extData.handler = drawGraphWorkflow;
  }
}

async function drawGraphWorkflow(args) {
  const { id, heading, content, kvps } = args;
  const data = parse(kvps);
  if (!data) {
    const table = { ...(kvps || {}) };
    delete table.graph;
    delete table.graph_run;
    return drawMessageDefault({ ...args, kvps: table });
  }
  await loadLayoutLibrary(); // once: the graph's layout (a plain one when it is not there)
  const drawn = drawMessageDefault({ id, heading, content: "", kvps: null });
  const host = drawn.element.querySelector(".message") || drawn.element;
  render(host, data, String(content ?? ""));
  return drawn;
}
