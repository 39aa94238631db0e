"""The per-cluster watch of active pods behind ``state()`` (scripted list and watch, no cluster).

What it must get right is what the allocatable is made of: every active pod's requests, a pod
leaving the field selection (finished) no longer counted, and a SkyShift pod the replica cache
already saw bound counted even before this watch hears of it.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

from skyshift.compat.kubernetes import objects as ko
from skyshift.compat.kubernetes.usage import PodUsage, slim_node


def pod(name: str, rv: int, node: str | None = "n1", phase: str = "Running",
        cpu: str = "500m", ns: str = "skyshift") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}",
                         "resourceVersion": str(rv), "labels": {"big": "x" * 100},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": node, "containers": [
                {"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}],
                 "resources": {"requests": {"cpu": cpu, "memory": "64M"},
                               "limits": {"memory": "64M"}}}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready"}]}}


class Stream:
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
        return list(self.pods), "10"

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


def cpus(pods: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in pods:
        node = p["spec"]["nodeName"]
        if node:
            out[node] = out.get(node, 0.0) + ko.pod_request(p).cpus
    return out


def started(script: Scripted) -> tuple[PodUsage, Stream]:
    usage = PodUsage("c", script.lister, script.watcher)
    usage.start()
    stream = script.streams.get(timeout=5)
    until(usage.fresh)
    return usage, stream


def test_requests_follow_the_watch_and_finished_pods_leave():
    script = Scripted([pod("a", 5), pod("other", 6, ns="team", cpu="2")])
    usage, stream = started(script)
    assert cpus(usage.pods()) == {"n1": 2.5}
    stream.send("ADDED", pod("b", 11, node=None))  # not bound yet: no node uses it
    stream.send("MODIFIED", pod("b", 12, node="n2"))
    until(lambda: cpus(usage.pods()) == {"n1": 2.5, "n2": 0.5})
    # a pod that finishes leaves the field selection: the watch says DELETED
    stream.send("DELETED", pod("a", 13, phase="Succeeded"))
    until(lambda: cpus(usage.pods()) == {"n1": 2.0, "n2": 0.5})
    # what is kept is what the sum needs, not the whole pod
    kept = {p["metadata"]["name"]: p for p in usage.pods()}["b"]
    assert "managedFields" not in kept["metadata"] and "env" not in kept["spec"]["containers"][0]
    usage.stop()
    assert not usage.fresh()


def test_newer_replica_cache_versions_are_counted_before_the_watch_sees_them():
    script = Scripted([pod("a", 5, node=None)])
    usage, stream = started(script)
    # the replica cache saw "a" bound (rv 8) and a new pod "c" the usage watch missed so far
    seen = [pod("a", 8, node="n1"), pod("c", 9, node="n2"), pod("old", 1, phase="Failed")]
    assert cpus(usage.pods(seen)) == {"n1": 0.5, "n2": 0.5}
    # an older replica-cache version never overrides the watch's newer one
    stream.send("MODIFIED", pod("a", 20, node="n3"))
    until(lambda: cpus(usage.pods()) == {"n3": 0.5})
    assert cpus(usage.pods([pod("a", 8, node="n1")])) == {"n3": 0.5}
    # and a newer finished version removes it
    assert cpus(usage.pods([pod("a", 21, node="n3", phase="Succeeded")])) == {}
    usage.stop()


def test_expired_watch_relists_and_broken_watch_is_not_fresh():
    script = Scripted([pod("a", 5)])
    usage, stream = started(script)
    script.pods = [pod("b", 31)]
    stream.send("ERROR", {"kind": "Status", "code": 410, "message": "too old"})
    until(lambda: script.lists == 2 and [p["metadata"]["name"] for p in usage.pods()] == ["b"])
    second = script.streams.get(timeout=5)
    script.fail_watch.set()
    second.close()
    until(lambda: not usage.fresh())
    assert "down" in usage.last_error
    script.fail_watch.clear()
    until(usage.fresh, deadline=15)
    usage.stop()


def test_a_slimmed_node_keeps_capacity_schedulability_and_accelerator():
    node = {"metadata": {"name": "n1", "resourceVersion": "4", "managedFields": [{"m": 1}],
                         "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
                       "capacity": {"cpu": "8"}, "images": [{"names": ["x" * 200]}],
                       "conditions": [{"type": "Ready", "status": "True", "message": "ok"}]}}
    kept = slim_node(node)
    assert "managedFields" not in kept["metadata"] and "images" not in kept["status"]
    assert ko.node_capacity(kept) == ko.node_capacity(node)
    assert ko.node_accelerator(kept) == ko.node_accelerator(node) is not None
    assert not ko.node_schedulable(kept)  # the taint is kept
    node["spec"]["taints"] = []
    assert ko.node_schedulable(slim_node(node))
