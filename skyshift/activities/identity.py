"""One physical cluster, one Cluster object: the skylet's claim on what its adapter reached.

Attaching one cluster under two names (issue 31: ``create cluster sim-k8s-1`` and ``sim-k8s-2``
both took the kubeconfig's current context) made SkyShift count its capacity twice, spread a job
over "two" clusters that were one, and let each skylet see, count and sweep the other's
replicas. So each sync writes the identity its adapter reports
(``compat.base.cluster_identity``) to ``status.identity`` and reads the other Clusters': when an
older Cluster (creationTimestamp, then name) has the same identity, this one is a duplicate and
the sync holds it in phase Error, naming that cluster, and reports nothing from it. The rule is
the same whichever skylet applies it, so two Clusters attached at once end with one Ready: the
identity is written before the others are read, so at least one of them sees the other at once,
and the other sees it at its next check (``SyncConfig.identity_check``). Deleting the older
Cluster lets the younger one become Ready at its next check.
"""

from __future__ import annotations

from skyshift.activities.store import update_status
from skyshift.models.base import Obj
from skyshift.store import ObjectStore, list_in_pages


def _age(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def holder_of(clusters: list[Obj], name: str, identity: str) -> str:
    """The name of the Cluster that has ``identity`` before ``name`` does ("" when none):
    the oldest Cluster reporting it that is not being deleted."""
    mine = next((c for c in clusters if (c.get("metadata") or {}).get("name") == name), None)
    if mine is None or not identity:
        return ""
    rivals = [
        c for c in clusters
        if (c.get("metadata") or {}).get("name") != name
        and (c.get("status") or {}).get("identity") == identity
        and not (c.get("metadata") or {}).get("deletionTimestamp")
        and (c.get("status") or {}).get("phase") != "Deleting"
    ]
    older = sorted((c for c in rivals if _age(c) < _age(mine)), key=_age)
    return str(older[0]["metadata"]["name"]) if older else ""


async def claim(store: ObjectStore, name: str, uid: str, identity: str) -> str:
    """Record ``identity`` in the Cluster's status, then return the Cluster that had it first
    ("" when this one is the first, or there is no identity to compare)."""
    if not identity:
        return ""

    def mutate(obj: Obj) -> Obj | None:
        if uid and (obj.get("metadata") or {}).get("uid") != uid:
            return None
        status = obj.setdefault("status", {})
        if status.get("identity") == identity:
            return None
        status["identity"] = identity
        return obj

    await update_status(store, "clusters", name, None, mutate)
    return holder_of(await list_in_pages(store, "clusters"), name, identity)


def duplicate_message(name: str, holder: str, identity: str) -> str:
    return (f"cluster {name} reaches the same physical cluster as cluster {holder} "
            f"({identity}); it takes no jobs while {holder} has it. Point it elsewhere "
            f"(e.g. its --context) or delete one of them")
