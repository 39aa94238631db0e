"""The API server's request metrics, scraped from a real ``python -m skyshift.api`` process."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fixtures.etcd import free_port
from tests.integration.test_metrics import samples

pytestmark = pytest.mark.integration


def test_api_requests_counted_by_route_template(start_api: Any) -> None:
    port = free_port()
    url = start_api(SKYSHIFT_METRICS_ADDRESS=f"127.0.0.1:{port}").url
    for name in ("a", "b", "c"):  # three paths, one route: one series
        assert httpx.get(f"{url}/default/jobs/{name}", timeout=10).status_code == 401
    assert httpx.get(f"{url}/no/such/route/here", timeout=10).status_code in (401, 404)
    got = samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
    jobs = {labels: v for (name, labels), v in got.items()
            if name == "skyshift_api_requests_total" and ("code", "401") in labels
            and any(k == "route" and "jobs" in v2 for k, v2 in labels)}
    assert list(jobs.values()) == [3.0], jobs
    [route] = [v for labels in jobs for k, v in labels if k == "route"]
    assert "{" in route and "/a" not in route  # the template, never the raw path
    ready = [v for (name, labels), v in got.items()
             if name == "skyshift_api_request_duration_seconds_count"
             and ("route", "/readyz") in labels]
    assert ready and ready[0] >= 1  # the fixture's readiness polls
