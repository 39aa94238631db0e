// The Quotas tab: what each namespace's admitted jobs hold against its quotas (status.used,
// kept current by the control worker), what it borrows from its cohort, and its weight.

import { h } from "./dom.js";

/** 34359.738368 (memory is held in MB of 10^6 bytes) -> "32Gi"; cpus and counts as numbers. */
export function amount(key, value) {
  const n = Number(value) || 0;
  if (key === "memory") {
    const gib = (n * 1e6) / 2 ** 30;
    return gib < 1 ? `${+n.toFixed(3)}MB` : `${+gib.toPrecision(4)}Gi`;
  }
  return `${+n.toFixed(3)}`;
}

function usedOverHard(spec, status) {
  const used = status.used || {};
  return Object.keys(spec.hard || {}).sort().map((key) => {
    const limit = Number(spec.hard[key]) || 0;
    const have = Number(used[key]) || 0;
    const full = limit > 0 && have >= limit;
    return h("span", { class: full ? "quota-full" : "quota-ok", dataset: { key } },
      `${key}: ${amount(key, have)}/${amount(key, limit)}`);
  });
}

function joined(parts) {
  const out = [];
  parts.forEach((p, i) => { if (i) out.push(", "); out.push(p); });
  return out;
}

export function quotaRows(quotas) {
  return [...quotas]
    .sort((a, b) => `${a.metadata.namespace}/${a.metadata.name}`
      .localeCompare(`${b.metadata.namespace}/${b.metadata.name}`))
    .map((q) => {
      const { namespace, name } = q.metadata;
      const spec = q.spec || {};
      const status = q.status || {};
      const borrowed = Object.entries(status.borrowed || {})
        .map(([k, v]) => `${k}: ${amount(k, v)}`).join(", ");
      return h("tr", { dataset: { key: `${namespace}/${name}` } },
        h("td", {}, namespace),
        h("td", { class: "name" }, name),
        h("td", {}, spec.cohort || "—"),
        h("td", { class: "quota-used" }, ...joined(usedOverHard(spec, status))),
        h("td", {}, borrowed || "—"),
        h("td", {}, `${spec.weight ?? 1}`));
    });
}
