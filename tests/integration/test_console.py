"""The web console in a real headless Chromium, against a real API server on a real etcd.

What a user sees is asserted through the page itself: logging in on its form, the clusters with
their capacity bars, a job whose phase changes while the page is open (the watch), the pending
reason of a job that fits nowhere, its logs, the links to each lifecycle in the Temporal UI and
the audit tab, shown to an admin and not to a reader. The browser runs in a thread so that the
API server (uvicorn in the test's event loop) keeps serving while the browser waits.

``SKYSHIFT_CONSOLE_SCREENSHOTS=docs/console`` regenerates the screenshots of docs/console.md.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from skyshift.api import ApiOptions, create_app
from skyshift.config import Settings
from skyshift.store import ObjectStore
from tests.fixtures.api import RecordingLifecycle, uvicorn_server
from tests.fixtures.auth import admin_password, bearer, test_auth_config, token_for
from tests.fixtures.browser import browser, console_errors, in_thread, screenshot_dir

pytestmark = pytest.mark.integration
__all__ = ["browser"]  # a fixture (tests/conftest.py does not list tests.fixtures.browser)

TEMPORAL_UI = "http://temporal.example.test:8233"
TEMPORAL_NS = "skyshift-prod"
WAIT = 20.0
READER_PASSWORD = "reader-Passw0rd-long"


@dataclass
class Console:
    url: str
    admin_password: str
    admin: httpx.AsyncClient  # logged in as admin
    store: ObjectStore
    lifecycle: RecordingLifecycle  # its log_text is what every job's logs say


@contextlib.asynccontextmanager
async def serve_console(
    store: ObjectStore, home: Path, **auth_overrides: Any
) -> AsyncIterator[Console]:
    """An API server (auth on, a recording lifecycle) whose Temporal UI is TEMPORAL_UI."""
    ui = TEMPORAL_UI + "/"  # a trailing slash in the setting: no double slash in the links
    settings = Settings(home=home, temporal_ui_url=ui, temporal_namespace=TEMPORAL_NS)
    options = ApiOptions()
    options.watch.keepalive = 0.5
    lifecycle = RecordingLifecycle(log_text="hello from rank 0\nstep 1/3 loss=0.41\n")
    app = create_app(
        settings,
        store=store,
        lifecycle=lifecycle,
        options=options,
        auth=test_auth_config(home, **auth_overrides),
    )
    async with uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as c:
        password = admin_password(home)
        c.headers.update(bearer(await token_for(c, "admin", password)))
        yield Console(url, password, c, store, lifecycle)


@pytest_asyncio.fixture
async def console(store: ObjectStore, auth_home: Path) -> AsyncIterator[Console]:
    async with serve_console(store, auth_home) as c:
        yield c


async def created(client: httpx.AsyncClient, path: str, manifest: dict[str, Any]) -> None:
    r = await client.post(path, json=manifest)
    assert r.status_code == 201, r.text


async def set_status(
    store: ObjectStore, plural: str, name: str, ns: str | None, **status: Any
) -> None:
    """Write status fields straight to the store, as the lifecycle plane would."""

    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        obj.setdefault("status", {}).update(status)
        return obj

    await store.guaranteed_update(plural, name, ns, mutate)


async def seed(c: Console) -> None:
    """A cluster with 6 of 8 CPUs in use (and a busier one), a job that will run and one that
    fits nowhere."""
    cluster = {"kind": "Cluster", "metadata": {"name": "gpu-east"}}
    cluster["spec"] = {"manager": "local", "cpus": 8, "memory": "16Gi"}
    await created(c.admin, "/clusters", cluster)
    await set_status(
        c.store,
        "clusters",
        "gpu-east",
        None,
        phase="Ready",
        capacity={"node-1": {"cpus": 8, "memory": 16384, "gpus": 0}},
        allocatable={"node-1": {"cpus": 2, "memory": 12288, "gpus": 0}},
        lastHeartbeat=datetime.now(UTC).isoformat(),
    )
    slurm = {"kind": "Cluster", "metadata": {"name": "slurm-west"}}
    slurm["spec"] = {"manager": "slurm", "cpus": 64, "memory": "256Gi"}
    await created(c.admin, "/clusters", slurm)
    await set_status(
        c.store,
        "clusters",
        "slurm-west",
        None,
        phase="Ready",
        capacity={f"n{i}": {"cpus": 32, "memory": 131072, "gpus": 4} for i in (1, 2)},
        allocatable={"n1": {"cpus": 4, "memory": 65536, "gpus": 0}, "n2": {"cpus": 20}},
        lastHeartbeat=datetime.now(UTC).isoformat(),
    )
    job = {"image": "python:3.12", "run": "python train.py", "replicas": 2}
    await created(
        c.admin,
        "/default/jobs",
        {"kind": "Job", "metadata": {"name": "train"}, "spec": {**job, "resources": {"cpus": 1}}},
    )
    huge = {**job, "replicas": 1, "resources": {"cpus": 64}}
    await created(
        c.admin, "/default/jobs", {"kind": "Job", "metadata": {"name": "huge"}, "spec": huge}
    )
    await set_status(
        c.store,
        "jobs",
        "huge",
        "default",
        phase="Pending",
        # user-controlled text must show as text, never as markup
        message='<img src=x id="injected"> fits on no cluster',
        schedulerReasons={"gpu-east": "needs 64 CPUs per replica; 2 of 8 free"},
    )


#: What a failed wait reports: which views are shown and the page's messages.
PAGE_STATE = """return [...document.querySelectorAll(
  'section.view:not([hidden]), #banner:not([hidden]), #login-error, #notice:not([hidden])')]
  .map((e) => `${e.id}: ${e.textContent.replace(/\\s+/g, ' ').slice(0, 200)}`)"""


class Page:
    """The console as a user drives it (blocking selenium calls; run them in a thread)."""

    def __init__(self, driver: Any, url: str, shots: Path) -> None:
        self.d = driver
        self.url = url
        self.shots = shots

    def wait(self, condition: Any, what: str, timeout: float = WAIT) -> Any:
        # the tables are re-rendered on every watch event: an element found a moment ago may
        # be gone when it is read, which only means "look again"
        from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(
                self.d,
                timeout,
                poll_frequency=0.1,
                ignored_exceptions=(StaleElementReferenceException,),
            ).until(condition, what)
        except TimeoutException as exc:  # say what the page's scripts complained about
            shown = self.d.execute_script(PAGE_STATE)
            raise AssertionError(
                f"waited for {what}; the page shows {shown}, its console: {console_errors(self.d)}"
            ) from exc

    def css(self, selector: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.d.find_element(By.CSS_SELECTOR, selector)

    def click(self, selector: str) -> None:
        """Click the first match, found again when the page drew it anew in between (a table
        row's button is replaced on every watch event)."""

        def clicked(_: Any) -> bool:
            self.css(selector).click()
            return True

        self.wait(clicked, f"a click on {selector}")

    def attribute(self, selector: str, name: str) -> str:
        """Attribute ``name`` of the first match (read again when it was drawn anew)."""
        return str(self.wait(lambda _: self.css(selector).get_attribute(name) or "",
                             f"{name} of {selector}"))

    def all(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.d.find_elements(By.CSS_SELECTOR, selector))

    def text_of(self, selector: str) -> str:
        from selenium.common.exceptions import StaleElementReferenceException

        found = self.all(selector)
        try:
            return str(found[0].text) if found else ""
        except StaleElementReferenceException:  # re-rendered since it was found
            return ""

    def visible(self, selector: str) -> bool:
        found = self.all(selector)
        return bool(found) and bool(found[0].is_displayed())

    def wait_text(self, selector: str, expected: str, timeout: float = WAIT) -> str:
        self.wait(
            lambda _: expected in self.text_of(selector),
            f"{expected!r} in {selector} (it shows {self.text_of(selector)!r})",
            timeout,
        )
        return self.text_of(selector)

    def open(self, query: str = "") -> None:
        self.d.get(f"{self.url}/console{query}")
        self.wait(lambda _: self.visible("#login-form"), "the login form")

    def login(self, user: str, password: str, shot: str | None = None) -> None:
        self.css("#username").send_keys(user)
        self.css("#password").send_keys(password)
        if shot:
            self.shoot(shot)
        self.css("#login-button").click()
        self.wait(lambda _: self.visible("#jobs-view"), "the jobs view after logging in")

    def tab(self, name: str) -> None:
        self.css(f"#tab-{name}").click()
        self.wait(lambda _: self.visible(f"#{name}-view"), f"the {name} view")

    def shoot(self, name: str) -> None:
        self.d.save_screenshot(str(self.shots / f"{name}.png"))


async def add_reader(c: Console, name: str = "riley") -> httpx.AsyncClient:
    """A user with the reader role (from an invite, as a newcomer would), logged in."""
    r = await c.admin.post("/invite", json={"roles": ["reader"]})
    assert r.status_code == 201, r.text
    body = {"username": name, "password": READER_PASSWORD, "invite": r.json()["invite"]}
    client = httpx.AsyncClient(base_url=c.url, timeout=30)
    r = await client.post("/register_user", json=body)
    assert r.status_code == 201, r.text
    client.headers.update(bearer(await token_for(client, name, READER_PASSWORD)))
    return client


def job_row(name: str, ns: str = "default") -> str:
    return f'#jobs-table tr[data-key="{ns}/{name}"]'


async def test_console_shows_what_a_user_needs_live(
    console: Console, browser: Any, tmp_path: Path
) -> None:
    c = console
    await seed(c)
    page = Page(browser, c.url, screenshot_dir(tmp_path))
    await in_thread(page.open)
    assert browser.current_url == f"{c.url}/console/"
    assert await in_thread(browser.execute_script, "return sessionStorage.length") == 0
    await in_thread(page.login, "admin", c.admin_password, "login")
    # the token is kept for this tab only
    stored = await in_thread(
        browser.execute_script,
        "return [sessionStorage.getItem('skyshift.console.token'), localStorage.length]",
    )
    assert stored[0] and stored[1] == 0

    # Jobs: both rows; the phase follows the watch while the page stays open.
    train = job_row("train")
    assert "Pending" in await in_thread(page.wait_text, f"{train} .phase", "Pending")
    await in_thread(
        page.wait,
        lambda _: page.css("#live").get_attribute("data-mode") == "watch",
        "the live badge (watching)",
    )
    await set_status(
        c.store, "jobs", "train", "default", phase="Scheduled", placement={"gpu-east": 2}
    )
    await in_thread(page.wait_text, f"{train} .phase", "Scheduled")
    await in_thread(page.wait_text, f"{train} .replicas-cell", "gpu-east: 2 placed")
    await set_status(
        c.store,
        "jobs",
        "train",
        "default",
        phase="Running",
        replicaStatus={"gpu-east": {"Running": 1, "Pending": 1}},
    )
    cell = await in_thread(page.wait_text, f"{train} .replicas-cell", "1 running")
    assert cell == "gpu-east: 1 running, 1 pending"
    assert await in_thread(page.text_of, f"{train} .phase") == "Running"
    assert await in_thread(page.css("#live").get_attribute, "data-mode") == "watch"

    # The pending job says why, per cluster; its message is text, not markup.
    huge = job_row("huge")
    reason = await in_thread(page.text_of, f'{huge} .reasons li[data-cluster="gpu-east"]')
    assert reason == "gpu-east: needs 64 CPUs per replica; 2 of 8 free"
    message = await in_thread(page.text_of, f"{huge} .why .message")
    assert message == '<img src=x id="injected"> fits on no cluster'
    assert await in_thread(page.all, "#injected") == []

    # The Temporal UI link opens the job's workflow (id job/<ns>/<name>) in the configured UI.
    link = await in_thread(page.css(f"{train} a.temporal-link").get_attribute, "href")
    assert link == f"{TEMPORAL_UI}/namespaces/{TEMPORAL_NS}/workflows/job%2Fdefault%2Ftrain"

    await in_thread(page.shoot, "jobs")
    # Logs of a job, from GET /{ns}/jobs/{name}/logs, on the job's own page.
    await in_thread(page.css(f"{train} .logs-button").click)
    await in_thread(page.wait_text, "#job-logs", "step 1/3 loss=0.41")
    assert await in_thread(page.text_of, "#job-title") == "default/train"
    await in_thread(page.tab, "jobs")

    # Clusters: the capacity bar shows 6 of 8 CPUs in use.
    await in_thread(page.tab, "clusters")
    row = '#clusters-table tr[data-name="gpu-east"]'
    await in_thread(page.wait_text, f"{row} .cpu", "6 / 8 used")
    bar = await in_thread(page.css, f"{row} .cpu .capacity")
    assert await in_thread(bar.get_attribute, "aria-valuenow") == "6"
    assert await in_thread(bar.get_attribute, "aria-valuemax") == "8"
    fill = await in_thread(page.css, f"{row} .cpu .fill")
    width = await in_thread(browser.execute_script, "return arguments[0].style.width", fill)
    assert width == "75%"
    assert await in_thread(page.text_of, f"{row} .memory") == "4 GiB / 16 GiB used"
    link = await in_thread(page.css(f"{row} a.temporal-link").get_attribute, "href")
    assert link == f"{TEMPORAL_UI}/namespaces/{TEMPORAL_NS}/workflows/cluster%2Fgpu-east"
    await in_thread(page.shoot, "clusters")

    # Services, created while the page is open.
    await created(
        c.admin,
        "/default/services",
        {
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"port": 80, "targetPort": 8080}],
                "primaryCluster": "gpu-east",
            },
        },
    )
    await set_status(
        c.store,
        "services",
        "web",
        "default",
        phase="Ready",
        clusterIP="10.96.0.12",
        reachable=[
            {"cluster": "gpu-east", "clusterIP": "10.96.0.12", "role": "primary"},
            {"cluster": "edge", "clusterIP": "10.97.0.3", "role": "linked"},
        ],
    )
    await in_thread(page.tab, "services")
    svc = '#services-table tr[data-key="default/web"]'
    shown = await in_thread(page.wait_text, svc, "10.96.0.12")
    assert "80→8080/TCP" in shown and "gpu-east" in shown and "Ready" in shown
    assert "edge (linked)" in shown and "edge: 10.97.0.3" in shown  # the copy on a linked one
    link = await in_thread(page.css(f"{svc} a.temporal-link").get_attribute, "href")
    assert link == f"{TEMPORAL_UI}/namespaces/{TEMPORAL_NS}/workflows/service%2Fdefault%2Fweb"
    await in_thread(page.shoot, "services")

    # Pipelines: the DAG in dependency order, each step's state, while the page is open.
    steps = [
        {"name": "train", "dependsOn": ["fetch"], "retries": 2, "job": {"run": "x"}},
        {"name": "fetch", "job": {"run": "y"}},
    ]
    await created(
        c.admin,
        "/default/pipelines",
        {"kind": "Pipeline", "metadata": {"name": "nightly-0412"}, "spec": {"steps": steps}},
    )
    await set_status(
        c.store,
        "pipelines",
        "nightly-0412",
        "default",
        phase="Running",
        steps={
            "fetch": {"phase": "Succeeded", "attempts": 1},
            "train": {"phase": "Running", "attempts": 2, "message": "attempt 2"},
        },
    )
    await in_thread(page.tab, "pipelines")
    pl = '#pipelines-table tr[data-key="default/nightly-0412"]'
    await in_thread(page.wait_text, f"{pl} .dag", "attempt 2/3")
    dag = [await in_thread(lambda e=e: e.text) for e in await in_thread(page.all, f"{pl} .dag li")]
    assert dag == ["Succeeded fetch", "Running train after fetch (attempt 2/3) — attempt 2"]
    link = await in_thread(page.css(f"{pl} a.temporal-link").get_attribute, "href")
    assert link.endswith("/workflows/pipeline%2Fdefault%2Fnightly-0412")
    await in_thread(page.shoot, "pipelines")

    # Schedules: when, the last and next runs.
    await created(
        c.admin,
        "/default/schedules",
        {
            "kind": "Schedule",
            "metadata": {"name": "nightly"},
            "spec": {
                "cron": "0 2 * * *",
                "timezone": "Europe/Paris",
                "pipelineTemplate": {"spec": {"steps": steps}},
            },
        },
    )
    await set_status(
        c.store,
        "schedules",
        "nightly",
        "default",
        phase="Active",
        runs=12,
        lastRun="nightly-20261124-010000",
        nextRunTimes=["2026-11-26T01:00:00Z"],
    )
    await in_thread(page.tab, "schedules")
    sc = '#schedules-table tr[data-key="default/nightly"]'
    shown = await in_thread(page.wait_text, sc, "nightly-20261124-010000")
    assert "0 2 * * * (Europe/Paris)" in shown and "2026-11-26 01:00:00 UTC" in shown
    assert await in_thread(page.text_of, f"{sc} .runs") == "12"
    assert "Active" in shown and "Pipeline" in shown
    await in_thread(page.shoot, "schedules")

    # Audit: an admin has the tab; it lists the creations above.
    assert await in_thread(page.visible, "#tab-audit")
    await in_thread(page.tab, "audit")
    await in_thread(page.wait_text, "#audit-table tbody", "create")
    audit = await in_thread(page.text_of, "#audit-table tbody")
    assert "jobs" in audit and "default/train" in audit and "admin" in audit
    await in_thread(page.shoot, "audit")

    problems = [
        m
        for m in await in_thread(console_errors, browser)
        if "Content Security Policy" in m or "Uncaught" in m or "TypeError" in m
    ]
    assert problems == []

    # Logging out forgets the token.
    await in_thread(page.css("#logout").click)
    await in_thread(page.wait, lambda _: page.visible("#login-form"), "the login form")
    assert await in_thread(browser.execute_script, "return sessionStorage.length") == 0


