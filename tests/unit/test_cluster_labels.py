"""Labels a cluster's manager reports (ClusterState.labels, e.g. ``slurm/partition``) reach the
Cluster object (status.labels, written by the skylet's sync) and placement filters see them
under the user's metadata.labels (scheduling.cluster_infos). Before, they were dropped, so a
filter ``slurm/partition: debug`` could never select a Slurm cluster.

Pure unit test: a fake store, no server.
"""

from __future__ import annotations

from typing import Any

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.scheduling import cluster_infos
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ClusterState, NodeState
from skyshift.contract.jobs import SyncInput
from skyshift.models.cluster import Cluster
from skyshift.models.quantity import Resources
from skyshift.scheduler import Filter, JobRequest, schedule_batch


class FakeStore:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.writes = 0

    async def guaranteed_update(self, plural: str, name: str, namespace: str | None,
                                mutate: Any) -> dict[str, Any]:
        out = mutate(self.obj)
        if out is not None:
            self.obj, self.writes = out, self.writes + 1
        return self.obj


def cluster(labels: dict[str, str], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"kind": "Cluster", "metadata": {"name": "hpc", "uid": "u1", "labels": labels},
            "spec": {"manager": "slurm"}, "status": status or {"phase": "Init"}}


async def test_sync_writes_reported_labels_to_status() -> None:
    store = FakeStore(cluster({"team": "a"}))
    acts = SkyletWithSync(ClusterContext("hpc", None), store, None)  # type: ignore[arg-type]
    syncer = Syncer(acts, SyncConfig())
    state = ClusterState(healthy=True, nodes=[NodeState("n1", Resources(4, 1000),
                                                        Resources(4, 1000))],
                         labels={"slurm/partition": "debug"})
    await syncer._write_cluster(SyncInput("hpc", "u1"), "Ready", "", state)
    assert store.obj["status"]["labels"] == {"slurm/partition": "debug"}
    assert store.obj["metadata"]["labels"] == {"team": "a"}  # the user's stay the user's
    Cluster.model_validate(store.obj)  # the API can read it back
    await syncer._write_cluster(SyncInput("hpc", "u1"), "Ready", "", state)
    assert store.writes == 1  # unchanged labels are not rewritten


def test_placement_filter_selects_by_reported_label() -> None:
    node = {"n1": {"cpus": 4, "memory": 1000, "gpus": 0, "accelerators": {}}}
    status = {"phase": "Ready", "allocatable": node, "capacity": node,
              "labels": {"slurm/partition": "debug", "team": "reported"}}
    [info] = cluster_infos([cluster({"team": "user"}, status)], [])
    assert info.labels == {"slurm/partition": "debug", "team": "user",  # user labels win
                           "skyshift.io/cluster": "hpc"}  # and every cluster has its name
    wanted = JobRequest("default/j", "u", "default", {}, 0, 0.0, 1, Resources(1, 100),
                        [Filter(match_labels={"slurm/partition": "debug"})])
    other = JobRequest("default/k", "v", "default", {}, 0, 0.0, 1, Resources(1, 100),
                       [Filter(match_labels={"slurm/partition": "gpu"})])
    placed, pending = schedule_batch([wanted, other], [info], [])
    assert placed.assignments == {"hpc": 1}
    assert not pending.placed
