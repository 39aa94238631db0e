// What a user can do from the console: delete jobs, cancel or delete pipelines, pause, resume,
// run now or delete schedules. Each is one call of the REST API, with the user's own token, so
// the API's authorization decides: a refusal is shown with the API's message and nothing else
// happens. Destructive actions ask first.

import { path, send } from "./api.js";
import { $, h } from "./dom.js";
import { kindName } from "./kinds.js";

const MERGE = "application/merge-patch+json";
const patch = (spec) => (plural, ns, name) =>
  send("PATCH", path(ns, plural, name), { body: { spec }, contentType: MERGE });

/** Each action: its button label, whether it asks first, what it says when done, its call. */
export const ACTIONS = {
  delete: {
    label: "Delete", confirm: true, done: "deleting",
    call: (plural, ns, name) => send("DELETE", path(ns, plural, name)),
  },
  cancel: { label: "Cancel", confirm: true, done: "cancelling", call: patch({ cancel: true }) },
  pause: { label: "Pause", done: "paused", call: patch({ suspend: true }) },
  resume: { label: "Resume", done: "resumed", call: patch({ suspend: false }) },
  trigger: {
    label: "Run now", done: "triggered",
    call: (plural, ns, name) => send("POST", path(ns, plural, name, "trigger")),
  },
};

/** What an action did, or why the API refused it, in the page's notice line. */
function notice(text, ok) {
  const el = $("#notice");
  $("#notice-text").textContent = text;
  el.className = ok ? "notice notice-ok" : "notice notice-refused";
  el.dataset.result = ok ? "ok" : "refused";
  el.hidden = false;
}

/** Ask in the page's modal dialog; resolves true only for the confirming button. */
function ask(question, verb) {
  const dialog = $("#confirm");
  const yes = $("#confirm-yes");
  const no = $("#confirm-no");
  $("#confirm-text").textContent = question;
  yes.textContent = verb;
  return new Promise((resolve) => {
    const done = (answer) => {
      yes.onclick = null;
      no.onclick = null;
      dialog.oncancel = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    yes.onclick = () => done(true);
    no.onclick = () => done(false);
    dialog.oncancel = () => done(false);  // Escape
    dialog.showModal();
    no.focus();  // the safe answer is the default one
  });
}

/** Run `action` on an object, asking first when it is destructive. */
export async function act(action, plural, ns, name) {
  const spec = ACTIONS[action];
  const what = `${kindName(plural)} ${ns}/${name}`;
  if (spec.confirm && !(await ask(`${spec.label} ${what}? This cannot be undone.`, spec.label))) {
    return;
  }
  try {
    await spec.call(plural, ns, name);
    notice(`${what} ${spec.done}`, true);
  } catch (error) {
    if (error.status !== 401) notice(`${spec.label} ${what} refused: ${error.message}`, false);
  }
}

/** The buttons of `actions` for one object. */
export function actionButtons(plural, ns, name, actions) {
  return h("span", { class: "row-actions" }, actions.map((action) => h("button", {
    type: "button", class: `action action-${action}`, dataset: { action },
    onclick: () => act(action, plural, ns, name),
  }, ACTIONS[action].label)));
}
