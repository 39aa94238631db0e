"""One watch per cluster: SkyShift's pods (and Deployments) in memory, informer-style.

The skylet asks ``replicas()`` often; listing every pod each time would cost the API server
O(pods) per call. Instead one daemon thread lists SkyShift's pods once and then watches them
from that resourceVersion (re-listing on 410 Gone, reconnecting with backoff when the watch
breaks), so ``replicas()`` is a read of memory while the watch is connected. While it is not,
``fresh()`` is False and the adapter lists directly, which raises Transient when the cluster is
unreachable: a stale snapshot is never served as current.

Writes by this adapter go through the cache too (``upsert_*`` after a create, ``forget`` after
a delete) so a caller sees its own writes at once; tombstones hide the pods of deleted replicas
until they are gone (or a Deployment's garbage collection has caught up), and events older than
what the cache holds are ignored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from skyshift.compat.kubernetes.objects import (
    REPLICA,
    best_pod,
    deployment_placeholder,
    pod_status,
)
from skyshift.compat.kubernetes.watch import WatchLoop, WatchStream
from skyshift.compat.types import ReplicaStatus
from skyshift.models.base import Obj

TOMBSTONE_TTL = 120.0  # seconds the pods of a deleted replica stay hidden at most
TOMBSTONE_MIN = 10.0  # ... and at least (events about them may still be on their way)

Lister = Callable[[], tuple[list[Obj], list[Obj], str]]  # pods, deployments, resourceVersion
Watcher = Callable[[str], WatchStream]


def _meta(obj: Obj) -> Obj:
    meta: Obj = obj.get("metadata") or {}
    return meta


def _rv(obj: Obj) -> int | None:
    try:
        return int(_meta(obj).get("resourceVersion") or "")
    except ValueError:
        return None


def _newer_or_same(new: Obj, old: Obj | None) -> bool:
    if old is None:
        return True
    a, b = _rv(new), _rv(old)
    return a is None or b is None or a >= b


def replica_of(obj: Obj) -> str:
    return str((_meta(obj).get("labels") or {}).get(REPLICA) or _meta(obj).get("name") or "")


def statuses(pods: Iterable[Obj], deployments: Iterable[Obj],
             hidden: set[str] | None = None) -> list[ReplicaStatus]:
    """Replica statuses from pods and Deployments (terminating objects are already gone)."""
    hidden = hidden or set()
    groups: dict[str, list[Obj]] = {}
    for pod in pods:
        name = replica_of(pod)
        if _meta(pod).get("deletionTimestamp") or name in hidden:
            continue
        groups.setdefault(name, []).append(pod)
    out = {name: pod_status(best_pod(group)) for name, group in groups.items()}
    for dep in deployments:
        name = replica_of(dep)
        if name not in out and name not in hidden and not _meta(dep).get("deletionTimestamp"):
            out[name] = deployment_placeholder(dep)
    return [out[name] for name in sorted(out)]


class ReplicaCache(WatchLoop):
    """SkyShift's pods and Deployments of one namespace, kept current by one watch thread."""

    def __init__(self, cluster: str, lister: Lister, watcher: Watcher) -> None:
        super().__init__(cluster, f"k8s-watch-{cluster}")
        self._lister = lister
        self._watcher = watcher
        self._pods: dict[str, Obj] = {}
        self._deployments: dict[str, Obj] = {}
        self._tombstones: dict[str, float] = {}

    # ---- reads and writes -----------------------------------------------------------------------

    def snapshot(self) -> list[ReplicaStatus]:
        with self._lock:
            return statuses(self._pods.values(), self._deployments.values(), self._hidden())

    def raw_pods(self) -> list[Obj]:
        """The pods as last seen (deleted replicas' included), e.g. for request sums."""
        with self._lock:
            return list(self._pods.values())

    def hidden(self) -> set[str]:
        with self._lock:
            return self._hidden()

    def _hidden(self) -> set[str]:
        now = time.monotonic()
        live = {replica_of(p) for p in self._pods.values()}
        for name, since in list(self._tombstones.items()):
            if now - since > TOMBSTONE_TTL or (now - since > TOMBSTONE_MIN and name not in live):
                del self._tombstones[name]
        return set(self._tombstones)

    def seed(self, pods: list[Obj], deployments: list[Obj], list_rv: str) -> None:
        """Merge a list taken at ``list_rv`` (which may be older than what is cached already:
        a list that started before the latest events must not roll them back)."""
        try:
            at: int | None = int(list_rv)
        except ValueError:
            at = None
        with self._lock:
            for cached, listed in ((self._pods, pods), (self._deployments, deployments)):
                fresh = {_meta(o)["name"]: o for o in listed}
                for name, obj in list(cached.items()):
                    if name not in fresh and (at is None or (_rv(obj) or 0) <= at):
                        del cached[name]  # gone when the list was taken, and not written since
                for name, obj in fresh.items():
                    if _newer_or_same(obj, cached.get(name)):
                        cached[name] = obj

    def upsert_pod(self, pod: Obj) -> None:
        with self._lock:
            self._apply_pod("MODIFIED", pod)

    def upsert_deployment(self, dep: Obj) -> None:
        with self._lock:
            name = _meta(dep)["name"]
            if _newer_or_same(dep, self._deployments.get(name)):
                self._deployments[name] = dep

    def forget(self, names: Iterable[str]) -> None:
        """Replicas this adapter just deleted: hide them until their pods are gone."""
        now = time.monotonic()
        with self._lock:
            for name in names:
                self._tombstones[name] = now
                self._deployments.pop(name, None)

    def remember(self, name: str) -> None:
        """A replica (re)submitted under a name that was deleted before."""
        with self._lock:
            self._tombstones.pop(name, None)

    def _apply_pod(self, kind: str, pod: Obj) -> None:
        name = _meta(pod).get("name")
        if not name:
            return
        if kind == "DELETED":
            current = self._pods.get(name)
            if current is None or _meta(current).get("uid") == _meta(pod).get("uid"):
                self._pods.pop(name, None)
        elif _newer_or_same(pod, self._pods.get(name)):
            self._pods[name] = pod

    # ---- the watch thread (WatchLoop) -------------------------------------------------------

    def _relist(self) -> str:
        pods, deployments, rv = self._lister()
        self.seed(pods, deployments, rv)
        return rv

    def _watch(self, rv: str) -> WatchStream:
        return self._watcher(rv)

    def _on_event(self, kind: str, obj: Obj) -> None:
        with self._lock:
            self._apply_pod(kind, obj)
