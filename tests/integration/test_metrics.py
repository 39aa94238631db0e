"""Prometheus metrics of the workers, scraped as Prometheus would (real worker processes)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.etcd import free_port
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient() as http:
        r = await http.get(f"http://127.0.0.1:{port}/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return samples(r.text)


async def test_workers_export_skyshift_and_temporal_sdk_metrics(
    lifecycle_stack: LifecycleStack, monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = lifecycle_stack
    ports = {"control": free_port(), "skylet_manager": free_port()}
    for which, port in ports.items():
        monkeypatch.setenv("SKYSHIFT_METRICS_ADDRESS", f"127.0.0.1:{port}")
        await s.start_process(which)
    monkeypatch.delenv("SKYSHIFT_METRICS_ADDRESS")
    await s.add_cluster("lc-metrics")
    await s.cluster_phase("lc-metrics", "Ready")
    await s.submit("measured", "echo hi", replicas=2)
    await s.job_phase("measured", "Succeeded")

    async def control_counted() -> dict | None:
        got = await scrape(ports["control"])
        return got if got.get(("skyshift_jobs", (("phase", "Succeeded"),))) == 1 else None

    control = await s.wait("the reconciler's job count", control_counted, timeout=30)
    assert control[("skyshift_jobs", (("phase", "Running"),))] == 0
    assert control[("skyshift_placement_latency_seconds_count", ())] == 1
    assert ("skyshift_scheduler_queue_depth", ()) in control
    names = {name for name, _ in control}
    assert any(n.startswith("temporal_workflow_completed") for n in names), sorted(names)[:40]

    skylet = await scrape(ports["skylet_manager"])
    rounds = skylet[("skyshift_sync_round_seconds_count", (("cluster", "lc-metrics"),))]
    assert rounds >= 1
    assert any(n.startswith("temporal_activity_execution") for n, _ in skylet), \
        sorted({n for n, _ in skylet})[:40]

    async with httpx.AsyncClient() as http:
        assert (await http.get(f"http://127.0.0.1:{ports['control']}/nope")).status_code == 404

