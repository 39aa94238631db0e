"""The list-then-watch loop shared by the Kubernetes adapter's in-memory views.

Both the replica cache (SkyShift's pods and Deployments, for ``replicas()``) and the usage
reflectors (every active pod and every node, for ``state()``'s allocatable) keep objects of one
cluster current the same way: one daemon thread lists, then watches from that resourceVersion,
lists again on 410 Gone and every ``RESYNC`` seconds, and reconnects with backoff when the watch
breaks. While it is not connected ``fresh()`` is False and callers list directly, so a stale
view is never served as current. Subclasses say what a list seeds and what an event changes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from typing import Any, Protocol

from skyshift.models.base import Obj

log = logging.getLogger(__name__)

RESYNC = 300.0  # seconds between full re-lists (catches objects created while disconnected)


class WatchStream(Protocol):
    def __iter__(self) -> Any: ...
    def close(self) -> None: ...


class _Expired(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class WatchLoop:
    """One daemon thread keeping a view of one cluster current: list, then watch."""

    def __init__(self, cluster: str, thread_name: str) -> None:
        self.cluster = cluster
        self._thread_name = thread_name
        self._lock = threading.Lock()
        self._connected = False
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None
        self.last_error = ""

    # ---- what subclasses provide ------------------------------------------------------------

    def _relist(self) -> str:
        """List the objects, seed the view with them; return the list's resourceVersion."""
        raise NotImplementedError

    def _watch(self, rv: str) -> WatchStream:
        """A watch of the same objects from ``rv`` (lines of JSON events)."""
        raise NotImplementedError

    def _on_event(self, kind: str, obj: Obj) -> None:
        """Fold one ADDED/MODIFIED/DELETED event into the view."""
        raise NotImplementedError

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._thread_name,
                                            daemon=True)
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
        """True while the watch is connected: the view is current."""
        return self._connected and not self._stop.is_set()

    # ---- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                rv = self._relist()
                listed = time.monotonic()
                backoff = 0.5
                while not self._stop.is_set() and time.monotonic() - listed < RESYNC:
                    rv = self._watch_once(rv)
            except _Expired:
                self._connected = False
            except Exception as exc:  # the cluster is unreachable: callers list directly
                self._connected = False
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.debug("%s of cluster %s broke: %s", self._thread_name, self.cluster,
                          self.last_error)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
        self._connected = False

    def _watch_once(self, rv: str) -> str:
        stream = self._watch(rv)
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
                if kind != "BOOKMARK":
                    self._on_event(str(kind), obj)
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
        finally:
            self._stream = None
            with contextlib.suppress(Exception):  # closing a broken stream may fail again
                stream.close()
        return rv
