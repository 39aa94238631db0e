"""The skylet that counts a job's last replica Succeeded writes the job's final phase, and its
report says so (``ReplicaReport.finished``), so the job's workflow need not write it again
(bench/temporal_cost.py: one marker of a job's history).

The phase it writes is the verdict the workflow reaches on the same reports
(``workflows.jobstate.verdict``): every desired replica Succeeded, never for restartPolicy
Always, never for a job being deleted or already ended.

Pure unit test: a fake store and client; ``merge_counts``, the delete-free sync round and the
report are the real code.
"""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ReplicaStatus
from skyshift.lifecycle.convert import merge_counts
from tests.unit.sync_fakes import OneJobStore, SignalRecorder


def counts(**states: int) -> dict[str, int]:
    return {s: states.get(s, 0) for s in ("Pending", "Running", "Succeeded", "Failed", "Unknown")}


def job(replicas: int = 2, phase: str = "Running", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "uid-1"},
            "spec": {"replicas": replicas, **spec}, "status": {"phase": phase}}


def test_the_last_replica_counted_succeeded_ends_the_job() -> None:
    obj = job(2)
    obj["status"]["replicaStatus"] = {"a": counts(Succeeded=1)}
    assert merge_counts(obj, "b", counts(Running=1)) is not None
    assert obj["status"]["phase"] == "Running"
    merge_counts(obj, "b", counts(Succeeded=1))
    status = obj["status"]
    assert (status["phase"], status["message"]) == ("Succeeded", "all 2 replicas succeeded")
    assert status["completionTime"]


@pytest.mark.parametrize("obj", [
    job(1, restartPolicy="Always"),  # a service's replicas: never ends by succeeding
    job(1, phase="Failed"),  # the workflow's verdict stands
    {**job(1), "metadata": {"name": "j", "namespace": "ns", "uid": "uid-1",
                            "deletionTimestamp": "2026-11-28T00:00:00Z"}},
], ids=["always", "failed", "deleting"])
def test_not_for_a_job_that_does_not_end_so(obj: dict[str, Any]) -> None:
    phase = obj["status"]["phase"]
    merge_counts(obj, "a", counts(Succeeded=1))
    assert obj["status"]["phase"] == phase
    assert "completionTime" not in obj["status"]


def test_fewer_succeeded_than_desired_is_not_the_end() -> None:
    obj = job(3)
    merge_counts(obj, "a", counts(Succeeded=2, Failed=1))
    assert obj["status"]["phase"] == "Running"


def listing(*states: str) -> list[ReplicaStatus]:
    return [ReplicaStatus(name=f"j-uid1-{r}", job_uid="uid-1", namespace="ns", job_name="j",
                          rank=r, state=state) for r, state in enumerate(states)]


async def test_the_round_that_writes_it_says_so_in_its_report_once() -> None:
    store, client = OneJobStore(job(2)), SignalRecorder()
    ctx = ClusterContext("a", manager=None)  # type: ignore[arg-type]
    ctx.record(listing("Running", "Running"))
    ctx.listed, ctx.primed = {"j-uid1-0", "j-uid1-1"}, True
    acts = SkyletWithSync(ctx, store, client)  # type: ignore[arg-type]
    syncer = Syncer(acts, SyncConfig())
    await syncer._report(listing("Succeeded", "Running"), first=False)
    assert [p.finished for _, _, p in client.signals] == [False]
    assert store.job["status"]["phase"] == "Running"
    await syncer._report(listing("Succeeded", "Succeeded"), first=False)
    assert [p.finished for _, _, p in client.signals] == [False, True]
    assert store.job["status"]["phase"] == "Succeeded"
    # told again (a round undone and repeated): the phase was already written, not by this one
    ctx.record(listing("Succeeded", "Running"))
    await syncer._report(listing("Succeeded", "Succeeded"), first=False)
    assert [p.finished for _, _, p in client.signals] == [False, True, False]
