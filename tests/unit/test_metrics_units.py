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
