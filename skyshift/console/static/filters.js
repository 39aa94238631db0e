// The lists' namespace filter and search box: they narrow what is shown, never what is fetched
// (every list stays live, so clearing them shows everything at once).

import { $, h } from "./dom.js";

const filters = { namespace: "", search: "" };

/** Does `obj` pass the filter (cluster-wide objects have no namespace: only the search)? */
export function matches(obj) {
  const { namespace, name } = obj.metadata;
  if (filters.namespace && namespace !== undefined && namespace !== filters.namespace) return false;
  const words = filters.search.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const text = `${namespace || ""}/${name}`.toLowerCase();
  return words.every((word) => text.includes(word));
}

/** Offer every namespace seen in `lists` (and keep the one chosen, even when it empties). */
export function offerNamespaces(lists) {
  const select = $("#ns-filter");
  const seen = new Set(lists.flat().map((obj) => obj.metadata.namespace).filter(Boolean));
  if (filters.namespace) seen.add(filters.namespace);
  const wanted = ["", ...[...seen].sort()];
  const have = [...select.options].map((o) => o.value);
  if (wanted.join("\n") === have.join("\n")) return;
  select.replaceChildren(...wanted.map((ns) => h("option", { value: ns }, ns || "All namespaces")));
  select.value = filters.namespace;
}

/** Wire the controls; `onChange` re-renders the lists. */
export function initFilters(onChange) {
  $("#ns-filter").addEventListener("change", (event) => {
    filters.namespace = event.target.value;
    onChange();
  });
  $("#search").addEventListener("input", (event) => {
    filters.search = event.target.value;
    onChange();
  });
}

/** Back to everything (a new login). */
export function resetFilters() {
  filters.namespace = "";
  filters.search = "";
  $("#search").value = "";
  $("#ns-filter").replaceChildren(h("option", { value: "" }, "All namespaces"));
}
