"""Metrics settings and the bounded job-phase gauge."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from skyshift.metrics import set_job_phases
from skyshift.workers.metrics_http import metrics_address


def test_metrics_address_is_checked() -> None:
    assert metrics_address({}) is None
    assert metrics_address({"SKYSHIFT_METRICS_ADDRESS": "0.0.0.0:9464"}) == ("0.0.0.0", 9464)
    for bad in ("9464", "host:", "host:99999", "host:x"):
        with pytest.raises(ValueError, match="SKYSHIFT_METRICS_ADDRESS"):
            metrics_address({"SKYSHIFT_METRICS_ADDRESS": bad})


def test_job_phase_gauge_has_a_bounded_set_of_series() -> None:
    set_job_phases({"Running": 3, "made-up-1": 1, "made-up-2": 2})

    def value(phase: str) -> float | None:
        return REGISTRY.get_sample_value("skyshift_jobs", {"phase": phase})

    assert value("Running") == 3 and value("Succeeded") == 0 and value("Other") == 3
    assert value("made-up-1") is None


async def test_api_method_label_is_bounded() -> None:
    """Issue 26: random HTTP methods each made a new series (+110 MB after 20,000 requests);
    a method outside HTTP's standard ones now counts as OTHER."""
    from skyshift.api.metrics import MetricsMiddleware

    async def app(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 405, "headers": []})  # type: ignore[operator]

    async def send(message: object) -> None:
        pass

    middleware = MetricsMiddleware(app)  # type: ignore[arg-type]

    def count(method: str) -> float:
        return REGISTRY.get_sample_value("skyshift_api_requests_total", {
            "method": method, "route": "unmatched", "code": "405"}) or 0.0

    before = count("OTHER"), count("DELETE")
    for method in ("FOO1", "FOO2", "X" * 100, "DELETE"):
        await middleware({"type": "http", "method": method}, None, send)  # type: ignore[arg-type]
    assert (count("OTHER"), count("DELETE")) == (before[0] + 3, before[1] + 1)
    assert count("FOO1") == 0 and count("X" * 100) == 0


def test_job_phase_gauge_follows_each_watch_event() -> None:
    from typing import Any, cast

    from skyshift.store.watch import WatchEvent
    from skyshift.workers.job_phases import JobPhases

    def job(name: str, phase: str | None) -> dict[str, Any]:
        return {"metadata": {"namespace": "ns", "name": name},
                "status": {"phase": phase} if phase else {}}  # fmt: skip

    def value(phase: str) -> float | None:
        return REGISTRY.get_sample_value("skyshift_jobs", {"phase": phase})

    phases = JobPhases(cast(Any, None))
    phases.apply(WatchEvent("ADDED", job("a", None), 1))  # no phase yet: Pending
    phases.apply(WatchEvent("ADDED", job("b", "Running"), 2))
    assert value("Pending") == 1 and value("Running") == 1
    phases.apply(WatchEvent("MODIFIED", job("a", "Running"), 3))
    assert value("Pending") == 0 and value("Running") == 2
    phases.apply(WatchEvent("MODIFIED", job("b", "Succeeded"), 4))
    phases.apply(WatchEvent("DELETED", job("a", "Running"), 5))
    assert value("Running") == 0 and value("Succeeded") == 1
