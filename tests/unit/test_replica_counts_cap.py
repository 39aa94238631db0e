"""A job's replica counts never add up to more than spec.replicas (issue 31).

Two Cluster objects attached to one physical Kubernetes cluster both listed the same pods, and a
6-replica job spread 4+2 was reported as "8 replicas started". Whatever the skylets report, the
status written (``merge_counts`` from the skylet, ``apply_job_patch`` from the job workflow)
counts at most spec.replicas, and the message says no more.
"""

from __future__ import annotations

from typing import Any

from skyshift.activities.store import apply_job_patch
from skyshift.contract.jobs import JobStatusPatch
from skyshift.lifecycle.convert import cap_counts, merge_counts


def counts(**states: int) -> dict[str, int]:
    return {s: states.get(s, 0) for s in ("Pending", "Running", "Succeeded", "Failed", "Unknown")}


def job(replicas: int, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "default", "uid": "u1"},
            "spec": {"replicas": replicas}, "status": dict(status)}


def total(status: dict[str, Any]) -> int:
    return sum(sum(c.values()) for c in status["replicaStatus"].values())


def test_two_names_for_one_cluster_never_count_more_than_desired() -> None:
    obj = job(6, phase="Scheduled")
    merge_counts(obj, "sim-k8s-1", counts(Running=6))  # sim-k8s-1 sees all six pods
    assert obj["status"]["message"] == "6 replicas started"
    out = merge_counts(obj, "sim-k8s-2", counts(Running=2))  # ... and so does its twin
    assert out is None or total(out["status"]) <= 6
    assert total(obj["status"]) == 6
    assert obj["status"]["replicaStatus"] == {"sim-k8s-1": counts(Running=6)}


def test_message_never_says_more_than_desired() -> None:
    obj = job(6, phase="Scheduled", replicaStatus={"a": counts(Running=4)})
    merge_counts(obj, "b", counts(Running=4))
    assert obj["status"]["phase"] == "Running"
    assert obj["status"]["message"] == "6 replicas started"
    assert total(obj["status"]) == 6
    assert obj["status"]["replicaStatus"]["b"] == counts(Running=2)


def test_trims_least_telling_states_first() -> None:
    per = {"a": counts(Running=2, Failed=1, Unknown=1), "b": counts(Running=1)}
    assert cap_counts(per, 3, "a")
    assert per == {"a": counts(Running=2), "b": counts(Running=1)}
    assert not cap_counts(per, 3, "a")


def test_within_bounds_is_left_alone() -> None:
    obj = job(4, phase="Scheduled")
    assert merge_counts(obj, "a", counts(Running=2)) is not None
    assert obj["status"].get("phase") == "Scheduled"
    assert merge_counts(obj, "a", counts(Running=2)) is None  # unchanged: no rewrite
    merge_counts(obj, "b", counts(Running=2))
    assert obj["status"]["phase"] == "Running" and obj["status"]["message"] == "4 replicas started"
    merge_counts(obj, "b", counts())
    assert "b" not in obj["status"]["replicaStatus"]


def test_job_workflow_patch_is_capped_too() -> None:
    obj = job(2, phase="Running")
    patch = JobStatusPatch(name="j", namespace="default", uid="u1", phase="Succeeded",
                           replica_status={"a": counts(Succeeded=2), "b": counts(Succeeded=2)})
    apply_job_patch(obj, patch)
    assert total(obj["status"]) == 2


def test_failover_trims_the_cluster_no_longer_placed() -> None:
    """A lost cluster keeps the counts it last wrote; the replicas that replaced them on the
    cluster the job moved to are the ones counted (the slurm e2e's failover to local)."""
    obj = job(2, phase="Running", placement={"local": 2},
              replicaStatus={"e2e-slurm2": counts(Running=2)})
    merge_counts(obj, "local", counts(Running=2))
    assert obj["status"]["replicaStatus"] == {"local": counts(Running=2)}


def test_a_cluster_beyond_its_share_is_trimmed_first() -> None:
    """Two names for one cluster, placed 4+2: the second lists all six pods as its own."""
    obj = job(6, phase="Scheduled", placement={"a": 4, "b": 2},
              replicaStatus={"a": counts(Running=4)})
    merge_counts(obj, "b", counts(Running=6))
    assert obj["status"]["replicaStatus"] == {"a": counts(Running=4), "b": counts(Running=2)}
    assert obj["status"]["message"] == "6 replicas started"
