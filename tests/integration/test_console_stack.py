"""The console against the whole local stack (``skyshift up``: etcd, the Temporal dev server,
the workers, the API and the local cluster), in a real headless Chromium.

A real job's page follows its real output until the job ends and links to its real workflow in
the Temporal UI; a real running job is refused to a reader and deleted for an admin (the
lifecycle stops it and the row goes away).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from skyshift.cli.describe import temporal_ui_link
from skyshift.config import admin_password_file
from tests.fixtures.auth import bearer
from tests.fixtures.browser import browser, screenshot_dir
from tests.fixtures.stack import DevStack
from tests.integration.test_console import READER_PASSWORD, Page, job_row
from tests.integration.test_console_actions import click_action

pytestmark = pytest.mark.integration
__all__ = ["browser"]  # a fixture

COUNT = "for i in 1 2 3 4 5 6; do echo line $i; sleep 1; done"
STARTUP = 120.0  # placing and starting a replica on a loaded machine


def login(client: httpx.Client, user: str, password: str) -> None:
    r = client.post("/token", data={"username": user, "password": password})
    assert r.status_code == 200, r.text
    client.headers.update(bearer(r.json()["access_token"]))


@pytest.fixture
def admin(devstack: DevStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=devstack.api_url, timeout=30) as client:
        login(client, "admin", admin_password_file(devstack.home).read_text().strip())
        yield client


def new_job(admin: httpx.Client, run: str) -> str:
    name = f"console-{uuid.uuid4().hex[:6]}"
    spec = {"run": run, "resources": {"cpus": 0.1}, "restartPolicy": "Never"}
    r = admin.post("/default/jobs", json={"kind": "Job", "metadata": {"name": name}, "spec": spec})
    assert r.status_code == 201, r.text
    return name


def test_job_page_follows_a_real_job_to_its_end(
    devstack: DevStack,
    admin: httpx.Client,
    browser: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = new_job(admin, COUNT)
    page = Page(browser, devstack.api_url, screenshot_dir(tmp_path))
    page.open()
    page.login("admin", admin_password_file(devstack.home).read_text().strip())
    page.wait_text(job_row(name), name)
    page.css(f"{job_row(name)} a.job-link").click()
    page.wait(lambda _: page.visible("#job-view"), "the job page")

    # the output shows while the job runs, then all of it once it has ended
    page.wait_text("#job-logs", "line 1", STARTUP)
    assert page.text_of("#job-logs-state") in ("● following", "ended (Succeeded)")
    assert page.wait_text("#job-logs-state", "ended", 60) == "ended (Succeeded)"
    lines = page.text_of("#job-logs").split("\n")
    assert lines[0].startswith("==> ")  # the replica's header, as `skyctl logs` prints it
    assert lines[1:] == [f"line {i}" for i in range(1, 7)]
    page.wait_text("#job-phase", "Succeeded")
    replicas = page.wait_text('#job-replicas tr[data-cluster="local"]', "local")
    assert replicas.split()[0] == "local"
    assert page.text_of('#job-replicas tr[data-cluster="local"] td[data-state="Succeeded"]') == "1"

    # the workflow's page in the stack's Temporal UI, as `skyctl describe` links it
    workflow = admin.get(f"/default/jobs/{name}").json()["status"]["workflowId"]
    monkeypatch.setenv("SKYSHIFT_TEMPORAL_UI", devstack.temporal_ui_url)
    monkeypatch.delenv("SKYSHIFT_TEMPORAL_NAMESPACE", raising=False)
    href = page.attribute("#job-workflow a.temporal-link", "href")
    assert href == temporal_ui_link(workflow)
    assert httpx.get(href, timeout=30).status_code == 200


def test_delete_of_a_running_job_refused_then_done(
    devstack: DevStack, admin: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    name = new_job(admin, "echo started; sleep 600")
    r = admin.post("/invite", json={"roles": ["reader"]})
    assert r.status_code == 201, r.text
    reader = f"reader-{uuid.uuid4().hex[:6]}"
    body = {"username": reader, "password": READER_PASSWORD, "invite": r.json()["invite"]}
    assert httpx.post(f"{devstack.api_url}/register_user", json=body).status_code == 201

    page = Page(browser, devstack.api_url, screenshot_dir(tmp_path))
    page.open()
    page.login(reader, READER_PASSWORD)
    page.wait_text(f"{job_row(name)} .phase", "Running", STARTUP)
    click_action(page, job_row(name), "delete", "yes")
    refused = page.wait_text("#notice-text", "refused")
    assert f"forbidden: user {reader} may not delete" in refused
    assert admin.get(f"/default/jobs/{name}").json()["status"]["phase"] == "Running"

    page.css("#logout").click()
    page.wait(lambda _: page.visible("#login-form"), "the login form")
    page.css("#username").clear()  # the form keeps the last user name
    page.login("admin", admin_password_file(devstack.home).read_text().strip())
    click_action(page, job_row(name), "delete", "yes")
    page.wait_text("#notice-text", f"job default/{name} deleting")
    # the lifecycle stops the replica and removes the job: its row goes
    page.wait(lambda _: not page.all(job_row(name)), "the deleted job's row to go", STARTUP)
    assert admin.get(f"/default/jobs/{name}").status_code == 404


def admin_page(devstack: DevStack, driver: Any, tmp_path: Path) -> Page:
    page = Page(driver, devstack.api_url, screenshot_dir(tmp_path))
    page.open()
    page.login("admin", admin_password_file(devstack.home).read_text().strip())
    return page


def step_job(run: str) -> dict[str, Any]:
    return {"run": run, "resources": {"cpus": 0.1}, "restartPolicy": "Never"}


def node_phases(page: Page, svg: str) -> dict[str, str]:
    return {
        str(g.get_attribute("data-step")): str(g.get_attribute("data-phase"))
        for g in page.all(f"{svg} g.node")
    }


def edge_set(page: Page, svg: str) -> set[tuple[str, str]]:
    return {
        (str(e.get_attribute("data-from")), str(e.get_attribute("data-to")))
        for e in page.all(f"{svg} g.edge")
    }


def test_real_pipeline_dag_runs_and_is_cancelled(
    devstack: DevStack, admin: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    """The DAG's colours follow the real steps; Cancel stops a running one."""
    name = f"dag-{uuid.uuid4().hex[:6]}"
    steps = [
        {"name": "fetch", "job": step_job("echo fetched")},
        {"name": "train", "dependsOn": ["fetch"], "job": step_job("sleep 600")},
        {"name": "report", "dependsOn": ["train"], "job": step_job("echo report")},
    ]
    r = admin.post(
        "/default/pipelines",
        json={"kind": "Pipeline", "metadata": {"name": name}, "spec": {"steps": steps}},
    )
    assert r.status_code == 201, r.text
    page = admin_page(devstack, browser, tmp_path)
    page.tab("pipelines")
    row = f'#pipelines-table tr[data-key="default/{name}"]'
    svg = f"{row} svg.dag-graph"
    running = {"fetch": "Succeeded", "train": "Running", "report": "Pending"}
    page.wait(lambda _: node_phases(page, svg) == running, f"{running} in the DAG", STARTUP)
    # read inside page.wait: the table is drawn again on every watch event, so an element
    # found a moment ago may be gone when it is read (only a reason to look again)
    edges = page.wait(lambda _: edge_set(page, svg), "the DAG's edges")
    assert edges == {("fetch", "train"), ("train", "report")}

    click_action(page, row, "cancel", "yes")
    page.wait_text("#notice-text", f"pipeline default/{name} cancelling")
    page.wait_text(f"{row} .phase-cell", "Cancelled", STARTUP)
    phases = page.wait(lambda _: node_phases(page, svg), "the DAG's nodes")
    assert phases["fetch"] == "Succeeded" and phases["report"] == "Cancelled", phases


