// The console's controller: log in, follow clusters, jobs, pipelines, schedules and services
// live, filter them, show a job's own page and, for those allowed to read it, the audit trail.
// Every call is one of the REST API's own routes.

import { ApiError, Informer, get, login, onUnauthorized, path, session } from "./api.js";
import { $, fillTable } from "./dom.js";
import { initFilters, matches, offerNamespaces, resetFilters } from "./filters.js";
import { LogFollower, renderJob } from "./jobpage.js";
import { setKinds } from "./kinds.js";
import { auditRows, clusterRows, jobRows, serviceRows } from "./views.js";
import { quotaRows } from "./quotas.js";
import { pipelineRows, scheduleRows } from "./views_flow.js";

const TABS = ["clusters", "jobs", "pipelines", "schedules", "services", "quotas", "audit"];
const EMPTY = () => ({
  clusters: [], jobs: [], pipelines: [], schedules: [], services: [], quotas: [],
});
const page = new URLSearchParams(location.search);
// ?watch=off: list every few seconds instead of watching (behind a proxy that buffers streams).
const useWatch = page.get("watch") !== "off";

const state = {
  config: { temporalUi: "", temporalNamespace: "default" },
  informers: [],
  modes: new Map(),
  data: EMPTY(),
  job: null,  // the job page shown: { ref, obj (when not in the jobs list), follower }
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
  closeJob();
  session.clear();
  // Nothing of the last user stays on the page.
  resetFilters();
  render();
  fillTable($("#audit-table"), []);
  $("#job-logs").textContent = "";
  $("#job-logs-state").textContent = "";
  $("#tab-audit").hidden = true;
  banner("");
  $("#notice").hidden = true;
  $("#tabs").hidden = true;
  $("#session").hidden = true;
  $("#filters").hidden = true;
  for (const view of VIEWS) $(`#${view}-view`).hidden = true;
  $("#login-view").hidden = false;
  $("#login-error").textContent = message;
  $("#password").value = "";
  $("#username").focus();
}

const VIEWS = [...TABS, "job"];

/** Show one view; `current` is the tab marked as the one shown. */
function showView(view, current) {
  for (const v of VIEWS) $(`#${v}-view`).hidden = v !== view;
  for (const t of TABS) {
    const link = $(`#tab-${t}`);
    if (t === current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  $("#filters").hidden = !["clusters", "jobs", "pipelines", "schedules", "services", "quotas"]
    .includes(view);
}

function showTab(name) {
  const tab = TABS.includes(name) && !$(`#tab-${name}`).hidden ? name : "jobs";
  showView(tab, tab);
  if (tab === "audit") loadAudit();
}

const sameJob = (ref) => (job) =>
  job.metadata.namespace === ref.namespace && job.metadata.name === ref.name;

/** The job of the job page: live from the jobs list, else as last read on its own. */
function shownJob() {
  if (!state.job) return null;
  return state.data.jobs.find(sameJob(state.job.ref)) || state.job.obj;
}

/** The job's phase now, for the log follower ("Deleted" once the job is gone). */
async function phaseNow(ref) {
  if (!state.data.jobs.some(sameJob(ref))) {
    try {
      state.job.obj = await get(path(ref.namespace, "jobs", ref.name));
    } catch (error) {
      if (error.status === 404) state.job.obj = null;
    }
    renderSoon();
  }
  const job = shownJob();
  return job ? (job.status || {}).phase || "Pending" : "Deleted";
}

function closeJob() {
  if (state.job) state.job.follower.stop();
  state.job = null;
}

function showJob(ref, toLogs) {
  const same = state.job && state.job.ref.namespace === ref.namespace && state.job.ref.name === ref.name;
  if (!same) {
    closeJob();
    state.job = { ref, obj: null, follower: new LogFollower(ref, () => phaseNow(ref)) };
    $("#job-logs").textContent = "loading…";
    state.job.follower.start();
  }
  showView("job", "jobs");
  renderJob(shownJob(), state.config, ref);
  if (toLogs) $("#job-logs-section").scrollIntoView({ block: "start" });
}

/** The view the address asks for: a tab (#jobs) or a job's page (#job/<ns>/<name>[/logs]). */
function route() {
  const job = /^job\/([^/]+)\/([^/]+)(\/logs)?$/.exec(location.hash.slice(1));
  if (job) {
    showJob({ namespace: decodeURIComponent(job[1]), name: decodeURIComponent(job[2]) }, Boolean(job[3]));
    return;
  }
  closeJob();
  showTab(location.hash.slice(1));
}

function render() {
  const { config, data } = state;
  offerNamespaces([data.jobs, data.pipelines, data.schedules, data.services, data.quotas]);
  fillTable($("#clusters-table"), clusterRows(data.clusters.filter(matches), config));
  fillTable($("#jobs-table"), jobRows(data.jobs.filter(matches), config));
  fillTable($("#services-table"), serviceRows(data.services.filter(matches), config));
  fillTable($("#pipelines-table"), pipelineRows(data.pipelines.filter(matches), config));
  fillTable($("#schedules-table"), scheduleRows(data.schedules.filter(matches), config));
  fillTable($("#quotas-table"), quotaRows(data.quotas.filter(matches)));
  if (state.job) renderJob(shownJob(), config, state.job.ref);
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

/** Keep `state.data[kind]` current: by a watch, or with `poll`, by listing every few seconds
 * (a browser opens at most 6 connections to one host, and each watch holds one for good, so
 * the lists that change rarely poll and leave connections for logs and actions). */
function follow(kind, apiPath, fallbackPath = "", poll = false) {
  const informer = new Informer(apiPath, {
    watch: useWatch && !poll,
    pollMs: poll ? 5000 : 3000,
    fallbackPath,
    onChange: (items) => { state.data[kind] = items; renderSoon(); },
    onMode: (mode) => { if (!poll) { state.modes.set(kind, mode); showMode(); } },
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
    setKinds((await get("console/kinds")).kinds);
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
  follow("quotas", "quotas", "default/quotas", true);
  route();
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
  $("#audit-refresh").addEventListener("click", loadAudit);
  $("#notice-close").addEventListener("click", () => { $("#notice").hidden = true; });
  initFilters(render);
  window.addEventListener("hashchange", () => { if (state.informers.length) route(); });
  // Ages move on even when nothing changes.
  setInterval(() => { if (state.informers.length) render(); }, 10000);
  if (session.token) showLoggedIn();
  else showLoggedOut();
}

init();
