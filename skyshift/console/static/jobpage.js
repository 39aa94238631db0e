// A job's own page (#job/<namespace>/<name>): its spec, its replicas per cluster, its events
// (the status conditions, as the API gives them), its logs followed until it ends (like
// `skyctl logs -f`) and its workflow in the Temporal UI (the link `skyctl describe` prints).

import { actionButtons } from "./actions.js";
import { get, path, sleep } from "./api.js";
import { $, age, fillTable, h } from "./dom.js";
import { endedIn, workflowId } from "./kinds.js";
import { phaseBadge } from "./views.js";

const REPLICA_STATES = ["Running", "Pending", "Succeeded", "Failed", "Unknown"];
/** How often the logs are read again while the job runs (`skyctl logs -f` waits as long). */
export const FOLLOW_MS = 2000;

/** A spec value as one line: scalars as they are, lists and maps as compact JSON. */
function shown(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function specRows(spec) {
  return Object.entries(spec || {})
    .filter(([, value]) => shown(value) !== "" && shown(value) !== "{}" && shown(value) !== "[]")
    .map(([key, value]) => h("tr", { dataset: { field: key } },
      h("th", { scope: "row" }, key), h("td", {}, h("code", {}, shown(value)))));
}

function replicaRows(status) {
  const placement = status.placement || {};
  const counts = status.replicaStatus || {};
  const clusters = [...new Set([...Object.keys(placement), ...Object.keys(counts)])].sort();
  return clusters.map((cluster) => h("tr", { dataset: { cluster } },
    h("td", { class: "name" }, cluster),
    h("td", { class: "placed" }, String(placement[cluster] || 0)),
    REPLICA_STATES.map((s) => h("td", { dataset: { state: s } }, String((counts[cluster] || {})[s] || 0)))));
}

function eventRows(status) {
  const conditions = (status.conditions || []).map((c) => h("tr", { dataset: { type: c.type || "" } },
    h("td", {}, c.type || ""), h("td", {}, String(c.status ?? "")), h("td", {}, c.reason || ""),
    h("td", { class: "message" }, c.message || ""),
    h("td", { title: c.lastTransitionTime || "" }, age(c.lastTransitionTime))));
  // the scheduler's reasons, while the job waits for a cluster, read like events too
  const reasons = (status.phase || "Pending") === "Pending"
    ? Object.entries(status.schedulerReasons || {}).sort().map(([cluster, reason]) =>
      h("tr", { dataset: { type: "Unschedulable" } }, h("td", {}, "Unschedulable"),
        h("td", {}, "True"), h("td", {}, cluster), h("td", { class: "message" }, reason), h("td", {})))
    : [];
  return [...conditions, ...reasons];
}

/** The workflow's page in the Temporal UI, spelled out as `skyctl describe` prints it. */
function workflow(config, job) {
  const id = (job.status || {}).workflowId || workflowId("jobs", job);
  if (!config.temporalUi) return [h("code", {}, id), " (no Temporal UI configured)"];
  const ns = encodeURIComponent(config.temporalNamespace || "default");
  const href = `${config.temporalUi}/namespaces/${ns}/workflows/${encodeURIComponent(id)}`;
  return [h("code", { class: "workflow-id" }, id), " ",
    h("a", { class: "temporal-link", href, target: "_blank", rel: "noopener noreferrer" }, href)];
}

/** Show `job` (or that there is none) in the job page's skeleton of index.html. */
export function renderJob(job, config, ref) {
  $("#job-title").textContent = `${ref.namespace}/${ref.name}`;
  $("#job-missing").hidden = Boolean(job);
  $("#job-details").hidden = !job;
  if (!job) return;
  const status = job.status || {};
  $("#job-phase").replaceChildren(phaseBadge(status.phase || "Pending"));
  $("#job-message").textContent = status.message || "";
  $("#job-actions").replaceChildren(actionButtons("jobs", ref.namespace, ref.name, ["delete"]));
  $("#job-workflow").replaceChildren(...workflow(config, job));
  fillTable($("#job-spec"), specRows(job.spec));
  fillTable($("#job-replicas"), replicaRows(status));
  fillTable($("#job-events"), eventRows(status));
}

/**
 * Reads a job's logs again and again while it runs; once `phaseOf()` says it has ended, reads
 * them one last time and stops, as `skyctl logs -f` does.
 */
export class LogFollower {
  constructor(ref, phaseOf) {
    this.ref = ref;
    this.phaseOf = phaseOf;
    this.controller = new AbortController();
  }

  stop() { this.controller.abort(); }

  show(text, state, label) {
    const pre = $("#job-logs");
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    if (text !== null) pre.textContent = text || "(no output yet)";
    if (atEnd) pre.scrollTop = pre.scrollHeight;  // keep following the end, unless scrolled up
    const el = $("#job-logs-state");
    el.dataset.state = state;
    el.textContent = label;
  }

  async start() {
    const { signal } = this.controller;
    const { namespace, name } = this.ref;
    while (!signal.aborted) {
      const phase = await this.phaseOf();
      let text = null;
      try {
        text = await get(path(namespace, "jobs", name, "logs"), { params: { tail: 1000 }, text: true, signal });
      } catch (error) {
        if (signal.aborted || error.status === 401) return;
        this.show(`could not get the logs: ${error.message}`, "error", "retrying");
      }
      if (signal.aborted) return;
      if (endedIn("jobs", phase)) {
        this.show(text, "ended", `ended (${phase})`);
        return;
      }
      if (text !== null) this.show(text, "following", "● following");
      await sleep(FOLLOW_MS, signal);
    }
  }
}
