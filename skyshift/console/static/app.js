// The console's controller: log in, follow clusters, jobs and services live, show logs and, for
// those allowed to read it, the audit trail. Every call is one of the REST API's own routes.

import { ApiError, Informer, get, login, onUnauthorized, path, session } from "./api.js";
import { $, fillTable } from "./dom.js";
import { auditRows, clusterRows, jobRows, serviceRows } from "./views.js";
import { pipelineRows, scheduleRows } from "./views_flow.js";

const TABS = ["clusters", "jobs", "pipelines", "schedules", "services", "audit"];
const EMPTY = () => ({ clusters: [], jobs: [], pipelines: [], schedules: [], services: [] });
const page = new URLSearchParams(location.search);
// ?watch=off: list every few seconds instead of watching (behind a proxy that buffers streams).
const useWatch = page.get("watch") !== "off";

const state = {
  config: { temporalUi: "", temporalNamespace: "default" },
  informers: [],
  modes: new Map(),
  data: EMPTY(),
  logsOf: null,
  expiry: 0,
};

function banner(message) {
  const el = $("#banner");
  el.textContent = message || "";
  el.hidden = !message;
}

function showLoggedOut(message = "") {
  clearTimeout(state.expiry);
  for (const informer of state.informers) informer.stop();
  state.informers = [];
  state.modes.clear();
  state.data = EMPTY();
  state.logsOf = null;
  session.clear();
  // Nothing of the last user stays on the page.
  render();
  fillTable($("#audit-table"), []);
  $("#logs-panel").hidden = true;
  $("#logs-text").textContent = "";
  $("#tab-audit").hidden = true;
  banner("");
  $("#tabs").hidden = true;
  $("#session").hidden = true;
  for (const tab of TABS) $(`#${tab}-view`).hidden = true;
  $("#login-view").hidden = false;
  $("#login-error").textContent = message;
  $("#password").value = "";
  $("#username").focus();
}

function showTab(name) {
  const tab = TABS.includes(name) && !$(`#tab-${name}`).hidden ? name : "jobs";
  for (const t of TABS) {
    $(`#${t}-view`).hidden = t !== tab;
    const link = $(`#tab-${t}`);
    if (t === tab) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (tab === "audit") loadAudit();
}

function render() {
  const { config, data } = state;
  fillTable($("#clusters-table"), clusterRows(data.clusters, config));
  fillTable($("#jobs-table"), jobRows(data.jobs, config, showLogs));
  fillTable($("#services-table"), serviceRows(data.services, config));
  fillTable($("#pipelines-table"), pipelineRows(data.pipelines, config));
  fillTable($("#schedules-table"), scheduleRows(data.schedules, config));
}

let pending = 0;
/** Render once for a burst of watch events (a busy cluster changes many jobs at once). */
function renderSoon() {
  if (!pending) pending = setTimeout(() => { pending = 0; render(); }, 50);
}

function showMode() {
  const modes = [...state.modes.values()];
  const live = modes.length > 0 && modes.every((m) => m === "watch");
  const el = $("#live");
  el.textContent = live ? "● live" : "polling";
  el.className = `badge ${live ? "badge-live" : "badge-poll"}`;
  el.dataset.mode = live ? "watch" : "poll";
}

function follow(kind, apiPath, fallbackPath = "") {
  const informer = new Informer(apiPath, {
    watch: useWatch,
    fallbackPath,
    onChange: (items) => { state.data[kind] = items; renderSoon(); },
    onMode: (mode) => { state.modes.set(kind, mode); showMode(); },
    onError: (error) => banner(error ? `${kind}: ${error.message}` : ""),
  });
  state.informers.push(informer.start());
}

async function loadAudit() {
  try {
    const data = await get("audit", { params: { limit: 200 } });
    fillTable($("#audit-table"), auditRows(data.items || []));
  } catch (error) {
    if (error.status !== 401) banner(`audit: ${error.message}`);
  }
}

async function loadLogs() {
  if (!state.logsOf) return;
  const { namespace, name } = state.logsOf;
  const text = $("#logs-text");
  text.textContent = "loading…";
  try {
    const logs = await get(path(namespace, "jobs", name, "logs"), {
      params: { tail: 1000 }, text: true,
    });
    text.textContent = logs || "(no output yet)";
  } catch (error) {
    text.textContent = `could not get the logs: ${error.message}`;
  }
}

function showLogs(namespace, name) {
  state.logsOf = { namespace, name };
  $("#logs-title").textContent = `${namespace}/${name}`;
  $("#logs-panel").hidden = false;
  loadLogs();
  $("#logs-panel").scrollIntoView({ block: "nearest" });
}

/** May this user read the audit trail? Asked of the API itself (403: no). */
async function mayAudit() {
  try {
    await get("audit", { params: { limit: 1 } });
    return true;
  } catch (error) {
    if (error.status === 401) throw error;
    return false;
  }
}

const EXPIRED = "Your session expired: please log in again.";

async function showLoggedIn() {
  const left = session.expiresAt ? session.expiresAt - Date.now() : Infinity;
  if (left <= 0) {
    showLoggedOut(EXPIRED);
    return;
  }
  // An open watch outlives its token; log out when the token ends, not at the next call.
  if (Number.isFinite(left)) {
    state.expiry = setTimeout(() => showLoggedOut(EXPIRED), Math.min(left, 2 ** 31 - 1));
  }
  $("#login-view").hidden = true;
  $("#user").textContent = session.user;
  try {
    state.config = await get("console/config");
    $("#tab-audit").hidden = !(await mayAudit());
  } catch (error) {
    if (error.status === 401) return;  // already back at the login form
    banner(error.message);
  }
  $("#tabs").hidden = false;
  $("#session").hidden = false;
  follow("clusters", "clusters");
  follow("jobs", "jobs", "default/jobs");
  follow("services", "services", "default/services");
  follow("pipelines", "pipelines", "default/pipelines");
  follow("schedules", "schedules", "default/schedules");
  showTab(location.hash.slice(1));
}

function init() {
  onUnauthorized((message) => showLoggedOut(`Please log in again (${message}).`));
  $("#login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = $("#login-button");
    button.disabled = true;
    $("#login-error").textContent = "";
    try {
      await login($("#username").value.trim(), $("#password").value);
      $("#password").value = "";
      await showLoggedIn();
    } catch (error) {
      const why = error instanceof ApiError ? error.message : `cannot reach the API (${error.message})`;
      $("#login-error").textContent = `Login failed: ${why}`;
    } finally {
      button.disabled = false;
    }
  });
  $("#logout").addEventListener("click", () => showLoggedOut());
  $("#logs-refresh").addEventListener("click", loadLogs);
  $("#logs-close").addEventListener("click", () => {
    state.logsOf = null;
    $("#logs-panel").hidden = true;
  });
  $("#audit-refresh").addEventListener("click", loadAudit);
  window.addEventListener("hashchange", () => showTab(location.hash.slice(1)));
  // Ages move on even when nothing changes.
  setInterval(() => { if (state.informers.length) render(); }, 10000);
  if (session.token) showLoggedIn();
  else showLoggedOut();
}

init();