async def test_audit_tab_is_for_admins_only(console: Console, browser: Any, tmp_path: Path) -> None:
    c = console
    await (await add_reader(c)).aclose()
    await created(
        c.admin, "/default/jobs", {"kind": "Job", "metadata": {"name": "visible"}, "spec": {}}
    )

    page = Page(browser, c.url, screenshot_dir(tmp_path))
    await in_thread(page.open)
    await in_thread(page.login, "riley", READER_PASSWORD)
    await in_thread(page.wait_text, job_row("visible"), "visible")
    assert await in_thread(page.text_of, "#user") == "riley"
    assert not await in_thread(page.visible, "#tab-audit")
    assert await in_thread(page.visible, "#tab-clusters")
    # Going to #audit by hand shows the jobs instead.
    await in_thread(browser.get, f"{c.url}/console/#audit")
    await in_thread(page.wait_text, job_row("visible"), "visible")
    assert not await in_thread(page.visible, "#audit-view")


async def test_wrong_password_and_polling_fallback(
    console: Console, browser: Any, tmp_path: Path
) -> None:
    """A failed login says so; with ?watch=off (a proxy that buffers streams) changes still
    arrive, by polling."""
    c = console
    await created(c.admin, "/default/jobs", {"kind": "Job", "metadata": {"name": "polled"}})
    page = Page(browser, c.url, screenshot_dir(tmp_path))
    await in_thread(page.open, "?watch=off")
    await in_thread(page.css("#username").send_keys, "admin")
    await in_thread(page.css("#password").send_keys, "not-the-password")
    await in_thread(page.css("#login-button").click)
    error = await in_thread(page.wait_text, "#login-error", "Login failed")
    assert "Login failed:" in error
    await in_thread(page.css("#password").clear)
    await in_thread(page.css("#username").clear)
    await in_thread(page.login, "admin", c.admin_password)
    row = job_row("polled")
    await in_thread(page.wait_text, f"{row} .phase", "Pending")
    assert await in_thread(page.css("#live").get_attribute, "data-mode") == "poll"
    started = time.monotonic()
    await set_status(c.store, "jobs", "polled", "default", phase="Succeeded")
    await in_thread(page.wait_text, f"{row} .phase", "Succeeded")
    assert time.monotonic() - started < WAIT


