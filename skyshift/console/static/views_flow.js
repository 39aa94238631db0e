// The Pipelines and Schedules tabs, built from API objects with text nodes only (see dom.js).

import { actionButtons } from "./actions.js";
import { dagGraph } from "./dag.js";
import { age, h } from "./dom.js";
import { phaseBadge, temporalLink } from "./views.js";

const byKey = (a, b) => `${a.metadata.namespace}/${a.metadata.name}`
  .localeCompare(`${b.metadata.namespace}/${b.metadata.name}`);

/** Steps after what they depend on (spec order among equals), as `describe pipeline` does. */
function ordered(steps) {
  const left = [...steps];
  const done = new Set();
  const out = [];
  while (left.length) {
    let ready = left.filter((s) => (s.dependsOn || []).every((d) => done.has(d)));
    if (!ready.length) ready = left;
    for (const s of ready) {
      done.add(s.name);
      out.push(s);
      left.splice(left.indexOf(s), 1);
    }
  }
  return out;
}

/** The DAG as a list: each step with its phase, what it waits for, attempts and its job. */
function dag(spec, status) {
  const states = status.steps || {};
  return h("ol", { class: "steps" }, ordered(spec.steps || []).map((step) => {
    const st = states[step.name] || {};
    const deps = (step.dependsOn || []).length ? ` after ${step.dependsOn.join(", ")}` : "";
    const tries = (st.attempts || 0) > 1 ? ` (attempt ${st.attempts}/${(step.retries || 0) + 1})` : "";
    return h("li", { dataset: { step: step.name } },
      phaseBadge(st.phase || "Pending"), " ", h("strong", {}, step.name), deps, tries,
      st.message ? h("span", { class: "message" }, ` — ${st.message}`) : null);
  }));
}

export function pipelineRows(pipelines, config) {
  return [...pipelines].sort(byKey).map((p) => {
    const { namespace, name } = p.metadata;
    const status = p.status || {};
    return h("tr", { dataset: { key: `${namespace}/${name}` } },
      h("td", {}, namespace),
      h("td", { class: "name" }, name),
      h("td", { class: "phase-cell" }, phaseBadge(status.phase || "Pending")),
      h("td", { class: "dag" }, dagGraph(p.spec || {}, status), dag(p.spec || {}, status)),
      h("td", { class: "message" }, status.message || ""),
      h("td", {}, age(p.metadata.creationTimestamp)),
      h("td", {}, temporalLink(config, "pipelines", p)),
      h("td", {}, actionButtons("pipelines", namespace, name, ["cancel", "delete"])));
  });
}

export function scheduleRows(schedules, config) {
  return [...schedules].sort(byKey).map((s) => {
    const { namespace, name } = s.metadata;
    const spec = s.spec || {};
    const status = s.status || {};
    const when = spec.cron ? `${spec.cron} (${spec.timezone || "UTC"})` : `every ${spec.interval}`;
    const next = (status.nextRunTimes || [])[0];
    return h("tr", { dataset: { key: `${namespace}/${name}` } },
      h("td", {}, namespace),
      h("td", { class: "name" }, name),
      h("td", { class: "when" }, when),
      h("td", { class: "phase-cell" }, phaseBadge(status.phase || "Pending")),
      h("td", {}, spec.pipelineTemplate ? "Pipeline" : "Job"),
      h("td", { class: "last" }, status.lastRun || "—"),
      h("td", { class: "next", title: next || "" }, next ? next.replace("T", " ").replace("Z", " UTC") : "—"),
      h("td", { class: "runs" }, String(status.runs || 0)),
      h("td", {}, spec.overlapPolicy || "Skip"),
      h("td", {}, temporalLink(config, "schedules", s)),
      h("td", {}, actionButtons("schedules", namespace, name,
        [spec.suspend ? "resume" : "pause", "trigger", "delete"])));
  });
}
