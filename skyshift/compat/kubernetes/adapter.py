"""The ``k8`` cluster manager: SkyShift replicas as Kubernetes Pods and Deployments.

A cluster is attached by a kubeconfig context (``list_contexts`` lists them for the CLI).
Without ``context`` it is the context named like the cluster (as in the original SkyShift), or
the file's only context; several and none so named is a Permanent error that lists them
(``api.resolve_context``), never the current context taken by guess.
Config (all optional; see ``KubeSettings``)::

    kubeconfig: ~/.kube/config        context: my-cluster     namespace: skyshift
    create_namespace: true            image: busybox:1.36     image_pull_policy: IfNotPresent
    annotations: {}                   labels: {}              grace_period: 10
    request_timeout: 30               watch: true

Namespaces: every replica of every SkyShift namespace goes to the one Kubernetes namespace
``namespace`` (created when missing), with the SkyShift namespace in the label
``skyshift.io/namespace``. One namespace keeps the watch to one per cluster and needs no
cluster-wide rights beyond reading nodes and pods for capacity; replica names already carry the
job uid, so jobs of different SkyShift namespaces cannot collide.

Objects: ``restart_policy`` Always -> one single-replica Deployment per replica (Kubernetes
restarts it); Never/OnFailure -> a bare Pod with restartPolicy Never (SkyShift restarts it per
its own policy by resubmitting with a higher ``attempt``, which replaces the old pod). Names are
the replica names, so a retried submit finds what exists (409) and adopts it. Labels: see
``objects``. GPUs: ``nvidia.com/gpu`` limits and, for named accelerators, a required
node affinity to the nodes whose ``nvidia.com/gpu.product`` (or GKE accelerator) label names that
model. ``annotations`` go on every pod (e.g. ``pod-complete.stage.kwok.x-k8s.io/delay`` on the
simulated clusters of ``skyshift sim k8s``).

States come from one watch per cluster (``informer``); blocking client calls run in
the cluster's own thread pool (``THREADS`` threads, as many pooled connections): asyncio's
default pool (cores + 4 threads, shared by every cluster of the skylet) let a burst of submits
to one cluster queue behind another cluster's listings, a few pod creations at a time. Only
compat errors leave this module (``api`` maps them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from kubernetes.client import CoreV1Api
from kubernetes.stream import stream as k8s_stream
from kubernetes.stream.ws_client import ERROR_CHANNEL

from skyshift.compat.errors import (
    CompatError,
    NotFound,
    Permanent,
    Transient,
    Unsupported,
    require_running,
)
from skyshift.compat.kubernetes import objects as ko
from skyshift.compat.kubernetes.api import Conflict, KubeApi, KubeSettings, list_contexts, translate
from skyshift.compat.kubernetes.informer import ReplicaCache, replica_of, statuses
from skyshift.compat.kubernetes.services import KubeServices
from skyshift.compat.kubernetes.usage import ACTIVE, PodUsage, Reflector, slim_node
from skyshift.compat.types import (
    ClusterState,
    ExecResult,
    NodeState,
    ReplicaSpec,
    ReplicaStatus,
)
from skyshift.models.quantity import Resources

__all__ = ["KubernetesManager", "list_contexts"]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_EXIT_STATUS = re.compile(r"exit (?:status|code)[: ]+(\d+)")
_CHUNK = 40  # replica names per label selector (keeps URLs short)
WATCH_TIMEOUT = 60  # seconds a watch request lasts before it is renewed
THREADS = 16  # blocking calls in flight per cluster (and pooled connections to its apiserver)
T = TypeVar("T")


def _obj_name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class KubernetesManager(KubeServices):
    """ClusterManager over one Kubernetes cluster (see the module docstring); services come
    from ``KubeServices`` (``services``)."""

    manager = "k8"

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.settings = KubeSettings.parse(name, config)
        self.api = KubeApi(name, self.settings, pool_size=THREADS + 2)  # + the watch
        self._threads: ThreadPoolExecutor | None = None
        ns = self.settings.namespace
        self._pods = f"/api/v1/namespaces/{ns}/pods"
        self._deployments = f"/apis/apps/v1/namespaces/{ns}/deployments"
        self._namespace_ready = False
        self._all_pods: bool | None = None  # may list pods cluster-wide (None: not known yet)
        self._cache: ReplicaCache | None = None
        self._usage: PodUsage | None = None
        self._nodes: Reflector | None = None

    # ---- ClusterManager ---------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in this cluster's thread pool."""
        if self._threads is None:
            self._threads = ThreadPoolExecutor(THREADS, thread_name_prefix=f"k8s-{self.name}")
        return await asyncio.get_running_loop().run_in_executor(self._threads, partial(fn, *args))

    async def connect(self) -> None:
        await self._call(self._connect)

    async def close(self) -> None:
        cache, self._cache = self._cache, None
        if cache is not None:
            await self._call(cache.stop)
        for reflector in (self._usage, self._nodes):
            if reflector is not None:
                await self._call(reflector.stop)
        self._usage = self._nodes = None
        await self._call(self.api.close)
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False)

    async def identity(self) -> str:
        return await self._call(self._identity)

    async def state(self) -> ClusterState:
        return await self._call(self._state)

    async def submit(self, replicas: list[ReplicaSpec]) -> list[ReplicaStatus]:
        for spec in replicas:
            if not _NAME.fullmatch(spec.name):
                raise Permanent(f"invalid replica name {spec.name!r}: must be a DNS-1123 label")
            if spec.rank < 0 or spec.attempt < 0:
                raise Permanent(f"replica {spec.name}: rank and attempt must be >= 0")
        return await self._call(self._submit_all, replicas)

    async def replicas(self) -> list[ReplicaStatus]:
        cache = self._cache
        if cache is not None and cache.fresh():
            return cache.snapshot()
        return await self._call(self._list_replicas)

    async def delete(self, names: list[str]) -> None:
        await self._call(self._delete, [n for n in names if _NAME.fullmatch(n)])

    async def delete_job(self, job_uid: str) -> list[str]:
        if not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", job_uid):
            return []  # not a label value: no object can carry it
        return await self._call(self._delete_job, job_uid)

    async def logs(self, name: str, tail: int | None = None) -> str:
        return await self._call(self._logs, name, tail)

    async def exec(self, name: str, command: list[str], timeout: float = 60) -> ExecResult:
        if not command:
            raise Permanent("exec needs a command")
        return await self._call(self._exec, name, command, timeout)

    # ---- connect and namespace --------------------------------------------------------------

    def _connect(self) -> None:
        self.api.configuration()
        self._ensure_namespace()
        if self.settings.watch and self._cache is None:
            self._cache = ReplicaCache(self.name, self._list_objects, self._open_watch)
            self._cache.start()
        if self.settings.watch and self._usage is None:
            self._usage = PodUsage(self.name, self._list_active, self._watch_active)
            self._usage.start()
        if self.settings.watch and self._nodes is None:
            self._nodes = Reflector(self.name, "nodes", self._list_nodes, self._watch_nodes,
                                    slim_node)
            self._nodes.start()

    def _ensure_namespace(self) -> None:
        if self._namespace_ready:
            return
        ns = self.settings.namespace
        try:
            self.api.request("GET", f"/api/v1/namespaces/{ns}", what=f"get namespace {ns}")
        except NotFound:
            if not self.settings.create_namespace:
                raise Permanent(
                    f"kubernetes cluster {self.name}: namespace {ns} does not exist "
                    "(and create_namespace is false)"
                ) from None
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            with contextlib.suppress(Conflict):
                self.api.request("POST", "/api/v1/namespaces", body=body,
                                 what=f"create namespace {ns}")
            # pods are refused until the controller manager has made the default ServiceAccount
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    self.api.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default")
                    break
                except NotFound:
                    time.sleep(0.1)
        self._namespace_ready = True

    # ---- state ------------------------------------------------------------------------------

    def _active_pods_path(self) -> str:
        """Every namespace's pods, or only ours without the right to list them cluster-wide."""
        if self._all_pods is None:
            try:
                self.api.request("GET", "/api/v1/pods", {"limit": "1"}, what="list pods")
                self._all_pods = True
            except Permanent:
                self._all_pods = False
        return "/api/v1/pods" if self._all_pods else self._pods

    def _list_active(self) -> tuple[list[dict[str, Any]], str]:
        got = self.api.request("GET", self._active_pods_path(), {"fieldSelector": ACTIVE},
                               what="list pods")
        return got.get("items") or [], str((got.get("metadata") or {}).get("resourceVersion")
                                           or "")

    def _watch_active(self, rv: str) -> Any:
        query = {"fieldSelector": ACTIVE, "resourceVersion": rv, "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(WATCH_TIMEOUT)}
        return self.api.open_watch(self._active_pods_path(), query, WATCH_TIMEOUT + 30)

    def _list_nodes(self) -> tuple[list[dict[str, Any]], str]:
        got = self.api.request("GET", "/api/v1/nodes", what="list nodes")
        return got.get("items") or [], str((got.get("metadata") or {}).get("resourceVersion")
                                           or "")

    def _watch_nodes(self, rv: str) -> Any:
        query = {"resourceVersion": rv, "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(WATCH_TIMEOUT)}
        return self.api.open_watch("/api/v1/nodes", query, WATCH_TIMEOUT + 30)

    def _identity(self) -> str:
        """The kube-system namespace's UID (made once per cluster, never reused), so two
        contexts or URLs for one cluster agree; the apiserver URL when it cannot be read."""
        server = str(self.api.configuration().host or "").rstrip("/")
        try:
            ns = self.api.request("GET", "/api/v1/namespaces/kube-system",
                                  what="get namespace kube-system")
        except (Permanent, NotFound):  # e.g. no right to read it
            return f"k8:server={server}"
        uid = (ns.get("metadata") or {}).get("uid")
        return f"k8:kube-system={uid}" if uid else f"k8:server={server}"

    def _state(self) -> ClusterState:
        # Replicas are listed before the state (see the sync loop): a pod the replica cache
        # holds in a newer version than the usage watch does is counted as the cache has it.
        watched = self._nodes
        if watched is not None and watched.fresh():
            # one node: the round still fails at once when the apiserver stops answering
            self.api.request("GET", "/api/v1/nodes", {"limit": "1"}, what="list nodes")
            nodes = watched.items()
        else:
            nodes = self._list_nodes()[0]
        usage, cache = self._usage, self._cache
        if usage is not None and usage.fresh():
            pods = usage.pods(cache.raw_pods() if cache is not None else ())
        else:
            pods = self._list_active()[0]
        used: dict[str, Resources] = {}
        by_name = {_obj_name(n): n for n in nodes}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in by_name:
                acc = ko.node_accelerator(by_name[node])
                used[node] = used.get(node, Resources()) + ko.pod_request(pod, acc)
        out, ready = [], 0
        for node in nodes:
            name, capacity = _obj_name(node), ko.node_capacity(node)
            if ko.node_schedulable(node):
                ready += 1
                free = capacity - used.get(name, Resources())
            else:
                free = Resources(accelerators={k: 0 for k in capacity.accelerators})
            out.append(NodeState(name=name, capacity=capacity, allocatable=free))
        return ClusterState(
            healthy=ready > 0,
            message=f"{ready}/{len(nodes)} nodes ready and schedulable",
            nodes=out,
            labels=dict(self.settings.labels),
        )

    # ---- submit -----------------------------------------------------------------------------

    def _submit_all(self, specs: list[ReplicaSpec]) -> list[ReplicaStatus]:
        self._ensure_namespace()
        wanted = {k for s in specs for k, v in s.resources.accelerators.items() if v}
        affinity = self._accelerator_values(wanted) if wanted else {}
        return [self._submit_one(spec, affinity) for spec in specs]

    def _accelerator_values(self, wanted: set[str]) -> dict[str, dict[str, set[str]]]:
        """accelerator type -> node label -> raw label values naming that model."""
        nodes = self.api.request("GET", "/api/v1/nodes", what="list nodes")["items"]
        out: dict[str, dict[str, set[str]]] = {}
        for node in nodes:
            labels = (node.get("metadata") or {}).get("labels") or {}
            for key in ko.ACCELERATOR_LABELS:
                if (raw := labels.get(key)) and ko.accelerator_name(raw) in wanted:
                    out.setdefault(ko.accelerator_name(raw), {}).setdefault(key, set()).add(raw)
        missing = sorted(wanted - set(out))
        if missing:
            raise Permanent(
                f"kubernetes cluster {self.name}: no node has accelerator {', '.join(missing)}"
            )
        return out

    def _pod_spec(self, spec: ReplicaSpec, affinity: dict[str, dict[str, set[str]]],
                  restart: str) -> dict[str, Any]:
        values: dict[str, list[str]] = {}
        for acc, count in spec.resources.accelerators.items():
            if count:
                for key, raw in affinity[acc].items():
                    values.setdefault(key, []).extend(raw)
        return ko.pod_spec(spec, image=self.settings.image,
                           pull_policy=self.settings.image_pull_policy, restart_policy=restart,
                           grace_period=self.settings.grace_period, accelerator_values=values)

    def _submit_one(self, spec: ReplicaSpec,
                    affinity: dict[str, dict[str, set[str]]]) -> ReplicaStatus:
        if self._cache is not None:
            self._cache.remember(spec.name)
        if spec.restart_policy == "Always":
            return self._submit_deployment(spec, affinity)
        manifest = ko.pod_manifest(spec, self._pod_spec(spec, affinity, "Never"),
                                   self.settings.annotations)
        what = f"create pod {spec.name}"
        try:
            pod = self.api.request("POST", self._pods, body=manifest, what=what)
        except Conflict:
            pod = self.api.request("GET", f"{self._pods}/{spec.name}", what=f"get pod {spec.name}")
            self._check_owner(spec, pod)
            current = ko.pod_status(pod)
            if spec.attempt > current.attempt:  # a restart: replace the old attempt's pod
                self._replace_pod(spec.name, finished=current.finished)
                try:
                    pod = self.api.request("POST", self._pods, body=manifest, what=what)
                except Conflict as exc:
                    raise Transient(f"{what}: the previous attempt is still terminating") from exc
        if self._cache is not None:
            self._cache.upsert_pod(pod)
        return ko.pod_status(pod)

    def _check_owner(self, spec: ReplicaSpec, obj: dict[str, Any]) -> None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(ko.JOB_UID) != spec.job_uid:
            owner = labels.get(ko.JOB_UID) or "something not made by SkyShift"
            raise Permanent(
                f"kubernetes cluster {self.name}: name {spec.name} in namespace "
                f"{self.settings.namespace} is taken by {owner}"
            )

    def _replace_pod(self, name: str, finished: bool) -> None:
        grace = 0 if finished else self.settings.grace_period
        try:
            self.api.request("DELETE", f"{self._pods}/{name}",
                             {"gracePeriodSeconds": str(grace)}, what=f"delete pod {name}")
        except NotFound:
            return
        deadline = time.monotonic() + grace + 15
        while time.monotonic() < deadline:
            try:
                self.api.request("GET", f"{self._pods}/{name}", what=f"get pod {name}")
            except NotFound:
                return
            time.sleep(0.1)
        raise Transient(f"kubernetes cluster {self.name}: pod {name} is still terminating")

    def _submit_deployment(self, spec: ReplicaSpec,
                           affinity: dict[str, dict[str, set[str]]]) -> ReplicaStatus:
        manifest = ko.deployment_manifest(spec, self._pod_spec(spec, affinity, "Always"),
                                          self.settings.annotations)
        path = f"{self._deployments}/{spec.name}"
        try:
            dep = self.api.request("POST", self._deployments, body=manifest,
                                   what=f"create deployment {spec.name}")
        except Conflict:
            dep = self.api.request("GET", path, what=f"get deployment {spec.name}")
            self._check_owner(spec, dep)
            labels = (dep.get("metadata") or {}).get("labels") or {}
            if spec.attempt > int(labels.get(ko.ATTEMPT) or 0):  # restart: roll the pod
                attempt = {"metadata": {"labels": {ko.ATTEMPT: str(spec.attempt)}}}
                patch = {**attempt, "spec": {"template": attempt}}
                dep = self.api.request("PATCH", path, body=patch,
                                       content_type="application/merge-patch+json",
                                       what=f"restart deployment {spec.name}")
        if self._cache is not None:
            self._cache.upsert_deployment(dep)
            for status in self._cache.snapshot():
                if status.name == spec.name:
                    return status
        return ko.deployment_placeholder(dep)

    # ---- replicas ---------------------------------------------------------------------------

    def _list_objects(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        query = {"labelSelector": ko.MANAGED_SELECTOR}
        pods = self.api.request("GET", self._pods, query, what="list pods")
        deps = self.api.request("GET", self._deployments, query, what="list deployments")
        rv = str((pods.get("metadata") or {}).get("resourceVersion") or "")
        return pods.get("items") or [], deps.get("items") or [], rv

    def _open_watch(self, rv: str) -> Any:
        query = {"labelSelector": ko.MANAGED_SELECTOR, "resourceVersion": rv,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_TIMEOUT)}
        return self.api.open_watch(self._pods, query, WATCH_TIMEOUT + 30)

    def _list_replicas(self) -> list[ReplicaStatus]:
        pods, deps, rv = self._list_objects()
        cache = self._cache
        if cache is not None:
            cache.seed(pods, deps, rv)
        return statuses(pods, deps, cache.hidden() if cache is not None else set())

    # ---- delete -----------------------------------------------------------------------------

    def _delete_selected(self, selector: str) -> None:
        """Deployments cascade in the foreground (their pods go first); bare pods get a grace."""
        self.api.request("DELETE", self._deployments,
                         {"labelSelector": selector, "propagationPolicy": "Foreground"},
                         what="delete deployments")
        self.api.request("DELETE", self._pods,
                         {"labelSelector": f"{selector},{ko.WORKLOAD}=pod",
                          "gracePeriodSeconds": str(self.settings.grace_period)},
                         what="delete pods")

    def _delete(self, names: list[str]) -> None:
        for i in range(0, len(names), _CHUNK):
            chunk = names[i:i + _CHUNK]
            self._delete_selected(f"{ko.MANAGED_SELECTOR},{ko.REPLICA} in ({','.join(chunk)})")
            if self._cache is not None:
                self._cache.forget(chunk)

    def _delete_job(self, job_uid: str) -> list[str]:
        selector = f"{ko.MANAGED_SELECTOR},{ko.JOB_UID}={job_uid}"
        query = {"labelSelector": selector}
        pods = self.api.request("GET", self._pods, query, what="list pods")["items"]
        deps = self.api.request("GET", self._deployments, query, what="list deployments")["items"]
        live = [o for o in pods + deps if not (o.get("metadata") or {}).get("deletionTimestamp")]
        names = sorted({replica_of(o) for o in live})
        if pods or deps:
            self._delete_selected(selector)
        if self._cache is not None:
            self._cache.forget(names)
        return names

    # ---- logs and exec ----------------------------------------------------------------------

    def _find_pod(self, name: str) -> dict[str, Any]:
        """The pod behind a replica: the bare pod, or the best pod of its Deployment."""
        hidden = self._cache.hidden() if self._cache is not None else set()
        if _NAME.fullmatch(name) and name not in hidden:
            query = {"labelSelector": f"{ko.MANAGED_SELECTOR},{ko.REPLICA}={name}"}
            pods = self.api.request("GET", self._pods, query, what=f"find pod of {name}")["items"]
            pods = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
            if pods:
                return ko.best_pod(pods)
        raise NotFound(f"replica {name} not found on cluster {self.name}")

    def _logs(self, name: str, tail: int | None) -> str:
        pod = self._find_pod(name)
        if tail is not None and tail <= 0:
            return ""
        query = {"container": ko.CONTAINER}
        if tail is not None:
            query["tailLines"] = str(tail)
        try:
            text: str = self.api.request("GET", f"{self._pods}/{_obj_name(pod)}/log", query,
                                         what=f"logs of {name}", text=True)
        except Permanent as exc:
            if "waiting to start" in str(exc) or "ContainerCreating" in str(exc):
                return ""  # no output yet
            raise
        return text

    def _exec(self, name: str, command: list[str], timeout: float) -> ExecResult:
        pod = self._find_pod(name)
        status = ko.pod_status(pod)
        require_running(name, status)
        client = self.api.new_client()  # stream() swaps its client's transport while it runs
        what = f"kubernetes cluster {self.name}: exec in {name}"
        try:
            ws = k8s_stream(
                CoreV1Api(client).connect_get_namespaced_pod_exec,
                _obj_name(pod), self.settings.namespace, command=command,
                container=ko.CONTAINER, stdin=False, stdout=True, stderr=True, tty=False,
                _preload_content=False,
            )
            out, err = [], []
            deadline = time.monotonic() + timeout
            while ws.is_open():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    ws.close()
                    raise Transient(f"{what}: timed out after {timeout:g}s")
                ws.update(timeout=min(remaining, 1.0))
                if ws.peek_stdout():
                    out.append(ws.read_stdout())
                if ws.peek_stderr():
                    err.append(ws.read_stderr())
            out.append(ws.read_stdout())
            err.append(ws.read_stderr())
            result = ws.read_channel(ERROR_CHANNEL)
            ws.close()
        except CompatError:
            raise
        except Exception as exc:
            raise translate(exc, what) from exc
        finally:
            client.close()  # type: ignore[no-untyped-call]
        code = self._exit_code(result, what)
        return ExecResult(exit_code=code, stdout="".join(out), stderr="".join(err))

    @staticmethod
    def _exit_code(result: str, what: str) -> int:
        """Exit code from the exec error channel (a Status object)."""
        if not result:
            return 0
        try:
            status = json.loads(result)
        except ValueError:
            status = {"status": "Failure", "message": result}
        if status.get("status") == "Success":
            return 0
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                return int(cause.get("message", 1))
        message = str(status.get("message") or "")
        if m := _EXIT_STATUS.search(message):  # kwok's local exec reports "exit status N"
            return int(m.group(1))
        if "no exec found" in message or "not set local exec" in message:
            raise Unsupported(f"{what}: the cluster has no exec for this pod ({message})")
        raise Transient(f"{what}: {message}")
