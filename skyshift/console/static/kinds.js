// The kinds with a lifecycle as the API's own table gives them (GET console/kinds, from
// skyshift/contract/lifecycles.py): their names, workflow id scheme and the phases in which
// their workflow has ended. The console reads them here instead of listing them again.

let table = [];

/** Keep the API's table: [{ kind, plural, namespaced, workflowIdPrefix, firstPhase, ended }]. */
export function setKinds(kinds) {
  table = Array.isArray(kinds) ? kinds : [];
}

const byPlural = (plural) => table.find((k) => k.plural === plural);

/** How the console names an object of the kind stored under `plural` ("job"). */
export function kindName(plural) {
  const k = byPlural(plural);
  return k ? k.kind.toLowerCase() : plural;
}

/** The id of an object's lifecycle workflow ("" when the table does not know its kind). */
export function workflowId(plural, obj) {
  const k = byPlural(plural);
  if (!k) return "";
  const { namespace, name } = obj.metadata;
  return k.namespaced
    ? `${k.workflowIdPrefix}/${namespace || "default"}/${name}`
    : `${k.workflowIdPrefix}/${name}`;
}

/** Has the workflow of an object of this kind ended by itself in `phase`? */
export function endedIn(plural, phase) {
  const k = byPlural(plural);
  return Boolean(k) && k.ended.includes(phase);
}
