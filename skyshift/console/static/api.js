// The console's client of the SkyShift REST API: the same routes, token and errors as skyctl.
// The token lives in sessionStorage (gone with the tab), never in localStorage.

const TOKEN = "skyshift.console.token";
const USER = "skyshift.console.user";
const EXPIRES = "skyshift.console.expires";

/** The API's root: the console page is served at <api>/console/. */
export const apiBase = new URL("../", document.baseURI);

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const session = {
  get token() { return sessionStorage.getItem(TOKEN) || ""; },
  get user() { return sessionStorage.getItem(USER) || ""; },
  /** When the token expires (ms since the epoch, by this browser's clock; 0: unknown). */
  get expiresAt() { return Number(sessionStorage.getItem(EXPIRES)) || 0; },
  save(token, user, expiresIn) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(USER, user);
    // expires_in rather than the server's expires_at: no trust in the two clocks agreeing
    if (expiresIn > 0) sessionStorage.setItem(EXPIRES, String(Date.now() + expiresIn * 1000));
  },
  clear() {
    for (const key of [TOKEN, USER, EXPIRES]) sessionStorage.removeItem(key);
  },
};

let unauthorized = () => {};
/** Called when the API answers 401 (the token expired or was revoked): log in again. */
export function onUnauthorized(handler) { unauthorized = handler; }

/** The URL of an API path ("jobs", "default/jobs/x/logs") with query parameters. */
export function apiUrl(path, params = {}) {
  const url = new URL(path.replace(/^\/+/, ""), apiBase);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  }
  return url;
}

/** An API path from raw segments, each percent-encoded ("default", "jobs", name). */
export function path(...segments) {
  return segments.map((s) => encodeURIComponent(s)).join("/");
}

async function errorOf(response) {
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) message = String(body.error.message);
  } catch { /* not the API's error body */ }
  return new ApiError(response.status, message);
}

function headers() { return { Authorization: `Bearer ${session.token}` }; }

async function checked(response) {
  if (response.status === 401) {
    const error = await errorOf(response);
    unauthorized(error.message);
    throw error;
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

/** POST /token with the OAuth2 password form; keeps the token for this tab. */
export async function login(username, password) {
  const body = new URLSearchParams({ grant_type: "password", username, password });
  const response = await fetch(apiUrl("token"), { method: "POST", body, cache: "no-store" });
  if (!response.ok) throw await errorOf(response);
  const data = await response.json();
  session.save(data.access_token, username, Number(data.expires_in) || 0);
  return data;
}

/** GET an API path: the decoded JSON (or the text, with `text: true`). */
export async function get(apiPath, { params = {}, text = false, signal } = {}) {
  const response = await checked(
    await fetch(apiUrl(apiPath, params), { headers: headers(), signal, cache: "no-store" }),
  );
  return text ? response.text() : response.json();
}

/**
 * A write to an API path (POST, PATCH, DELETE) with an optional JSON body: the decoded answer,
 * or an ApiError carrying the API's own message (403 when the user's roles do not allow it).
 */
export async function send(method, apiPath, { body, contentType = "application/json" } = {}) {
  const init = { method, headers: headers(), cache: "no-store" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = contentType;
  }
  const response = await checked(await fetch(apiUrl(apiPath), init));
  return response.json().catch(() => null);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export const sleep = (ms, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); });
});

const keyOf = (obj) => `${obj.metadata.namespace || ""}/${obj.metadata.name}`;

/**
 * Keeps the objects of one list route current, the way a Kubernetes informer does: list, then
 * watch from the list's resourceVersion (`?watch=true`, ndjson read from a fetch stream). When
 * the watch cannot be had (an error, a proxy that buffers the stream, `?watch=off` on the page)
 * it falls back to listing every `pollMs`, and tries the watch again later.
 *
 * `onChange(items)` gets every object after each change; `onMode("watch" | "poll", error)` says
 * how the informer follows changes.
 */
