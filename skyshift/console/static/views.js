// What each tab shows, built from API objects with text nodes only (see dom.js).

import { actionButtons } from "./actions.js";
import { age, h } from "./dom.js";
import { workflowId } from "./kinds.js";

const PHASES = new Set([
  "Init", "Provisioning", "Ready", "Error", "Deleting", "Pending", "Scheduled", "Submitted",
  "Running", "Succeeded", "Failed", "Active", "Terminating", "Skipped", "Cancelled", "Paused",
]);

/** A phase's CSS class suffix, from a fixed list, never from the data itself. */
export function phaseClass(phase) {
  const text = String(phase || "");
  return PHASES.has(text) ? text.toLowerCase() : "other";
}

/** A phase as a badge. */
export function phaseBadge(phase) {
  return h("span", { class: `phase phase-${phaseClass(phase)}` }, phase ? String(phase) : "Unknown");
}

/** The console's own address of a job's page. */
export const jobHref = (ns, name) => `#job/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;

/**
 * The Temporal UI page of the workflow of `obj`, stored under `plural` (its id from the kinds'
 * table: `job/<ns>/<name>`, `cluster/<name>`...), or a plain id when the server names no
 * Temporal UI.
 */
export function temporalLink(config, plural, obj) {
  const id = workflowId(plural, obj);
  if (!id) return h("span", { class: "muted" }, "—");
  if (!config.temporalUi) return h("code", { class: "workflow-id" }, id);
  const ns = encodeURIComponent(config.temporalNamespace || "default");
  const href = `${config.temporalUi}/namespaces/${ns}/workflows/${encodeURIComponent(id)}`;
  return h("a", {
    class: "temporal-link", href, target: "_blank", rel: "noopener noreferrer",
    title: `Workflow ${id} in the Temporal UI`,
  }, "Temporal ↗");
}

const sum = (nodes, field) => Object.values(nodes || {})
  .reduce((total, node) => total + (Number((node || {})[field]) || 0), 0);

const round = (n) => (Math.round(n * 100) / 100).toString();

function memory(mb) {
  return mb >= 1024 ? `${round(mb / 1024)} GiB` : `${round(mb)} MiB`;
}

/** A bar of what is used out of a cluster's capacity (capacity minus allocatable). */
export function capacityBar(status, field, unit = (n) => round(n)) {
  const total = sum(status.capacity, field);
  if (!total) return h("span", { class: "muted" }, "—");
  const free = Math.min(total, Math.max(0, sum(status.allocatable, field)));
  const used = total - free;
  const pct = Math.round((used / total) * 100);
  const level = pct >= 90 ? "full" : pct >= 70 ? "busy" : "ok";
  return h("div", {
    class: `capacity capacity-${level}`, role: "meter", "aria-valuemin": 0,
    "aria-valuemax": total, "aria-valuenow": used, dataset: { used, total, field },
    title: `${unit(used)} of ${unit(total)} in use, ${unit(free)} free`,
  },
  h("div", { class: "bar" }, h("div", { class: "fill", style: { width: `${pct}%` } })),
  h("span", { class: "label" }, `${unit(used)} / ${unit(total)} used`));
}

export function clusterRows(clusters, config) {
  return [...clusters]
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
    .map((c) => {
      const status = c.status || {};
      const spec = c.spec || {};
      return h("tr", { dataset: { name: c.metadata.name } },
        h("td", { class: "name" }, c.metadata.name),
        h("td", {}, spec.manager || ""),
        h("td", {}, phaseBadge(status.phase)),
        h("td", { class: "cpu" }, capacityBar(status, "cpus")),
        h("td", { class: "memory" }, capacityBar(status, "memory", memory)),
        h("td", { class: "gpu" }, capacityBar(status, "gpus")),
        h("td", {}, age(status.lastHeartbeat)),
        h("td", { class: "message" }, status.message || ""),
        h("td", {}, temporalLink(config, "clusters", c)));
    });
}

const REPLICA_STATES = ["Running", "Pending", "Succeeded", "Failed", "Unknown"];

/** Per cluster: how many replicas are placed there and in which state. */
function replicas(status) {
  const clusters = new Set([
    ...Object.keys(status.placement || {}), ...Object.keys(status.replicaStatus || {}),
  ]);
  if (!clusters.size) return h("span", { class: "muted" }, "not placed");
  return h("ul", { class: "replicas" }, [...clusters].sort().map((cluster) => {
    const counts = (status.replicaStatus || {})[cluster] || {};
    const parts = REPLICA_STATES.filter((s) => counts[s]).map((s) => `${counts[s]} ${s.toLowerCase()}`);
    const placed = (status.placement || {})[cluster];
    if (!parts.length && placed) parts.push(`${placed} placed`);
    return h("li", { dataset: { cluster } }, h("strong", {}, cluster), `: ${parts.join(", ") || "none"}`);
  }));
}

/** The scheduler's reason per cluster while a job is pending, else the status message. */
function why(status) {
  const reasons = Object.entries(status.schedulerReasons || {});
  return [
    status.message ? h("div", { class: "message" }, status.message) : null,
    reasons.length && (status.phase || "Pending") === "Pending"
      ? h("ul", { class: "reasons" }, reasons.sort().map(([cluster, reason]) =>
        h("li", { dataset: { cluster } }, h("strong", {}, cluster), `: ${reason}`)))
      : null,
  ];
}

export function jobRows(jobs, config) {
  return [...jobs]
    .sort((a, b) => `${a.metadata.namespace}/${a.metadata.name}`
      .localeCompare(`${b.metadata.namespace}/${b.metadata.name}`))
    .map((job) => {
      const { namespace, name } = job.metadata;
      const status = job.status || {};
      return h("tr", { dataset: { key: `${namespace}/${name}` } },
        h("td", {}, namespace),
        h("td", { class: "name" }, h("a", { class: "job-link", href: jobHref(namespace, name) }, name)),
        h("td", { class: "phase-cell" }, phaseBadge(status.phase)),
        h("td", { class: "replicas-cell" }, replicas(status)),
        h("td", {}, String(status.restarts || 0)),
        h("td", { class: "why" }, why(status)),
        h("td", {}, age(job.metadata.creationTimestamp)),
        h("td", {}, temporalLink(config, "jobs", job)),
        h("td", {}, h("a", { class: "logs-button", href: `${jobHref(namespace, name)}/logs` }, "Logs"),
          " ", actionButtons("jobs", namespace, name, ["delete"])));
    });
}

export function serviceRows(services, config) {
  return [...services]
    .sort((a, b) => `${a.metadata.namespace}/${a.metadata.name}`
      .localeCompare(`${b.metadata.namespace}/${b.metadata.name}`))
    .map((svc) => {
      const { namespace, name } = svc.metadata;
      const spec = svc.spec || {};
      const status = svc.status || {};
      const ports = (spec.ports || [])
        .map((p) => `${p.port}${p.targetPort ? `→${p.targetPort}` : ""}/${p.protocol || "TCP"}`);
      const selector = Object.entries(spec.selector || {}).map(([k, v]) => `${k}=${v}`);
      // copies of the service on clusters linked with its primary, each with its own address
      const linked = (status.reachable || []).filter((r) => r.role === "linked");
      return h("tr", { dataset: { key: `${namespace}/${name}` } },
        h("td", {}, namespace),
        h("td", { class: "name" }, name),
        h("td", {}, spec.type || ""),
        h("td", {}, phaseBadge(status.phase)),
        h("td", {}, ports.join(", ")),
        h("td", {}, [status.cluster || spec.primaryCluster || "",
          ...linked.map((r) => ` + ${r.cluster} (linked)`)].join("")),
        h("td", {}, [status.externalIP || status.clusterIP || spec.clusterIP || "",
          ...linked.map((r) => `, ${r.cluster}: ${r.clusterIP || "?"}`)].join("")),
        h("td", {}, selector.join(", ")),
        h("td", {}, temporalLink(config, "services", svc)));
    });
}

export function auditRows(records) {
  return records.map((r) => {
    const object = [r.namespace, r.name].filter(Boolean).join("/");
    return h("tr", { class: `result-${r.result === "success" ? "success" : "failure"}` },
      h("td", { title: r.time || "" }, (r.time || "").replace("T", " ").replace(/\.\d+/, "")),
      h("td", {}, r.user || ""),
      h("td", {}, r.action || ""),
      h("td", {}, r.resource || ""),
      h("td", {}, object),
      h("td", {}, `${r.code ?? ""} ${r.result || ""}`),
      h("td", {}, r.client || ""));
  });
}
