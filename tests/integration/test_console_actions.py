"""The console's actions in a real headless Chromium, against a real API server on a real etcd.

Each action (delete a job; cancel or delete a pipeline; pause, resume, run now or delete a
schedule) is clicked by a user the API refuses (the reader role: the page shows the API's own
message and nothing changes) and by one it allows (the change lands in the store). Destructive
actions ask first, and answering "keep it" leaves the object alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.browser import browser, in_thread, screenshot_dir
from tests.integration.test_console import (
    READER_PASSWORD,
    Console,
    Page,
    add_reader,
    console,
    created,
    job_row,
)

pytestmark = pytest.mark.integration
__all__ = ["browser", "console"]  # fixtures

STEPS = [
    {"name": "fetch", "job": {"run": "y"}},
    {"name": "train", "dependsOn": ["fetch"], "job": {"run": "x"}},
]


async def seed_flows(c: Console) -> None:
    """A job, a pipeline, an active schedule and a paused one."""
    await created(
        c.admin,
        "/default/jobs",
        {"kind": "Job", "metadata": {"name": "train"}, "spec": {"run": "python train.py"}},
    )
    await created(
        c.admin,
        "/default/pipelines",
        {"kind": "Pipeline", "metadata": {"name": "nightly-0412"}, "spec": {"steps": STEPS}},
    )
    for name, suspend in (("nightly", False), ("weekly", True)):
        await created(
            c.admin,
            "/default/schedules",
            {
                "kind": "Schedule",
                "metadata": {"name": name},
                "spec": {
                    "cron": "0 2 * * *",
                    "suspend": suspend,
                    "jobTemplate": {"spec": {"run": "echo hi"}},
                },
            },
        )


def row(plural: str, name: str) -> str:
    return f'#{plural}-table tr[data-key="default/{name}"]'


def click_action(page: Page, selector: str, action: str, answer: str | None) -> None:
    """Click ``action`` in the row; ``answer`` ("yes"/"no") the confirmation it must ask."""
    page.wait(lambda _: page.visible(f"{selector} button.action-{action}"), f"{action} button")
    if page.visible("#notice"):  # dismiss the last action's notice: the next one is new
        page.css("#notice-close").click()
    page.click(f"{selector} button.action-{action}")
    if answer is None:
        return
    page.wait(lambda _: page.visible("#confirm"), "the confirmation dialog")
    page.css(f"#confirm-{answer}").click()
    page.wait(lambda _: not page.visible("#confirm"), "the dialog to close")


#: (tab, object, action, asks first, the API call the action makes)
ACTIONS: list[tuple[str, str, str, bool, tuple[str, str, dict[str, Any] | None]]] = [
    ("jobs", "train", "delete", True, ("DELETE", "/default/jobs/train", None)),
    (
        "pipelines",
        "nightly-0412",
        "cancel",
        True,
        ("PATCH", "/default/pipelines/nightly-0412", {"spec": {"cancel": True}}),
    ),
    (
        "pipelines",
        "nightly-0412",
        "delete",
        True,
        ("DELETE", "/default/pipelines/nightly-0412", None),
    ),
    (
        "schedules",
        "nightly",
        "pause",
        False,
        ("PATCH", "/default/schedules/nightly", {"spec": {"suspend": True}}),
    ),
    (
        "schedules",
        "weekly",
        "resume",
        False,
        ("PATCH", "/default/schedules/weekly", {"spec": {"suspend": False}}),
    ),
    (
        "schedules",
        "nightly",
        "trigger",
        False,
        ("POST", "/default/schedules/nightly/trigger", None),
    ),
    ("schedules", "nightly", "delete", True, ("DELETE", "/default/schedules/nightly", None)),
]


async def api_refusal(reader: httpx.AsyncClient, call: tuple[str, str, Any]) -> str:
    """The API's message when the reader makes ``call`` itself (refused, so nothing changes)."""
    method, url, body = call
    headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
    r = await reader.request(method, url, json=body, headers=headers)
    assert r.status_code == 403, r.text
    return str(r.json()["error"]["message"])


