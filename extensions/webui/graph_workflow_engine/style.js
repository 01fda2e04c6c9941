// The component's and the strip's look, in Agent-Zero's own colours (dark and light themes), added to the page once.

const CSS = `
.graph-workflow { margin: .4rem 2.75rem 0 0; font-size: .9rem; color: var(--color-text); max-width: 100%;
  min-width: 0; }
.graph-workflow:focus { outline: none; }
.graph-workflow .gw-head { display: flex; gap: .6rem; align-items: center; flex-wrap: wrap; }
.graph-workflow .gw-plan { font-weight: 600; font-size: 1rem; margin: 0; }
.gw-badge { border-radius: 1rem; padding: .05rem .6rem; font-size: .8rem; border: 1px solid var(--color-border); }
.gw-badge-active { background: var(--color-highlight); color: #fff; border-color: transparent; }
.gw-badge-completed { background: #2e7d32; color: #fff; border-color: transparent; }
.gw-badge-escalated, .gw-badge-stopped, .gw-badge-expired { background: var(--color-accent); color: #fff;
  border-color: transparent; }
.graph-workflow .gw-facts, .graph-workflow .gw-check, .graph-workflow .gw-outcome, .graph-workflow .gw-note,
.graph-workflow .gw-fold-bar { margin: .3rem 0; color: var(--color-text-muted); }
.graph-workflow .gw-facts { color: var(--color-text); }
.graph-workflow .gw-check-fail { color: var(--color-warning-text); }
.graph-workflow .gw-note { font-size: .8rem; }
.graph-workflow .gw-branches { display: flex; flex-wrap: wrap; gap: .4rem; margin: .3rem 0; }
.graph-workflow .gw-branch { display: flex; flex-direction: column; min-width: 8rem; padding: .2rem .5rem;
  border: 1px solid var(--color-border); border-radius: .4rem; }
.graph-workflow .gw-branch-name { font-weight: 600; }
.graph-workflow .gw-branch-step { font-size: .8rem; color: var(--color-text-muted); }
.graph-workflow .gw-branch-running { border-color: var(--color-highlight); }
.graph-workflow .gw-branch-success { border-color: #2e7d32; }
.graph-workflow .gw-branch-fail, .graph-workflow .gw-branch-escalated, .graph-workflow .gw-branch-expired,
.graph-workflow .gw-branch-stopped { border-color: var(--color-warning-text); }
.gw-controls, .graph-workflow .gw-back { display: flex; flex-wrap: wrap; gap: .4rem; align-items: center;
  margin: .4rem 0; }
.gw-button, .graph-workflow .gw-select { font: inherit; font-size: .85rem; padding: .2rem .7rem;
  border-radius: .4rem; border: 1px solid var(--color-border); background: var(--color-panel);
  color: var(--color-text); cursor: pointer; }
.graph-workflow .gw-select { flex: 0 1 auto; width: auto; max-width: 100%; min-width: 0; }
.gw-button:hover { border-color: var(--color-highlight); }
.gw-button[aria-disabled="true"] { opacity: .65; cursor: progress; }
.graph-workflow [hidden], .gw-strip [hidden] { display: none !important; }
.gw-button:focus-visible, .graph-workflow .gw-select:focus-visible, .gw-strip-open:focus-visible {
  outline: 3px solid var(--color-highlight); outline-offset: 2px; }
.gw-answer { font-size: .85rem; color: var(--color-text-muted); white-space: pre-wrap; }
.gw-badge-proposed { background: #fff3cd; color: #5c4400; border-color: #e0c36b; }
.gw-badge-approved { background: #2e7d32; color: #fff; border-color: transparent; }
.gw-editor { display: flex; flex-direction: column; gap: .4rem; margin: .4rem 0; }
.gw-edit-buttons { display: flex; flex-wrap: wrap; gap: .4rem; }
.gw-source { font-family: var(--font-family-code, monospace); font-size: .8rem; width: 100%; box-sizing: border-box;
  background: var(--color-input); color: var(--color-text); border: 1px solid var(--color-border); border-radius: .3rem;
  padding: .4rem; }
.gw-answer-failed, .gw-answer-refused { color: var(--color-warning-text); }
.gw-answer-sending { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
.graph-workflow .gw-graph-box { overflow: auto; margin: .4rem 0; max-height: min(55vh, 36rem);
  border: 1px solid var(--color-border); border-radius: .4rem; }
.graph-workflow .gw-graph { display: block; max-width: none; }
.graph-workflow .gw-node .gw-shape { fill: var(--color-panel); stroke: var(--color-border); stroke-width: 1.4; }
.graph-workflow .gw-node text { fill: var(--color-text); font-family: inherit; }
.graph-workflow .gw-node .gw-focus { fill: none; stroke: none; }
.graph-workflow .gw-node:focus { outline: none; }
.graph-workflow .gw-node:focus-visible .gw-focus { stroke: var(--color-highlight); stroke-width: 3; }
.graph-workflow .gw-mark-done .gw-shape, .gw-swatch.gw-mark-done { fill: #2e7d3233; background: #2e7d3233;
  stroke: #2e7d32; border-color: #2e7d32; }
.graph-workflow .gw-mark-recovered .gw-shape, .gw-swatch.gw-mark-recovered { fill: #2e7d3233; background: #2e7d3233;
  stroke: var(--color-warning-text); border-color: var(--color-warning-text); stroke-width: 2.4;
  stroke-dasharray: 7 3; border-style: dashed; }
.graph-workflow .gw-mark-passed .gw-shape, .gw-swatch.gw-mark-passed { stroke: #2e7d32; border-color: #2e7d32;
  stroke-width: 2; }
.graph-workflow .gw-mark-failed .gw-shape, .gw-swatch.gw-mark-failed { fill: #e79c2333; background: #e79c2333;
  stroke: var(--color-warning-text); border-color: var(--color-warning-text); }
.graph-workflow .gw-mark-skipped .gw-shape, .gw-swatch.gw-mark-skipped { stroke-dasharray: 4 3;
  border-style: dashed; }
.graph-workflow .gw-mark-current .gw-shape, .gw-swatch.gw-mark-current { fill: var(--color-highlight);
  background: var(--color-highlight); stroke: var(--color-highlight); border-color: var(--color-highlight);
  stroke-width: 2.5; }
.graph-workflow .gw-mark-current text { fill: #fff; font-weight: 600; }
.graph-workflow .gw-mark-reached .gw-shape, .gw-swatch.gw-mark-reached { stroke: var(--color-text);
  border-color: var(--color-text); stroke-width: 3; }
.graph-workflow .gw-mark-unknown .gw-shape { stroke-dasharray: 1 3; }
.graph-workflow .gw-fold .gw-shape { stroke-dasharray: 3 3; fill: none; }
.graph-workflow .gw-fold text { fill: var(--color-text-muted); }
.graph-workflow .gw-escalate .gw-shape { stroke: var(--color-accent); }
.graph-workflow .gw-node[role="button"] { cursor: pointer; }
.graph-workflow .gw-edge { fill: none; stroke: var(--color-text-muted); stroke-width: 1.4; opacity: .75; }
.graph-workflow .gw-edge-retry { stroke: var(--color-warning-text); stroke-dasharray: 7 4; }
.graph-workflow .gw-edge-exhaust { stroke: var(--color-accent); stroke-dasharray: 2 3; }
.graph-workflow .gw-edge.gw-taken { stroke: var(--color-highlight); stroke-width: 2.4; opacity: 1; }
.graph-workflow .gw-arrowhead { fill: var(--color-text-muted); }
.graph-workflow .gw-arrowhead-retry { fill: var(--color-warning-text); }
.graph-workflow .gw-arrowhead-exhaust { fill: var(--color-accent); }
.graph-workflow .gw-arrowhead-taken { fill: var(--color-highlight); }
.graph-workflow .gw-legend { display: flex; flex-wrap: wrap; gap: .2rem .8rem; margin: .2rem 0; padding: 0;
  list-style: none; font-size: .8rem; color: var(--color-text-muted); }
.graph-workflow .gw-legend li { display: flex; align-items: center; gap: .3rem; }
.gw-swatch { display: inline-block; width: 1.1em; height: .8em; border: 1.5px solid var(--color-border);
  border-radius: 3px; background: var(--color-panel); }
.gw-swatch-line { display: inline-block; width: 1.6em; height: 0; border-top: 2px solid var(--color-text-muted); }
.gw-swatch-retry { border-top: 2px dashed var(--color-warning-text); }
.gw-swatch-exhaust { border-top: 2px dotted var(--color-accent); }
.gw-swatch-taken { border-top: 2.5px solid var(--color-highlight); }
.graph-workflow .gw-picture { display: inline-block; margin: .2rem 0; color: var(--color-highlight); }
.graph-workflow .gw-text-toggle { font-size: .8rem; padding: .1rem .5rem; }
.graph-workflow .gw-text { white-space: pre-wrap; font-size: .8rem; margin: .3rem 0; }
.gw-visually-hidden { position: absolute !important; width: 1px !important; height: 1px !important;
  padding: 0 !important; margin: -1px !important; overflow: hidden !important; clip: rect(0 0 0 0) !important;
  white-space: nowrap !important; border: 0 !important; }
.graph-workflow.gw-flash { animation: gw-flash 1.2s ease-out; }
@keyframes gw-flash { from { box-shadow: 0 0 0 3px var(--color-highlight); } to { box-shadow: 0 0 0 0 transparent; } }
.gw-strip { width: 100%; box-sizing: border-box; display: flex; flex-wrap: wrap; align-items: center; gap: .35rem .6rem;
  padding: .3rem .5rem; border: 1px solid var(--color-highlight); border-radius: .5rem;
  background: var(--color-panel); color: var(--color-text); font-size: .85rem; }
.gw-strip[hidden] { display: none; }
.gw-strip-open { font: inherit; display: flex; gap: .5rem; align-items: center; flex: 1 1 14rem; min-width: 0;
  text-align: left; background: none; border: 0; color: inherit; padding: .1rem; cursor: pointer; }
.gw-strip-open .gw-strip-text { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.gw-strip .gw-controls { margin: 0; }
.gw-strip .gw-button { padding: .1rem .55rem; }
`;

export function injectStyle() {
  if (document.getElementById("graph-workflow-style")) return;
  const style = document.createElement("style");
  style.id = "graph-workflow-style";
  style.textContent = CSS;
  document.head.appendChild(style);
}
