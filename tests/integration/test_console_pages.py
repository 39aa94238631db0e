"""The console's job page, list filters, pipeline DAG and narrow layout in a real headless
Chromium, against a real API server on a real etcd.

``SKYSHIFT_CONSOLE_SCREENSHOTS=docs/console`` regenerates the screenshots of docs/console.md.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from skyshift.cli.describe import temporal_ui_link
from tests.fixtures.browser import browser, in_thread, screenshot_dir
from tests.integration.test_console import (
    TEMPORAL_NS,
    TEMPORAL_UI,
    Console,
    Page,
    console,
    created,
    job_row,
    set_status,
)

pytestmark = pytest.mark.integration
__all__ = ["browser", "console"]  # fixtures

FOLLOW_S = 2.0  # jobpage.js FOLLOW_MS: how often the page reads a running job's logs


async def logged_in(c: Console, driver: Any, tmp_path: Path) -> Page:
    page = Page(driver, c.url, screenshot_dir(tmp_path))
    await in_thread(page.open)
    await in_thread(page.login, "admin", c.admin_password)
    return page


def texts(page: Page, selector: str) -> list[str]:
    return [str(e.text) for e in page.all(selector)]


async def test_job_page_shows_the_job_and_follows_its_logs(
    console: Console, browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = console
    spec = {
        "image": "python:3.12",
        "run": "python train.py",
        "replicas": 3,
        "resources": {"cpus": 2},
    }
    await created(
        c.admin, "/default/jobs", {"kind": "Job", "metadata": {"name": "train"}, "spec": spec}
    )
    now = datetime.now(UTC).isoformat()
    await set_status(
        c.store,
        "jobs",
        "train",
        "default",
        phase="Running",
        workflowId="job/default/train",
        placement={"gpu-east": 2, "slurm-west": 1},
        replicaStatus={"gpu-east": {"Running": 1, "Pending": 1}, "slurm-west": {"Running": 1}},
        conditions=[
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "Placed",
                "message": "2 on gpu-east, 1 on slurm-west",
                "lastTransitionTime": now,
            }
        ],
    )
    c.lifecycle.log_text = "epoch 1 loss=0.90\n"
    page = await logged_in(c, browser, tmp_path)
    await in_thread(page.wait_text, job_row("train"), "Running")
    await in_thread(page.css(f"{job_row('train')} a.job-link").click)
    await in_thread(page.wait, lambda _: page.visible("#job-view"), "the job page")
    assert browser.current_url.endswith("#job/default/train")
    assert await in_thread(page.text_of, "#job-title") == "default/train"
    assert await in_thread(page.text_of, "#job-phase") == "Running"

    # the spec, the replicas per cluster and their states, the events
    image = await in_thread(page.wait_text, '#job-spec tr[data-field="image"]', "python:3.12")
    assert image == "image python:3.12"
    assert await in_thread(page.text_of, '#job-spec tr[data-field="replicas"]') == "replicas 3"
    rows = await in_thread(texts, page, "#job-replicas tbody tr")
    assert rows == ["gpu-east 2 1 1 0 0 0", "slurm-west 1 1 0 0 0 0"]
    events = await in_thread(texts, page, "#job-events tbody tr")
    assert len(events) == 1 and events[0].startswith("Scheduled True Placed 2 on gpu-east")

    # the Temporal UI link, the one `skyctl describe` prints
    monkeypatch.setenv("SKYSHIFT_TEMPORAL_UI", TEMPORAL_UI)
    monkeypatch.setenv("SKYSHIFT_TEMPORAL_NAMESPACE", TEMPORAL_NS)
    link = await in_thread(page.css, "#job-workflow a.temporal-link")
    assert await in_thread(link.get_attribute, "href") == temporal_ui_link("job/default/train")
    assert await in_thread(lambda: link.text) == temporal_ui_link("job/default/train")

    # the logs follow: new output shows up with no click, until the job ends
    await in_thread(page.wait_text, "#job-logs", "epoch 1 loss=0.90")
    await in_thread(page.wait_text, "#job-logs-state", "following")
    c.lifecycle.log_text += "epoch 2 loss=0.55\n"
    await in_thread(page.wait_text, "#job-logs", "epoch 2 loss=0.55")
    await in_thread(page.shoot, "job")
    c.lifecycle.log_text += "epoch 3 loss=0.31\ndone\n"
    await set_status(
        c.store,
        "jobs",
        "train",
        "default",
        phase="Succeeded",
        replicaStatus={"gpu-east": {"Succeeded": 2}, "slurm-west": {"Succeeded": 1}},
    )
    assert await in_thread(page.wait_text, "#job-logs-state", "ended") == "ended (Succeeded)"
    assert (await in_thread(page.text_of, "#job-logs")).endswith("epoch 3 loss=0.31\ndone")
    assert await in_thread(page.text_of, "#job-phase") == "Succeeded"
    # ended: the page reads the logs no more
    reads = len(c.lifecycle.logs_args)
    await asyncio.sleep(2.5 * FOLLOW_S)
    assert len(c.lifecycle.logs_args) == reads


async def test_namespace_filter_and_search(console: Console, browser: Any, tmp_path: Path) -> None:
    c = console
    await created(c.admin, "/namespaces", {"kind": "Namespace", "metadata": {"name": "ml"}})
    for ns, name in (("default", "train"), ("default", "etl"), ("ml", "train"), ("ml", "eval")):
        await created(c.admin, f"/{ns}/jobs", {"kind": "Job", "metadata": {"name": name}})
    await created(
        c.admin,
        "/ml/pipelines",
        {
            "kind": "Pipeline",
            "metadata": {"name": "nightly"},
            "spec": {"steps": [{"name": "a", "job": {}}]},
        },
    )
    page = await logged_in(c, browser, tmp_path)
    keys = "#jobs-table tbody tr"

    def shown() -> list[str]:
        return [str(e.get_attribute("data-key")) for e in page.all(keys)]

    await in_thread(page.wait, lambda _: len(shown()) == 4, "the four jobs")
    options = await in_thread(texts, page, "#ns-filter option")
    assert options == ["All namespaces", "default", "ml"]

    from selenium.webdriver.support.ui import Select

    await in_thread(lambda: Select(page.css("#ns-filter")).select_by_value("ml"))
    await in_thread(page.wait, lambda _: shown() == ["ml/eval", "ml/train"], "ml's jobs")
    await in_thread(page.css("#search").send_keys, "tra")
    await in_thread(page.wait, lambda _: shown() == ["ml/train"], "ml/train alone")
    await in_thread(page.shoot, "filter")
    # the filter holds on the other lists too
    await in_thread(page.tab, "pipelines")
    await in_thread(page.css("#search").clear)
    await in_thread(page.css("#search").send_keys, "night")
    await in_thread(page.wait_text, "#pipelines-table tbody", "nightly")
    await in_thread(lambda: Select(page.css("#ns-filter")).select_by_value("default"))
    await in_thread(page.wait, lambda _: not page.all("#pipelines-table tbody tr"), "no rows")
    assert await in_thread(page.visible, "#pipelines-view .empty")
    # cleared: everything again
    await in_thread(page.tab, "jobs")
    await in_thread(lambda: Select(page.css("#ns-filter")).select_by_value(""))
    await in_thread(page.css("#search").clear)
    await in_thread(page.css("#search").send_keys, " ")
    await in_thread(page.wait, lambda _: len(shown()) == 4, "all four jobs again")


#: fetch -> (prep, tokenize) -> train -> report: a diamond and a tail
DAG_STEPS = [
    {"name": "fetch", "job": {}},
    {"name": "prep", "dependsOn": ["fetch"], "job": {}},
    {"name": "tokenize", "dependsOn": ["fetch"], "job": {}},
    {"name": "train", "dependsOn": ["prep", "tokenize"], "job": {}},
    {"name": "report", "dependsOn": ["train"], "job": {}},
]
DAG_PHASES = {
    "fetch": "Succeeded",
    "prep": "Succeeded",
    "tokenize": "Failed",
    "train": "Skipped",
    "report": "Skipped",
}


async def test_pipeline_dag_is_drawn_with_its_nodes_and_edges(
    console: Console, browser: Any, tmp_path: Path
) -> None:
    c = console
    await created(
        c.admin,
        "/default/pipelines",
        {"kind": "Pipeline", "metadata": {"name": "features"}, "spec": {"steps": DAG_STEPS}},
    )
    await set_status(
        c.store,
        "pipelines",
        "features",
        "default",
        phase="Failed",
        steps={n: {"phase": p} for n, p in DAG_PHASES.items()},
    )
    page = await logged_in(c, browser, tmp_path)
    await in_thread(page.tab, "pipelines")
    svg = '#pipelines-table tr[data-key="default/features"] svg.dag-graph'
    await in_thread(page.wait, lambda _: len(page.all(f"{svg} g.node")) == 5, "five nodes")
    graph = await in_thread(
        browser.execute_script,
        """
        const svg = document.querySelector(arguments[0]);
        const nodes = {};
        for (const g of svg.querySelectorAll("g.node")) {
          const rect = g.querySelector("rect");
          nodes[g.dataset.step] = { phase: g.dataset.phase, x: Number(rect.getAttribute("x")),
            fill: getComputedStyle(rect).fill, text: g.querySelector("text").textContent };
        }
        const edges = [...svg.querySelectorAll("g.edge")]
          .map((e) => [e.dataset.from, e.dataset.to]);
        return { nodes, edges };""",
        svg,
    )
    nodes, edges = graph["nodes"], graph["edges"]
    assert {n: v["phase"] for n, v in nodes.items()} == DAG_PHASES
    assert all(v["text"] == n for n, v in nodes.items())
    expected = {(d, s["name"]) for s in DAG_STEPS for d in s.get("dependsOn", [])}
    assert sorted(map(tuple, edges)) == sorted(expected)
    # every arrow points right: a step is drawn after what it depends on
    assert all(nodes[a]["x"] < nodes[b]["x"] for a, b in expected)
    assert nodes["prep"]["x"] == nodes["tokenize"]["x"]  # siblings share a column
    # the phase colours (console.css): green done, red failed, grey skipped
    assert nodes["fetch"]["fill"] == "rgb(223, 243, 230)"
    assert nodes["tokenize"]["fill"] == "rgb(251, 225, 223)"
    assert nodes["train"]["fill"] == "rgb(238, 238, 238)"
    await in_thread(page.shoot, "dag")


async def test_narrow_window_keeps_the_header_whole(
    console: Console, browser: Any, tmp_path: Path
) -> None:
    c = console
    await created(c.admin, "/default/jobs", {"kind": "Job", "metadata": {"name": "train"}})
    page = await logged_in(c, browser, tmp_path)
    await in_thread(page.wait_text, job_row("train"), "train")
    await in_thread(browser.set_window_size, 400, 800)
    await in_thread(
        page.wait,
        lambda _: browser.execute_script("return document.documentElement.clientWidth") <= 400,
        "a narrow window",
    )
    boxes = await in_thread(
        browser.execute_script,
        """
        const width = document.documentElement.clientWidth;
        const parts = document.querySelectorAll(
          "header h1, header nav a:not([hidden]), #live, #user, #logout");
        return { width, page: document.documentElement.scrollWidth, parts: [...parts].map((e) => {
          const r = e.getBoundingClientRect();
          return { id: e.id || e.textContent, left: r.left, right: r.right,
                   height: r.height, shown: r.width > 0 && r.height > 0 };
        }) };""",
    )
    assert len(boxes["parts"]) == 11  # h1, seven tabs (the audit one: admin), badge, user, logout
    for part in boxes["parts"]:
        assert part["shown"], part
        assert part["left"] >= 0 and part["right"] <= boxes["width"], part
    assert boxes["page"] <= boxes["width"]  # no sideways scrolling of the page itself
    await in_thread(page.shoot, "narrow")


async def test_job_page_shows_that_the_job_was_preempted(
    console: Console, browser: Any, tmp_path: Path
) -> None:
    """An evicted job (as JobWorkflow writes it: Pending, condition Preempted) says by whom and
    why among its events, as `skyctl describe job` does."""
    c = console
    await created(
        c.admin,
        "/default/jobs",
        {"kind": "Job", "metadata": {"name": "low"}, "spec": {"run": "sleep 60", "priority": 0}},
    )
    why = "Preempted by default/urgent: it has priority 10 and needs the capacity"
    await set_status(
        c.store,
        "jobs",
        "low",
        "default",
        phase="Pending",
        message="0/1 clusters fit: c1: insufficient resources",
        conditions=[
            {
                "type": "Preempted",
                "status": "True",
                "reason": "Preempted",
                "message": why,
                "lastTransitionTime": datetime.now(UTC).isoformat(),
            }
        ],
    )
    page = await logged_in(c, browser, tmp_path)
    await in_thread(page.wait_text, job_row("low"), "Pending")
    await in_thread(page.css(f"{job_row('low')} a.job-link").click)
    await in_thread(page.wait, lambda _: page.visible("#job-view"), "the job page")
    row = await in_thread(page.wait_text, '#job-events tr[data-type="Preempted"]', why)
    assert row.startswith(f"Preempted True Preempted {why}")
