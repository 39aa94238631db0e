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

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from skyshift.compat.kubernetes_objects import (
    REPLICA,
    Obj,
    best_pod,
    deployment_placeholder,
    pod_status,
)
from skyshift.compat.types import ReplicaStatus

log = logging.getLogger(__name__)

TOMBSTONE_TTL = 120.0  # seconds the pods of a deleted replica stay hidden at most
TOMBSTONE_MIN = 10.0  # ... and at least (events about them may still be on their way)
RESYNC = 300.0  # seconds between full re-lists (catches Deployments created elsewhere)


class WatchStream(Protocol):
    def __iter__(self) -> Any: ...
    def close(self) -> None: ...


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


class _Expired(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class ReplicaCache:
    """SkyShift's pods and Deployments of one namespace, kept current by one watch thread."""

    def __init__(self, cluster: str, lister: Lister, watcher: Watcher) -> None:
        self.cluster = cluster
        self._lister = lister
        self._watcher = watcher
        self._lock = threading.Lock()
        self._pods: dict[str, Obj] = {}
        self._deployments: dict[str, Obj] = {}
        self._tombstones: dict[str, float] = {}
        self._connected = False
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None
        self.last_error = ""

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"k8s-watch-{self.cluster}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            shutdown = getattr(stream, "shutdown", None) or stream.close
            with contextlib.suppress(Exception):  # already closed by the other side
                shutdown()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def fresh(self) -> bool:
        """True while the watch is connected: the snapshot is current."""
        return self._connected and not self._stop.is_set()

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

    # ---- the watch thread ---------------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                pods, deployments, rv = self._lister()
                self.seed(pods, deployments, rv)
                listed = time.monotonic()
                backoff = 0.5
                while not self._stop.is_set() and time.monotonic() - listed < RESYNC:
                    rv = self._watch_once(rv)
            except _Expired:
                self._connected = False
            except Exception as exc:  # the cluster is unreachable: callers list directly
                self._connected = False
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.debug("watch of cluster %s broke: %s", self.cluster, self.last_error)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
        self._connected = False

    def _watch_once(self, rv: str) -> str:
        stream = self._watcher(rv)
        self._stream = stream
        self._connected = True
        try:
            for line in stream:
                if self._stop.is_set():
                    break
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Expired()
                    raise RuntimeError(f"watch error: {obj.get('message')}")
                new_rv = _meta(obj).get("resourceVersion")
                if kind != "BOOKMARK":
                    with self._lock:
                        self._apply_pod(str(kind), obj)
                rv = str(new_rv or rv)
        finally:
            self._stream = None
            with contextlib.suppress(Exception):  # closing a broken stream may fail again
                stream.close()
        return rv