def test_real_schedule_paused_run_now_and_resumed(
    devstack: DevStack, admin: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    name = f"sched-{uuid.uuid4().hex[:6]}"
    spec = {"interval": "24h", "jobTemplate": {"spec": step_job("echo scheduled")}}
    r = admin.post(
        "/default/schedules", json={"kind": "Schedule", "metadata": {"name": name}, "spec": spec}
    )
    assert r.status_code == 201, r.text
    page = admin_page(devstack, browser, tmp_path)
    page.tab("schedules")
    row = f'#schedules-table tr[data-key="default/{name}"]'
    page.wait_text(f"{row} .phase-cell", "Active", STARTUP)

    click_action(page, row, "pause", None)
    page.wait_text(f"{row} .phase-cell", "Paused", STARTUP)  # the Temporal Schedule paused
    assert admin.get(f"/default/schedules/{name}").json()["spec"]["suspend"] is True
    click_action(page, row, "trigger", None)  # runs even while paused
    page.wait_text("#notice-text", f"schedule default/{name} triggered")
    page.wait(lambda _: page.text_of(f"{row} .runs") not in ("", "0"), "a run", STARTUP)
    click_action(page, row, "resume", None)
    page.wait_text(f"{row} .phase-cell", "Active", STARTUP)
    assert admin.get(f"/default/schedules/{name}").json()["spec"]["suspend"] is False
