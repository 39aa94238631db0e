"""The direct-submission baseline of bench/k8s_scale.py: the same pods, straight to the kube API.

SkyShift's figure alone says little about a test bed whose kube-apiservers, schedulers and kwok
controllers share two cores with everything else; this measures what Kubernetes itself takes for
the same work on the same clusters: the pods SkyShift made for a size (same count per cluster,
same requests and limits, same image, command and restart policy) created with the official
``kubernetes`` client (``CoreV1Api.create_namespaced_pod``, ``concurrency`` requests in flight
overall, like the benchmark's API submissions), timed the same way: first create sent -> every
pod's phase Running, seen by a watch per cluster. The pods go to their own namespace, and are
deleted (and waited gone) afterwards.

Responses of creates are not decoded into model objects (``_preload_content=False``): the
baseline is the control plane's speed, not the client's JSON decoding on a busy machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from bench._util import summary_ms
from skyshift.compat.kubernetes.objects import cpu_quantity, memory_quantity
from skyshift.devstack.sim.k8s import SimK8sCluster

NS = "skyshift-baseline"
LABEL = "bench=k8s-direct"


def pod_body(name: str, cpus: float, memory_mb: float, command: str) -> dict[str, Any]:
    """The pod SkyShift's adapter makes for a replica of the benchmark's jobs (minus its
    bookkeeping labels and env vars, which cost the control plane nothing measurable)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "k8s-direct"}},
        "spec": {
            "restartPolicy": "Never", "automountServiceAccountToken": False,
            "enableServiceLinks": False, "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/sh", "-c", command],
                "resources": {"requests": {"cpu": cpu_quantity(cpus),
                                           "memory": memory_quantity(memory_mb)},
                              "limits": {"memory": memory_quantity(memory_mb)}},
            }],
        },
    }


