"""The console's Quotas tab in a real headless Chromium, against a real API server on a real
etcd: used/hard per limit (a used-up limit marked), what is borrowed, the namespace filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.browser import browser, in_thread
from tests.integration.test_console import Console, console, created, set_status
from tests.integration.test_console_pages import logged_in

pytestmark = pytest.mark.integration
__all__ = ["browser", "console"]  # fixtures


async def test_quotas_tab_shows_use_against_hard_and_what_is_borrowed(
    console: Console, browser: Any, tmp_path: Path
) -> None:
    c = console
    await created(c.admin, "/namespaces", {"kind": "Namespace", "metadata": {"name": "ml"}})
    await created(c.admin, "/ml/quotas", {
        "kind": "Quota", "metadata": {"name": "team-ml"},
        "spec": {"hard": {"cpus": 4, "memory": "8Gi", "jobs": 10}, "cohort": "research",
                 "weight": 2}})
    await set_status(c.store, "quotas", "team-ml", "ml",
                     used={"cpus": 6, "memory": 1000, "jobs": 3}, borrowed={"cpus": 2})
    await created(c.admin, "/default/quotas", {
        "kind": "Quota", "metadata": {"name": "small"}, "spec": {"hard": {"jobs": 1}}})
    page = await logged_in(c, browser, tmp_path)
    await in_thread(page.tab, "quotas")
    row = '#quotas-table tr[data-key="ml/team-ml"]'
    text = await in_thread(page.wait_text, row, "cpus: 6/4")
    assert "research" in text and "jobs: 3/10" in text and "memory: 1000MB/8Gi" in text
    # read inside page.wait: the table is drawn again every few seconds, so an element found
    # a moment ago may be gone when it is read (only a reason to look again)
    borrowed = page.wait(lambda _: page.text_of(f"{row} td:nth-child(5)"), "borrowed")
    assert "cpus: 2" in borrowed
    assert page.wait(lambda _: page.text_of(f"{row} td:nth-child(6)"), "the weight") == "2"
    full = page.wait(lambda _: [str(e.get_attribute("data-key"))
                                for e in page.all(f"{row} .quota-full")], "a used-up limit")
    assert full == ["cpus"]
    await in_thread(page.wait_text, '#quotas-table tr[data-key="default/small"]', "jobs: 0/1")
    page.css("#ns-filter").send_keys("ml")
    await in_thread(page.wait, lambda _: len(page.all("#quotas-table tbody tr")) == 1,
                    "only ml's quota after filtering")
