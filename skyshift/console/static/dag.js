// A pipeline's steps drawn as a DAG in SVG, by the page itself (no library, nothing fetched):
// one column per depth (a step sits right of everything it depends on), a node per step in its
// phase's colour, an arrow per dependency.

import { phaseClass } from "./views.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 124;  // node width
const H = 32;  // node height
const GAP_X = 34;
const GAP_Y = 14;
const PAD = 6;

/** An SVG element with attributes and children (strings become text nodes). */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  for (const child of children) el.append(child instanceof Node ? child : String(child));
  return el;
}

/** Each step's column: 0 without dependencies, else one right of its deepest dependency. */
export function depths(steps) {
  const byName = new Map(steps.map((step) => [step.name, step]));
  const depth = new Map();
  const visit = (name, seen) => {
    if (depth.has(name)) return depth.get(name);
    if (seen.has(name)) return 0;  // a cycle (the API refuses them): never loop
    seen.add(name);
    const deps = ((byName.get(name) || {}).dependsOn || []).filter((d) => byName.has(d));
    const d = deps.length ? 1 + Math.max(...deps.map((dep) => visit(dep, seen))) : 0;
    depth.set(name, d);
    return d;
  };
  for (const step of steps) visit(step.name, new Set());
  return depth;
}

/** Where each step's node goes, and the drawing's size. */
function layout(steps) {
  const depth = depths(steps);
  const columns = [];
  for (const step of steps) (columns[depth.get(step.name)] ||= []).push(step.name);
  const at = new Map();
  columns.forEach((column, x) => column.forEach((name, y) => at.set(name, {
    x: PAD + x * (W + GAP_X), y: PAD + y * (H + GAP_Y),
  })));
  const rows = Math.max(1, ...columns.map((c) => c.length));
  return {
    at,
    width: 2 * PAD + columns.length * (W + GAP_X) - GAP_X,
    height: 2 * PAD + rows * (H + GAP_Y) - GAP_Y,
  };
}

function edge(from, to, a, b) {
  const [x1, y1, x2, y2] = [a.x + W, a.y + H / 2, b.x, b.y + H / 2];
  const bend = (x2 - x1) / 2;
  return s("g", { class: "edge", "data-from": from, "data-to": to },
    s("path", { class: "edge-line", d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2 - 1},${y2}` }),
    s("path", { class: "edge-head", d: `M${x2 - 7},${y2 - 4} L${x2},${y2} L${x2 - 7},${y2 + 4} Z` }));
}

function node(step, state, p) {
  const phase = state.phase || "Pending";
  const label = step.name.length > 16 ? `${step.name.slice(0, 15)}…` : step.name;
  const attempt = (state.attempts || 0) > 1 ? `, attempt ${state.attempts}` : "";
  return s("g", { class: `node phase-${phaseClass(phase)}`, "data-step": step.name, "data-phase": phase },
    s("title", {}, `${step.name}: ${phase}${attempt}${state.message ? ` — ${state.message}` : ""}`),
    s("rect", { x: p.x, y: p.y, width: W, height: H, rx: 6 }),
    s("text", { x: p.x + 10, y: p.y + H / 2 + 4 }, label));
}

/** The SVG drawing of a pipeline's DAG. */
export function dagGraph(spec, status) {
  const steps = (spec.steps || []).filter((step) => step && step.name);
  const states = status.steps || {};
  const { at, width, height } = layout(steps);
  const edges = steps.flatMap((step) => (step.dependsOn || [])
    .filter((dep) => at.has(dep))
    .map((dep) => edge(dep, step.name, at.get(dep), at.get(step.name))));
  const nodes = steps.map((step) => node(step, states[step.name] || {}, at.get(step.name)));
  return s("svg", {
    class: "dag-graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `DAG of ${steps.length} steps`,
  }, ...edges, ...nodes);
}