class Direct:
    """One baseline run over ``sims`` with ``per_cluster[sim.name]`` pods on each."""

    def __init__(self, sims: list[SimK8sCluster], per_cluster: dict[str, int],
                 concurrency: int, cpus: float, memory_mb: float) -> None:
        self.sims = [s for s in sims if per_cluster.get(s.name)]
        self.per_cluster = per_cluster
        self.concurrency = concurrency
        self.cpus, self.memory_mb = cpus, memory_mb
        self.apis = {s.name: self._api(s) for s in sims}
        self.sent: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def _api(self, sim: SimK8sCluster) -> k8s_client.CoreV1Api:
        cfg = k8s_client.Configuration()
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(sim.kubeconfig), context=sim.context, client_configuration=cfg,
            persist_config=False)
        cfg.connection_pool_maxsize = self.concurrency
        return k8s_client.CoreV1Api(k8s_client.ApiClient(cfg))

    # ---- namespace --------------------------------------------------------------------------

    def prepare(self) -> None:
        """The namespace on every cluster, with its default ServiceAccount (pods are refused
        before the controller manager made it): not part of the timed window."""
        for sim in self.sims:
            api = self.apis[sim.name]
            try:
                ns: Any = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
                api.create_namespace(ns)
            except ApiException as exc:
                if exc.status != 409:
                    raise
            deadline = time.monotonic() + 60
            while True:
                try:
                    api.read_namespaced_service_account("default", NS)
                    break
                except ApiException as exc:
                    if exc.status != 404 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

    # ---- the timed run ----------------------------------------------------------------------

    async def _watch(self, sim: SimK8sCluster, ready: asyncio.Event) -> None:
        """Record when each pod is first seen Running: a list, then a watch from its revision,
        and again whenever the watch ends (the apiserver closes a watcher that falls behind,
        which a loaded 2-core machine makes likely at 4,000 pods; a pod found Running by the
        list is recorded then, i.e. no earlier than it was seen)."""
        tls = ssl.create_default_context(cafile=str(sim.ca_file))
        headers = {"Authorization": f"Bearer {sim.token}"}
        path = f"/api/v1/namespaces/{NS}/pods"
        async with httpx.AsyncClient(base_url=sim.server, verify=tls, headers=headers,
                                     timeout=httpx.Timeout(30.0, read=None)) as http:
            while True:
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    listing = (await http.get(path, params={"labelSelector": LABEL})).json()
                    for pod in listing.get("items") or []:
                        self._seen(pod)
                    params = {"labelSelector": LABEL, "watch": "true",
                              "resourceVersion": listing["metadata"]["resourceVersion"],
                              "timeoutSeconds": "3600", "allowWatchBookmarks": "false"}
                    async with http.stream("GET", path, params=params) as resp:
                        resp.raise_for_status()
                        ready.set()
                        async for line in resp.aiter_lines():
                            if line:
                                ev = json.loads(line)
                                if ev.get("type") == "ERROR":
                                    break
                                self._seen(ev.get("object") or {})
                await asyncio.sleep(0.2)

    def _seen(self, pod: dict[str, Any]) -> None:
        name = (pod.get("metadata") or {}).get("name")
        if (pod.get("status") or {}).get("phase") == "Running" and (
            name and name not in self.running
        ):
            self.running[name] = time.monotonic()

    def _create(self, sim: SimK8sCluster, name: str, command: str) -> None:
        body: Any = pod_body(name, self.cpus, self.memory_mb, command)  # the client takes dicts
        with self._lock:
            self.sent[name] = time.monotonic()
        try:
            resp: Any = self.apis[sim.name].create_namespaced_pod(NS, body,
                                                                  _preload_content=False)
            _ = resp.data  # read the body, or the pooled connection is left mid-response
        except ApiException as exc:
            with self._lock:
                self.errors.append(f"{sim.name}/{name}: {exc.status} {exc.reason}")

    async def run(self, deadline_s: float, command: str = "sleep 3600") -> dict[str, Any]:
        await asyncio.to_thread(self.prepare)
        ready = [asyncio.Event() for _ in self.sims]
        watches = [asyncio.create_task(self._watch(s, e)) for s, e in zip(self.sims, ready,
                                                                          strict=True)]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 30)
        # round-robin over the clusters, as the jobs' placements interleaved them
        todo: list[tuple[SimK8sCluster, str]] = []
        left = dict(self.per_cluster)
        i = 0
        while any(left.get(s.name) for s in self.sims):
            for sim in self.sims:
                if left.get(sim.name):
                    left[sim.name] -= 1
                    todo.append((sim, f"d-{sim.name}-{i}"))
            i += 1
        total = len(todo)
        t0 = time.monotonic()
        with ThreadPoolExecutor(self.concurrency) as pool:
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(pool, self._create, s, n, command)
                                   for s, n in todo))
        submit_s = time.monotonic() - t0
        end = t0 + deadline_s
        while len(self.running) < total - len(self.errors) and time.monotonic() < end:
            await asyncio.sleep(0.2)
        for w in watches:
            w.cancel()
        lat = summary_ms([self.running[n] - self.sent[n] for n in self.running if n in self.sent])
        out: dict[str, Any] = {
            "pods": total, "running": len(self.running),
            "completed": len(self.running) == total and not self.errors,
            "submitted_in_s": round(submit_s, 2),
            "submit_to_running_ms": {k: lat[k] for k in ("p50_ms", "p99_ms")},
            "per_cluster": dict(self.per_cluster),
        }
        if self.running:
            out["all_running_after_s"] = round(max(self.running.values()) - t0, 1)
        need = max(1, math.ceil(0.99 * total))
        if len(self.running) >= need:  # the same figure as SkyShift's: 99% of the pods
            out["running_99pct_after_s"] = round(sorted(self.running.values())[need - 1] - t0, 1)
        if self.errors:
            out["create_errors"] = len(self.errors)
            out["first_error"] = self.errors[0]
        return out

    # ---- cleanup ----------------------------------------------------------------------------

    def cleanup(self, timeout: float = 600) -> float | None:
        """Delete the baseline's pods everywhere and wait until they are gone (seconds)."""
        t0 = time.monotonic()
        for sim in self.sims:
            self.apis[sim.name].delete_collection_namespaced_pod(
                NS, label_selector=LABEL, grace_period_seconds=0)
        while time.monotonic() - t0 < timeout:
            left = 0
            for sim in self.sims:
                resp: Any = self.apis[sim.name].list_namespaced_pod(
                    NS, label_selector=LABEL, limit=1, _preload_content=False)
                data = json.loads(resp.data)
                left += len(data["items"]) + int(
                    data["metadata"].get("remainingItemCount") or 0)
            if not left:
                return time.monotonic() - t0
            time.sleep(2)
        return None

    def close(self) -> None:
        for api in self.apis.values():
            api.api_client.close()  # type: ignore[no-untyped-call]
