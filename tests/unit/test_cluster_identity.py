"""Who has a physical cluster first (``activities.identity.holder_of``) and the Slurm
controller's identity from ``scontrol show config`` (issue 31)."""

from __future__ import annotations

from typing import Any

from skyshift.activities.identity import holder_of
from skyshift.compat.slurm import controller_identity


def cluster(name: str, created: str, identity: str, **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "creationTimestamp": created, **extra}
    return {"metadata": meta, "status": {"identity": identity, "phase": "Ready"}}


def test_the_oldest_cluster_with_the_identity_holds_it() -> None:
    clusters = [cluster("b", "2026-01-02T00:00:00Z", "k8:x"),
                cluster("a", "2026-01-01T00:00:00Z", "k8:x"),
                cluster("c", "2026-01-03T00:00:00Z", "k8:y")]
    assert holder_of(clusters, "b", "k8:x") == "a"
    assert holder_of(clusters, "a", "k8:x") == ""  # the older one keeps it, whoever asks
    assert holder_of(clusters, "c", "k8:y") == ""
    assert holder_of(clusters, "b", "") == ""  # no identity (e.g. skypilot): nothing to compare


def test_same_age_is_decided_by_name_and_deleting_clusters_do_not_hold() -> None:
    same = "2026-01-01T00:00:00Z"
    clusters = [cluster("b", same, "i"), cluster("a", same, "i")]
    assert (holder_of(clusters, "a", "i"), holder_of(clusters, "b", "i")) == ("", "a")
    clusters[1]["metadata"]["deletionTimestamp"] = same
    assert holder_of(clusters, "b", "i") == ""


def test_slurm_controller_identity() -> None:
    text = """Configuration data as of 2026-11-27T02:00:00
AccountingStorageType   = (null)
ClusterName             = slurm1
SlurmctldHost[0]        = box(127.0.0.1)
SlurmctldPort           = 6817
"""
    assert controller_identity(text) == "slurm:slurm1@box:6817"
    other = text.replace("6817", "6917").replace("slurm1", "slurm2")
    assert controller_identity(other) != controller_identity(text)
