"""The per-cluster watch cache with a scripted lister and watcher (no cluster)."""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

from skyshift.compat.kubernetes import objects as ko
from skyshift.compat.kubernetes.informer import ReplicaCache
from skyshift.compat.types import FAILED, RUNNING


def pod(name: str, rv: int, phase: str = "Running", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": meta.pop("uid", f"uid-{name}"),
                         "resourceVersion": str(rv),
                         "labels": {ko.REPLICA: name, ko.JOB_UID: "u"}, **meta},
            "status": {"phase": phase}}


class Stream:
    """A watch response fed line by line from the test; ``close`` ends it."""

    def __init__(self) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()

    def send(self, kind: str, obj: dict[str, Any]) -> None:
        self.lines.put(json.dumps({"type": kind, "object": obj}))

    def __iter__(self):
        while (line := self.lines.get()) is not None:
            yield line

    def close(self) -> None:
        self.lines.put(None)


class Scripted:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.lists = 0
        self.streams: queue.Queue[Stream] = queue.Queue()
        self.fail_watch = threading.Event()

    def lister(self):
        self.lists += 1
        return list(self.pods), [], "10"

    def watcher(self, rv: str) -> Stream:
        if self.fail_watch.is_set():
            raise ConnectionRefusedError("down")
        stream = Stream()
        self.streams.put(stream)
        return stream


def until(check, deadline: float = 5.0) -> None:
    end = time.monotonic() + deadline
    while not check():
        assert time.monotonic() < end, "condition never became true"
        time.sleep(0.01)


def started(script: Scripted) -> tuple[ReplicaCache, Stream]:
    cache = ReplicaCache("c", script.lister, script.watcher)
    cache.start()
    stream = script.streams.get(timeout=5)
    until(cache.fresh)
    return cache, stream


def test_list_then_events_update_the_snapshot():
    script = Scripted([pod("a", 5)])
    cache, stream = started(script)
    assert [(s.name, s.state) for s in cache.snapshot()] == [("a", RUNNING)]
    stream.send("ADDED", pod("b", 11))
    stream.send("MODIFIED", pod("a", 12, phase="Failed"))
    until(lambda: len(cache.snapshot()) == 2 and cache.snapshot()[0].state == FAILED)
    stream.send("DELETED", pod("b", 13))
    until(lambda: [s.name for s in cache.snapshot()] == ["a"])
    cache.stop()
    assert not cache.fresh()


def test_stale_events_do_not_overwrite_newer_writes():
    script = Scripted([])
    cache, stream = started(script)
    cache.upsert_pod(pod("a", 20, phase="Failed"))
    stream.send("MODIFIED", pod("a", 15, phase="Running"))  # in flight before our write
    stream.send("ADDED", pod("z", 21))
    until(lambda: len(cache.snapshot()) == 2)
    assert cache.snapshot()[0].state == FAILED
    cache.stop()


def test_deleted_replicas_stay_hidden_while_their_pods_linger():
    script = Scripted([pod("a", 5), pod("b", 6)])
    cache, stream = started(script)
    cache.forget(["a"])
    assert [s.name for s in cache.snapshot()] == ["b"]
    stream.send("MODIFIED", pod("a", 7))  # a late event about the deleted pod
    stream.send("ADDED", pod("c", 8))
    until(lambda: len(cache.snapshot()) == 2)
    assert [s.name for s in cache.snapshot()] == ["b", "c"]
    cache.remember("a")  # resubmitted under the same name
    assert [s.name for s in cache.snapshot()] == ["a", "b", "c"]
    cache.stop()


def test_expired_watch_relists_and_broken_watch_is_not_fresh():
    script = Scripted([pod("a", 5)])
    cache, stream = started(script)
    script.pods = [pod("a", 30), pod("b", 31)]
    stream.send("ERROR", {"kind": "Status", "code": 410, "message": "too old"})
    until(lambda: script.lists == 2 and len(cache.snapshot()) == 2)
    second = script.streams.get(timeout=5)
    script.fail_watch.set()
    second.close()  # the connection drops; reconnecting fails
    until(lambda: not cache.fresh())
    assert "down" in cache.last_error
    script.fail_watch.clear()
    until(cache.fresh, deadline=15)  # backs off, then lists and watches again
    cache.stop()


def test_an_older_list_never_rolls_back_newer_state():
    cache = ReplicaCache("c", Scripted([]).lister, Scripted([]).watcher)  # not started
    cache.upsert_pod(pod("a", 20, phase="Failed"))  # seen by the watch after the list began
    cache.upsert_pod(pod("new", 25))  # created after the list was taken
    cache.upsert_pod(pod("gone", 3))  # deleted before the list was taken
    cache.seed([pod("a", 12, phase="Running"), pod("b", 14)], [], "15")
    assert [(s.name, s.state) for s in cache.snapshot()] == [
        ("a", FAILED), ("b", RUNNING), ("new", RUNNING)]
