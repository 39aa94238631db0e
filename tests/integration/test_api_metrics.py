"""The API server's request metrics, scraped from a real ``python -m skyshift.api`` process."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fixtures.auth import admin_token
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


@pytest.mark.parametrize("value", ["t", "true"])
def test_watches_are_counted_but_not_timed_however_spelled(start_api: Any, value: str) -> None:
    """``?watch=t`` is a watch for the route, so the latency histogram leaves it out too (a
    watch lasts as long as the client wants); a plain list is timed."""
    port = free_port()
    server = start_api(SKYSHIFT_METRICS_ADDRESS=f"127.0.0.1:{port}")
    auth = {"Authorization": f"Bearer {admin_token(server.url, server.home)}"}
    params = {"watch": value, "timeoutSeconds": "1"}
    r = httpx.get(f"{server.url}/default/jobs", params=params, headers=auth, timeout=10)
    assert r.status_code == 200
    assert httpx.get(f"{server.url}/default/jobs", headers=auth, timeout=10).status_code == 200
    got = samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)

    def of(metric: str) -> float:
        return sum(v for (name, labels), v in got.items() if name == metric
                   and ("route", "/{namespace}/jobs") in labels and ("method", "GET") in labels)

    assert of("skyshift_api_requests_total") == 2.0  # the watch and the list
    assert of("skyshift_api_request_duration_seconds_count") == 1.0  # the list alone
