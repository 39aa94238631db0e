"""One physical cluster is never attached twice (issue 31), on the real test beds.

Two Cluster objects whose adapters reach the same cluster (the same kube-apiserver, the same
local state_dir, the same slurmctld) must not both be Ready: the older one is, the other goes
to phase Error naming it and is never placed on. The sync activity runs for real (real etcd,
real adapters; only Temporal's client is a fake, as nothing is signalled here).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.sync import SkyletWithSync, SyncConfig
from skyshift.compat.base import ClusterManager, create_manager
from skyshift.contract.jobs import SyncInput, SyncResult
from skyshift.store import ObjectStore
from tests.fixtures.compat import local_config
from tests.unit.test_sync_report_cancelled import FakeClient

STAMPS = iter(f"2026-01-01T00:00:{s:02d}Z" for s in range(60))


async def add_cluster(store: ObjectStore, name: str, manager: str) -> str:
    uid = uuid.uuid4().hex
    await store.create("clusters", {
        "kind": "Cluster",
        "metadata": {"name": name, "uid": uid, "creationTimestamp": next(STAMPS)},
        "spec": {"manager": manager}, "status": {"phase": "Init"},
    })
    return uid


async def sync_once(store: ObjectStore, name: str, uid: str, manager: ClusterManager,
                    phase: str = "Init") -> SyncResult:
    acts = SkyletWithSync(ClusterContext(name, manager), store, FakeClient(),  # type: ignore[arg-type]
                          sync=SyncConfig(interval=0.2, identity_check=0.0))
    try:
        result: SyncResult = await ActivityEnvironment().run(
            acts.sync_cluster, SyncInput(name, uid, phase, [], max_duration=1.5))
        return result
    finally:
        await manager.close()


async def attach_twice(store: ObjectStore, kind: str, first: ClusterManager,
                       second: ClusterManager, names: tuple[str, str] = ("first", "second"),
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    a, b = names
    uid_a = await add_cluster(store, a, kind)
    uid_b = await add_cluster(store, b, kind)
    got_a = await sync_once(store, a, uid_a, first)
    got_b = await sync_once(store, b, uid_b, second)
    assert got_a.phase == "Ready", got_a
    assert got_b.phase == "Error", got_b
    assert f"same physical cluster as cluster {a}" in got_b.message
    obj_a = await store.get("clusters", a)
    obj_b = await store.get("clusters", b)
    assert obj_a["status"]["phase"] == "Ready"
    assert obj_b["status"]["phase"] == "Error"
    assert obj_a["status"]["identity"] == obj_b["status"]["identity"] != ""
    assert f"cluster {a}" in obj_b["status"]["message"]
    assert not obj_b["status"].get("allocatable")  # no capacity counted twice
    return obj_a, obj_b


async def test_two_local_clusters_sharing_a_state_dir(store: ObjectStore, tmp_path: Path):
    config = local_config(tmp_path / "shared")
    _, obj_b = await attach_twice(store, "local", create_manager("first", "local", config),
                                  create_manager("second", "local", config))
    assert obj_b["status"]["identity"].startswith("local:")
    # a third one with a state_dir of its own is Ready
    uid = await add_cluster(store, "third", "local")
    other = create_manager("third", "local", local_config(tmp_path / "own"))
    assert (await sync_once(store, "third", uid, other)).phase == "Ready"
    # the first goes away: the second is Ready at its next check
    await store.delete("clusters", "first")
    again = await sync_once(store, "second", obj_b["metadata"]["uid"],
                            create_manager("second", "local", config), phase="Error")
    assert again.phase == "Ready"


async def test_two_clusters_on_one_kube_apiserver(store: ObjectStore, k8s_clusters: Any,
                                                  k8s_config: Any):
    one = k8s_clusters[0]
    _, obj_b = await attach_twice(store, "k8", create_manager("first", "k8", k8s_config(one)),
                                  create_manager("second", "k8", k8s_config(one)))
    assert obj_b["status"]["identity"].startswith("k8:kube-system=")


async def test_k8_clusters_named_like_their_contexts_are_distinct(
        store: ObjectStore, k8s_clusters: Any):
    """The issue's own steps: ``create cluster sim-k8s-1`` and ``sim-k8s-2`` with only the
    kubeconfig: each takes the context of its name, so both are Ready and distinct."""
    kubeconfig = str(k8s_clusters[0].kubeconfig)
    names = [c.context for c in k8s_clusters[:2]]
    for name in names:
        uid = await add_cluster(store, name, "k8")
        manager = create_manager(name, "k8", {"kubeconfig": kubeconfig, "grace_period": 1})
        assert (await sync_once(store, name, uid, manager)).phase == "Ready"
    ids = [(await store.get("clusters", n))["status"]["identity"] for n in names]
    assert ids[0] != ids[1]
    # and a name matching no context of a kubeconfig with several is refused, listing them
    uid = await add_cluster(store, "elsewhere", "k8")
    got = await sync_once(store, "elsewhere", uid,
                          create_manager("elsewhere", "k8", {"kubeconfig": kubeconfig}))
    assert got.phase == "Error" and "--context" in got.message and names[0] in got.message


async def test_two_clusters_on_one_slurmctld(store: ObjectStore, slurm_clusters: Any,
                                             tmp_path: Path):
    one = slurm_clusters[0]
    _, obj_b = await attach_twice(
        store, "slurm", create_manager("first", "slurm", one.adapter_config(tmp_path / "a")),
        create_manager("second", "slurm", one.adapter_config(tmp_path / "b")))
    assert obj_b["status"]["identity"].startswith("slurm:")
    uid = await add_cluster(store, "other", "slurm")
    other = create_manager("other", "slurm", slurm_clusters[1].adapter_config(tmp_path / "c"))
    assert (await sync_once(store, "other", uid, other)).phase == "Ready"


async def test_two_local_clusters_attached_at_once_end_with_one_ready(store: ObjectStore,
                                                                      tmp_path: Path):
    """Both skylets write the identity, then read the others': whatever the interleaving, by
    the next check the older one is Ready and the younger one in Error."""
    config = local_config(tmp_path / "shared")
    uids = {n: await add_cluster(store, n, "local") for n in ("older", "younger")}
    first = await asyncio.gather(*(
        sync_once(store, n, uids[n], create_manager(n, "local", config)) for n in uids))
    second = await asyncio.gather(*(
        sync_once(store, n, uids[n], create_manager(n, "local", config), phase=r.phase)
        for n, r in zip(uids, first, strict=True)))
    phases = {n: (await store.get("clusters", n))["status"]["phase"] for n in uids}
    assert phases == {"older": "Ready", "younger": "Error"}, (first, second)
    assert second[0].phase == "Ready" and second[1].phase == "Error"