export class Informer {
  constructor(apiPath, { onChange, onMode = () => {}, onError = () => {}, watch = true,
                         pollMs = 3000, idleMs = 45000, fallbackPath = "" }) {
    this.path = apiPath;
    this.fallbackPath = fallbackPath;
    this.onChange = onChange;
    this.onMode = onMode;
    this.onError = onError;
    this.useWatch = watch;
    this.pollMs = pollMs;
    this.idleMs = idleMs;  // no byte for this long (keep-alives included): the stream is stuck
    this.items = new Map();
    this.controller = new AbortController();
    this.failures = 0;
  }

  start() { this.run(); return this; }

  stop() { this.controller.abort(); }

  get stopped() { return this.controller.signal.aborted; }

  emit() { this.onChange([...this.items.values()]); }

  async list() {
    let data;
    try {
      data = await get(this.path, { signal: this.controller.signal });
    } catch (error) {
      // Not allowed to list every namespace: show the ones the fallback path reaches.
      if (error.status !== 403 || !this.fallbackPath) throw error;
      this.path = this.fallbackPath;
      this.fallbackPath = "";
      data = await get(this.path, { signal: this.controller.signal });
    }
    this.items = new Map(data.items.map((obj) => [keyOf(obj), obj]));
    this.emit();
    return data.metadata.resourceVersion;
  }

  async run() {
    while (!this.stopped) {
      try {
        const rv = await this.list();
        this.onError(null);
        if (!this.useWatch) {
          this.onMode("poll", null);
          await sleep(this.pollMs, this.controller.signal);
          continue;
        }
        await this.watch(rv);  // returns when the server ends the stream: list again
        this.failures = 0;
      } catch (error) {
        if (this.stopped || error.status === 401) return;
        if (error.status === 410) continue;  // the revision was compacted: list again
        this.failures += 1;
        this.onMode("poll", error);
        if (!(error instanceof ApiError) || error.status >= 500 || error.status === 403) {
          this.onError(error);
        }
        // Poll a few times (more after repeated failures), then try the watch again.
        const polls = Math.min(this.failures, 10);
        for (let i = 0; i < polls && !this.stopped; i += 1) {
          await sleep(this.pollMs, this.controller.signal);
          if (i < polls - 1) await this.list().catch(() => {});
        }
      }
    }
  }

  async watch(resourceVersion) {
    const attempt = new AbortController();
    const stop = () => attempt.abort();
    this.controller.signal.addEventListener("abort", stop);
    let idle = setTimeout(stop, this.idleMs);
    try {
      const params = { watch: "true", resourceVersion, allowWatchBookmarks: "true" };
      const response = await checked(await fetch(apiUrl(this.path, params), {
        headers: headers(), signal: attempt.signal, cache: "no-store",
      }));
      if (!response.body) throw new Error("this browser cannot stream a response");
      this.onMode("watch", null);
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        clearTimeout(idle);
        idle = setTimeout(stop, this.idleMs);
        buffer += decoder.decode(value, { stream: true });
        let newline;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, newline).trim();
          buffer = buffer.slice(newline + 1);
          if (line) this.apply(JSON.parse(line));
        }
      }
    } catch (error) {
      if (attempt.signal.aborted && !this.stopped) throw new Error("the watch went silent");
      throw error;
    } finally {
      clearTimeout(idle);
      this.controller.signal.removeEventListener("abort", stop);
    }
  }

  apply(event) {
    const obj = event.object || {};
    switch (event.type) {
      case "ADDED":
      case "MODIFIED":
        this.items.set(keyOf(obj), obj);
        break;
      case "DELETED":
        this.items.delete(keyOf(obj));
        break;
      case "ERROR": {
        const error = obj.error || {};
        throw new ApiError(error.code || 500, error.message || "the watch failed");
      }
      default:
        return;  // BOOKMARK: nothing changed
    }
    this.emit();
  }
}
