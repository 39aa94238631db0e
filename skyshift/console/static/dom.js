// DOM helpers. Everything the console shows is built with createElement and text nodes: data
// from the API (names, messages, logs) is never parsed as HTML.

/** The element matching `selector` (throws if the page lacks it: a bug, not a data problem). */
export function $(selector, root = document) {
  const el = root.querySelector(selector);
  if (!el) throw new Error(`console page lacks ${selector}`);
  return el;
}

/**
 * h("td", {class: "phase"}, "Running"): an element with attributes and children. Strings become
 * text nodes; `on<event>` props are listeners; `style` is an object of CSS properties (CSSOM,
 * which the Content-Security-Policy allows, unlike style attributes).
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "style") for (const [p, v] of Object.entries(value)) el.style.setProperty(p, v);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replace the rows of `table`'s tbody; shows the section's "empty" note when there are none. */
export function fillTable(table, rows) {
  const body = $("tbody", table);
  body.replaceChildren(...rows);
  const empty = table.parentElement.querySelector(".empty");
  if (empty) empty.hidden = rows.length > 0;
}

/** "5s", "3m", "2h", "4d" since an ISO time ("" when there is none). */
export function age(iso, now = Date.now()) {
  if (!iso) return "";
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}