async def test_expired_session_goes_back_to_the_login_form(
    store: ObjectStore, auth_home: Path, browser: Any, tmp_path: Path
) -> None:
    """The page logs out when its token expires, even with nothing but open watches."""
    async with serve_console(store, auth_home, token_ttl_hours=8 / 3600) as c:
        page = Page(browser, c.url, screenshot_dir(tmp_path))
        await in_thread(page.open)
        await in_thread(page.login, "admin", c.admin_password)
        await in_thread(page.wait, lambda _: page.visible("#tab-audit"), "the audit tab")
        error = await in_thread(page.wait_text, "#login-error", "session expired", 30)
        assert error == "Your session expired: please log in again."
        assert not await in_thread(page.visible, "#jobs-view")
        assert await in_thread(browser.execute_script, "return sessionStorage.length") == 0


async def test_console_http_surface(console: Console) -> None:
    """The page needs no token, its config does; CSP on every console response; only the
    console's own files are served."""
    async with httpx.AsyncClient(base_url=console.url) as anonymous:
        r = await anonymous.get("/console")
        assert r.status_code == 307 and r.headers["location"] == "console/"
        r = await anonymous.get("/console/")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp
        assert "frame-ancestors 'none'" in csp
        r = await anonymous.get("/console/static/app.js")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
        assert r.headers["x-content-type-options"] == "nosniff"
        assert (await anonymous.get("/console/static/routes.py")).status_code == 404
        r = await anonymous.get("/console/static/..%2F__init__.py")
        assert r.status_code in (401, 404) and "web console" not in r.text
        r = await anonymous.get("/console/config")
        assert r.status_code == 401
        assert (await anonymous.get("/console/kinds")).status_code == 401
    r = await console.admin.get("/console/config")
    assert r.status_code == 200
    assert r.json() == {"temporalUi": TEMPORAL_UI, "temporalNamespace": TEMPORAL_NS}
    r = await console.admin.get("/console/kinds")
    assert r.status_code == 200
    assert {k["plural"] for k in r.json()["kinds"]} >= {"clusters", "jobs", "pipelines", "services"}