async def snapshot(c: Console) -> list[Any]:
    """Every object the actions touch, as stored (metadata.resourceVersion included)."""
    out: list[Any] = []
    for plural in ("jobs", "pipelines", "schedules"):
        out += [o for o in (await c.store.list(plural, "default")).items]
    return out


async def test_refused_user_sees_the_api_message_and_nothing_changes(
    console: Console, browser: Any, tmp_path: Path
) -> None:
    c = console
    await seed_flows(c)
    reader = await add_reader(c)
    page = Page(browser, c.url, screenshot_dir(tmp_path))
    await in_thread(page.open)
    await in_thread(page.login, "riley", READER_PASSWORD)
    before = await snapshot(c)
    for tab, name, action, asks, call in ACTIONS:
        expected = await api_refusal(reader, call)
        await in_thread(page.tab, tab)
        await in_thread(click_action, page, row(tab, name), action, "yes" if asks else None)
        shown = await in_thread(page.wait_text, "#notice-text", "refused")
        assert expected in shown, (action, shown)
        assert await in_thread(page.css("#notice").get_attribute, "data-result") == "refused"
    assert await snapshot(c) == before
    assert c.lifecycle.hooks("nightly") == ["created"]  # no run was triggered
    await reader.aclose()


async def test_allowed_user_acts_after_confirming(
    console: Console, browser: Any, tmp_path: Path
) -> None:
    c = console
    await seed_flows(c)
    page = Page(browser, c.url, screenshot_dir(tmp_path))
    await in_thread(page.open)
    await in_thread(page.login, "admin", c.admin_password)

    async def stored(plural: str, name: str) -> dict[str, Any]:
        obj = await c.store.get(plural, name, "default")
        assert obj is not None
        return obj

    # "Keep it" in the confirmation: nothing happens.
    await in_thread(click_action, page, job_row("train"), "delete", "no")
    assert not (await stored("jobs", "train"))["metadata"].get("deletionTimestamp")
    assert not await in_thread(page.visible, "#notice")
    # Confirmed: the job is being deleted, and the page shows it.
    await in_thread(click_action, page, job_row("train"), "delete", "yes")
    assert (
        await in_thread(page.wait_text, "#notice-text", "deleting") == "job default/train deleting"
    )
    await in_thread(page.wait_text, f"{job_row('train')} .phase", "Deleting")
    assert (await stored("jobs", "train"))["metadata"]["deletionTimestamp"]

    await in_thread(page.tab, "pipelines")
    await in_thread(click_action, page, row("pipelines", "nightly-0412"), "cancel", "yes")
    await in_thread(page.wait_text, "#notice-text", "pipeline default/nightly-0412 cancelling")
    assert (await stored("pipelines", "nightly-0412"))["spec"]["cancel"] is True
    await in_thread(click_action, page, row("pipelines", "nightly-0412"), "delete", "yes")
    await in_thread(page.wait_text, "#notice-text", "pipeline default/nightly-0412 deleting")
    assert (await stored("pipelines", "nightly-0412"))["metadata"]["deletionTimestamp"]

    await in_thread(page.tab, "schedules")
    nightly = row("schedules", "nightly")
    await in_thread(click_action, page, nightly, "pause", None)
    await in_thread(page.wait_text, "#notice-text", "schedule default/nightly paused")
    assert (await stored("schedules", "nightly"))["spec"]["suspend"] is True
    # the row now offers Resume (the watch brought the change)
    await in_thread(click_action, page, nightly, "resume", None)
    await in_thread(page.wait_text, "#notice-text", "schedule default/nightly resumed")
    assert (await stored("schedules", "nightly"))["spec"]["suspend"] is False
    await in_thread(click_action, page, nightly, "trigger", None)
    await in_thread(page.wait_text, "#notice-text", "schedule default/nightly triggered")
    assert "trigger" in c.lifecycle.hooks("nightly")
    await in_thread(click_action, page, nightly, "delete", "yes")
    await in_thread(page.wait_text, "#notice-text", "schedule default/nightly deleting")
    assert (await stored("schedules", "nightly"))["metadata"]["deletionTimestamp"]
