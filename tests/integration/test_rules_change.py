"""Pending jobs are placed again as soon as the rules that held them change.

A FilterPolicy that includes a cluster that does not exist blocks every job it governs; fixing
the policy (or labelling a cluster so a job's filter matches) must place those jobs at once, not
whenever capacity happens to change next (on an idle stack: never). Real etcd, Temporal and local
clusters; the control worker's rules watch tells the scheduler.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

# Far below anything that capacity changes or reservation expiry would take on an idle stack
# (they never come), far above a scheduler round.
REACT = 30.0


def policy(name: str, include: list[str]) -> dict[str, Any]:
    return {"apiVersion": "skyshift.io/v1", "kind": "FilterPolicy",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterFilter": {"include": include}}}


async def test_fixing_a_policy_or_cluster_labels_places_pending_jobs(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-rules", cpus=4)
    await s.cluster_phase("lc-rules", "Ready")
    await s.store.create("filterpolicies", policy("typo", ["lc-rulez"]))
    await s.submit("held", "sleep 30", cpus=1, restartPolicy="Never")

    async def explained(name: str) -> dict | None:
        obj = await s.get("jobs", name)
        return obj if obj and obj["status"].get("schedulerReasons") else None

    held = await s.wait("held explained", lambda: explained("held"))
    assert held["status"]["phase"] == "Pending"
    assert "FilterPolicy typo includes clusters that do not exist: lc-rulez" in (
        held["status"]["message"])

    def fix(obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"]["clusterFilter"]["include"] = ["lc-rules"]
        return obj

    await s.store.guaranteed_update("filterpolicies", "typo", "default", fix)
    running = await s.job_phase("held", "Running", timeout=REACT)
    assert running["status"]["placement"] == {"lc-rules": 1}

    # a job whose placement filter no cluster matches waits until a cluster gets the label
    await s.submit("zoned", "sleep 30", cpus=1, restartPolicy="Never",
                   placement={"filters": [{"matchLabels": {"zone": "east"}}]})
    zoned = await s.wait("zoned explained", lambda: explained("zoned"))
    assert zoned["status"]["phase"] == "Pending"

    def label(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["labels"] = {"zone": "east"}
        return obj

    await s.store.guaranteed_update("clusters", "lc-rules", None, label)
    running = await s.job_phase("zoned", "Running", timeout=REACT)
    assert running["status"]["placement"] == {"lc-rules": 1}
