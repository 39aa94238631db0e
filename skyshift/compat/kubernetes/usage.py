"""Nodes and what every active pod requests, kept by watches (for ``state()``'s allocatable).

``state()`` runs every sync round (once a second) and must subtract what all pods on each node
request, SkyShift's or not. Listing every active pod and every node each round made the cost of
a round grow with the cluster: with 1,300 pods and 100 kwok nodes a cluster, each round moved
megabytes of JSON from the apiserver and decoded them here (most of the skylet's CPU in a
profile), three clusters a second, on the machine that also had to run the pods. A
:class:`Reflector` lists once, then watches (re-listing on 410 Gone and every ``RESYNC``
seconds), and keeps of each object only what the allocatable needs: :class:`PodUsage` for the
active pods (the same field selector: a pod that finishes leaves the selection, which the watch
reports as DELETED), a plain Reflector with :func:`slim_node` for the nodes.

While a watch is not connected ``fresh()`` is False and the adapter lists as before, so an
unreachable cluster still fails the round; the adapter also asks for one node every round, the
request that notices an apiserver that stopped answering while a watch is still open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from skyshift.compat.kubernetes.watch import WatchLoop, WatchStream
from skyshift.models.base import Obj

ACTIVE = "status.phase!=Succeeded,status.phase!=Failed"
Lister = Callable[[], tuple[list[Obj], str]]  # objects, resourceVersion
Watcher = Callable[[str], WatchStream]


def key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def rv_of(pod: Obj) -> int:
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def slim_node(node: Obj) -> Obj:
    """The part of a node that its capacity, schedulability and accelerator read."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get(
        "status") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion", "labels")
                     if k in meta},
        "spec": {k: spec[k] for k in ("unschedulable", "taints") if k in spec},
        "status": {"allocatable": status.get("allocatable") or {},
                   "capacity": status.get("capacity") or {},
                   "conditions": [{"type": c.get("type"), "status": c.get("status")}
                                  for c in status.get("conditions") or []]},
    }


def slim(pod: Obj) -> Obj:
    """The part of a pod that ``pod_request`` and the node sum read."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}

    def resources(containers: list[Obj] | None) -> list[Obj]:
        return [{"resources": c.get("resources") or {}} for c in containers or []]

    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion")
                     if k in meta},
        "spec": {"nodeName": spec.get("nodeName"),
                 "containers": resources(spec.get("containers")),
                 "initContainers": resources(spec.get("initContainers"))},
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def active(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class Reflector(WatchLoop):
    """One kind of object of one cluster (slimmed), kept current by one daemon thread."""

    def __init__(self, cluster: str, what: str, lister: Lister, watcher: Watcher,
                 keep: Callable[[Obj], Obj]) -> None:
        super().__init__(cluster, f"k8s-{what}-{cluster}")
        self.what = what
        self._lister = lister
        self._watcher = watcher
        self._keep = keep
        self._objs: dict[str, Obj] = {}

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._objs.values())

    def _seed(self, objs: list[Obj]) -> None:
        with self._lock:
            self._objs = {key(o): self._keep(o) for o in objs}

    def _apply(self, kind: str, obj: Obj) -> None:
        k = key(obj)
        with self._lock:
            have = self._objs.get(k)
            if have is not None and rv_of(obj) < rv_of(have):
                return  # older than what is kept
            if kind == "DELETED":
                self._objs.pop(k, None)
            elif kind in ("ADDED", "MODIFIED"):
                self._objs[k] = self._keep(obj)

    def _relist(self) -> str:
        objs, rv = self._lister()
        self._seed(objs)
        return rv

    def _watch(self, rv: str) -> WatchStream:
        return self._watcher(rv)

    def _on_event(self, kind: str, obj: Obj) -> None:
        self._apply(kind, obj)


class PodUsage(Reflector):
    """Every active pod of one cluster (slimmed)."""

    def __init__(self, cluster: str, lister: Lister, watcher: Watcher) -> None:
        super().__init__(cluster, "pods", lister, watcher, slim)

    def pods(self, newer: Iterable[Obj] = ()) -> list[Obj]:
        """The active pods, each replaced by its version in ``newer`` when that one is more
        recent (the replica cache may have seen a SkyShift pod's binding before this watch:
        every replica the skylet reports as seen must be in the allocatable it writes)."""
        out = {key(p): p for p in self.items()}
        for pod in newer:
            k = key(pod)
            have = out.get(k)
            if have is None or rv_of(pod) > rv_of(have):
                if active(pod):
                    out[k] = pod
                else:
                    out.pop(k, None)
        return list(out.values())
