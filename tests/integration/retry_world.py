"""Objects the activity retry cases (tests/integration/test_activity_retry.py) put in etcd.

Manifests as the API would have stored them (uid, generation, creation time set), small enough
that each case says only what matters to it.
"""

from __future__ import annotations

import uuid
from typing import Any

from skyshift.models.meta import now_iso
from skyshift.store import ObjectStore

Obj = dict[str, Any]
NS = "default"


def meta(name: str, ns: str | None = NS, **extra: Any) -> Obj:
    out: Obj = {"name": name, "uid": str(uuid.uuid4()), "generation": 1,
                "creationTimestamp": now_iso(), "labels": {}, "annotations": {}}
    if ns is not None:
        out["namespace"] = ns
    out.update(extra)
    return out


def node(cpus: float, memory: float = 4096) -> Obj:
    return {"cpus": cpus, "memory": memory, "gpus": 0, "disk": 0.0, "accelerators": {}}


async def add_cluster(store: ObjectStore, name: str, cpus: float = 4, phase: str = "Ready",
                      **spec: Any) -> Obj:
    """A Cluster whose skylet reported one node with ``cpus`` allocatable."""
    obj = {"apiVersion": "skyshift.io/v1", "kind": "Cluster", "metadata": meta(name, None),
           "spec": {"manager": "local", **spec},
           "status": {"phase": phase, "allocatable": {f"{name}-n0": node(cpus)},
                      "capacity": {f"{name}-n0": node(cpus)}}}
    created: Obj = await store.create("clusters", obj)
    return created


async def set_allocatable(store: ObjectStore, name: str, cpus: float) -> None:
    """What a skylet writes when the cluster's free capacity changed."""
    def mutate(obj: Obj) -> Obj:
        obj["status"]["allocatable"] = {f"{name}-n0": node(cpus)}
        return obj

    await store.guaranteed_update("clusters", name, None, mutate)


async def add_job(store: ObjectStore, name: str, cpus: float = 1, ns: str = NS,
                  labels: dict[str, str] | None = None, **status: Any) -> Obj:
    obj = {"apiVersion": "skyshift.io/v1", "kind": "Job",
           "metadata": meta(name, ns, labels=labels or {}),
           "spec": {"run": "sleep 30", "resources": {"cpus": cpus, "memory": 0}, "replicas": 1},
           "status": {"phase": "Pending", **status}}
    created: Obj = await store.create("jobs", obj)
    return created


async def add_object(store: ObjectStore, plural: str, kind: str, name: str, spec: Obj,
                     ns: str | None = NS, **metadata: Any) -> Obj:
    obj = {"apiVersion": "skyshift.io/v1", "kind": kind, "metadata": meta(name, ns, **metadata),
           "spec": spec, "status": {}}
    created: Obj = await store.create(plural, obj)
    return created


async def mark_deleting(store: ObjectStore, plural: str, name: str, ns: str | None = NS) -> Obj:
    def mutate(obj: Obj) -> Obj:
        obj["metadata"]["deletionTimestamp"] = now_iso()
        return obj

    out: Obj = await store.guaranteed_update(plural, name, ns, mutate)
    return out


def uid(obj: Obj) -> str:
    return str(obj["metadata"]["uid"])
