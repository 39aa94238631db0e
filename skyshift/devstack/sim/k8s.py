"""Simulated Kubernetes clusters on one machine: a real control plane with kwok's fake nodes.

The Kubernetes adapter is tested against the real kube-apiserver, scheduler and controller
manager, not a mock: each simulated cluster runs its own etcd, kube-apiserver (loopback port,
token auth), kube-controller-manager and kube-scheduler, plus a kwok controller that plays the
kubelet for M fake nodes. Pods are scheduled by the real scheduler, become Running through kwok's
stages and complete when their annotation ``pod-complete.stage.kwok.x-k8s.io/delay`` (a Go
duration such as ``"5s"``) runs out, or the same delay given as env var ``SKYSHIFT_SIM_DURATION``
(so a SkyShift job can set it through its ``envs``); env ``SKYSHIFT_SIM_EXIT_CODE=7`` makes them
fail with that exit code instead (after the delay, if any). Pods with neither run until deleted;
pods owned by a batch Job complete on their own, as with kwok's defaults. Nothing runs:
``kubectl logs`` returns the same fake log for every pod, and ``kubectl exec`` runs the command
*on this machine* (kwok's local exec) in ``<cluster>/exec``, which is why everything listens on
127.0.0.1 only.

Binaries come from ``scripts/build-k8s.sh`` (built once from Go modules, cached outside git); etcd
is ``bin/etcd`` from that cache when present, else ``etcd`` on PATH. Layout under ``home``
(default ``$SKYSHIFT_HOME/sim/k8s``)::

    kubeconfig               one context per cluster: sim-k8s-1, sim-k8s-2, ...
    sim.json                 ports, tokens and node shape of every cluster (a second ``up`` reuses)
    <cluster>/pki/           CA, serving certificate (apiserver and kwok), service-account key
    <cluster>/logs/<c>.log   one log per component; <cluster>/run/<c>.pid: "pid start-ticks"

``skyshift sim k8s up --clusters N --nodes M`` / ``down`` wrap ``start_k8s_clusters`` and
``stop_k8s_clusters``; the pytest fixture calls them directly.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import click
import httpx
import yaml

from skyshift.config import skyshift_home
from skyshift.devstack import procs
from skyshift.devstack.sim import ports

Progress = Callable[[str], None]
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
DURATION_ENV = "SKYSHIFT_SIM_DURATION"  # same as the annotation, set through a job's envs
EXIT_CODE_ENV = "SKYSHIFT_SIM_EXIT_CODE"  # fail with this exit code (after the delay, if any)
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
_REPO = Path(__file__).resolve().parents[3]
KUBE_VERSION = "v1.35.4"  # keep in step with scripts/build-k8s.sh


class SimK8sError(Exception):
    """A simulated cluster could not be started (the message says which component and why)."""


def default_home() -> Path:
    return skyshift_home() / "sim" / "k8s"


def _free_port() -> int:
    """A free port below the ephemeral range, not handed out before by this process
    (:mod:`skyshift.devstack.sim.ports`: one of the range was taken by an outgoing connection
    before the daemon bound it, and the kernel may return a just-released port again, which
    gave two clusters started together the same etcd port)."""
    return ports.free_ports(1)[0]


@dataclass
class NodeShape:
    """Capacity of every fake node (Kubernetes quantities)."""

    cpus: str = "8"
    memory: str = "32Gi"
    gpus: int = 0
    gpu_product: str = "NVIDIA-A100-SXM4-80GB"
    pods: int = 110


@dataclass
class Binaries:
    bin_dir: Path
    etcd: str

    def path(self, component: str) -> str:
        return self.etcd if component == "etcd" else str(self.bin_dir / component)

    @property
    def stages_dir(self) -> Path:
        return self.bin_dir.parent / "stages"


def default_bin_dir() -> Path:
    """Where scripts/build-k8s.sh caches the binaries."""
    cache = os.environ.get("SKYSHIFT_K8S_CACHE") or str(Path.home() / ".cache/skyshift/k8s")
    return Path(cache) / KUBE_VERSION / "bin"


def find_binaries(bin_dir: Path | None = None, build: bool = True) -> Binaries:
    """The control-plane binaries: ``bin_dir``, ``$SKYSHIFT_K8S_BIN_DIR``, or the build cache.

    With ``build`` and a SkyShift checkout, runs ``scripts/build-k8s.sh`` first (instant when
    cached; a cold build takes several minutes).
    """
    env_dir = os.environ.get("SKYSHIFT_K8S_BIN_DIR")
    if bin_dir is None and env_dir:
        bin_dir = Path(env_dir)
    script = _REPO / "scripts" / "build-k8s.sh"
    if bin_dir is None and build and script.exists():
        done = subprocess.run([str(script)], stdout=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0:
            raise SimK8sError(f"scripts/build-k8s.sh failed (exit {done.returncode})")
        bin_dir = Path(done.stdout.strip().splitlines()[-1])
    bin_dir = bin_dir or default_bin_dir()
    missing = [c for c in COMPONENTS[1:] if not (bin_dir / c).is_file()]
    if missing:
        raise SimK8sError(
            f"{bin_dir} lacks {', '.join(missing)}: run scripts/build-k8s.sh from a SkyShift "
            "checkout, or set SKYSHIFT_K8S_BIN_DIR"
        )
    etcd = bin_dir / "etcd"
    etcd_path = str(etcd) if etcd.is_file() else shutil.which("etcd")
    if etcd_path is None:
        raise SimK8sError("no etcd: run scripts/build-k8s.sh (or put etcd on PATH)")
    return Binaries(bin_dir, etcd_path)


# ---- kwok configuration -------------------------------------------------------------------


def _stage(stages_dir: Path, relative: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((stages_dir / relative).read_text())
    return doc


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def _env_value(name: str) -> str:
    """jq: the value of env var ``name`` of any container (empty output when none has it)."""
    return f'(.spec.containers[]?.env[]? | select(.name == "{name}") | .value)'


def kwok_config(stages_dir: Path, logs_file: Path, exec_dir: Path) -> list[dict[str, Any]]:
    """kwok's own node and pod stages, plus completion after a delay, fake logs and exec.

    Any Stage given to kwok replaces all of its defaults, so the defaults are included verbatim
    (copied from the kwok module by the build script) and only pod completion is ours. kwok
    renders status templates without ``.metadata``, so the exit code comes from the container's
    environment; selectors and delays see the whole pod.
    """
    delay = f'(.metadata.annotations["{DELAY_ANNOTATION}"] // {_env_value(DURATION_ENV)})'
    running = [
        _expr(".metadata.deletionTimestamp", "DoesNotExist"),
        _expr(".status.phase", "In", "Running"),
    ]
    template = _stage(stages_dir, "pod-complete.yaml")  # kwok's "general" pod-complete

    def complete(name: str, extra: list[dict[str, Any]], status: str | None) -> dict[str, Any]:
        stage: dict[str, Any] = json.loads(json.dumps(template))
        stage["metadata"]["name"] = name
        spec = stage["spec"]
        spec["selector"] = {"matchExpressions": running + extra}
        spec["delay"] = {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": delay}}
        spec.pop("weightFrom", None)
        if status is not None:
            spec["next"]["statusTemplate"] = status
        return stage

    code = (
        '{{ $code := "1" }}{{ range $item.env }}{{ if eq .name "' + EXIT_CODE_ENV + '" }}'
        '{{ $code = or .value "1" }}{{ end }}{{ end }}'
    )
    failed = (
        template["spec"]["next"]["statusTemplate"]
        .replace("- image: {{ $item.image", code + "\n- image: {{ $item.image")
        .replace("exitCode: 0", "exitCode: {{ $code }}")
        .replace("reason: Completed", "reason: Error")
        .replace("phase: Succeeded", "phase: Failed")
    )
    no_exit_code = _expr(_env_value(EXIT_CODE_ENV), "DoesNotExist")
    stages = [
        _stage(stages_dir, "node-initialize.yaml"),
        _stage(stages_dir, "node-heartbeat-with-lease.yaml"),
        _stage(stages_dir, "pod-ready.yaml"),
        _stage(stages_dir, "pod-delete.yaml"),
        complete(
            "pod-complete-job",
            [_expr(".metadata.ownerReferences.[].kind", "In", "Job"),
             _expr(delay, "DoesNotExist"), no_exit_code],
            None,
        ),
        complete("pod-complete-after-delay", [_expr(delay, "Exists"), no_exit_code], None),
        complete("pod-fail-with-exit-code", [_expr(_env_value(EXIT_CODE_ENV), "Exists")], failed),
    ]
    debug = [
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "fake-logs"},
            "spec": {"logs": [{"logsFile": str(logs_file), "follow": False}]},
        },
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterExec",
            "metadata": {"name": "local-exec"},
            "spec": {"execs": [{"local": {"workDir": str(exec_dir)}}]},
        },
    ]
    return stages + debug


def _fake_log(cluster: str) -> str:
    """CRI log format, which kwok's log server expects."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())
    lines = [
        f"simulated container on kwok cluster {cluster}",
        "kwok runs no processes: this log is the same for every pod",
        "end of fake log",
    ]
    return "".join(f"{stamp} stdout F {line}\n" for line in lines)


# ---- one cluster ----------------------------------------------------------------------------


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SimK8sError(f"{argv[0]} failed: {done.stderr.strip()[-500:]}")


def _make_pki(pki: Path) -> None:
    """A CA, a serving cert for 127.0.0.1 (apiserver and kwok) and a service-account key."""
    if (pki / "sa.pub").exists():
        return
    pki.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _run(["openssl", "req", "-x509", *ec, "-days", "3650", "-subj", "/CN=skyshift-sim-ca",
          "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.crt")])
    _run(["openssl", "req", *ec, "-subj", "/CN=kube-apiserver",
          "-keyout", str(pki / "server.key"), "-out", str(pki / "server.csr")])
    ext = pki / "server.ext"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,IP:10.96.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
    )
    _run(["openssl", "x509", "-req", "-in", str(pki / "server.csr"), "-CA", str(pki / "ca.crt"),
          "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-days", "3650",
          "-extfile", str(ext), "-out", str(pki / "server.crt")])
    _run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout",
          "-out", str(pki / "sa.key")])
    _run(["openssl", "ec", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")])


@dataclass
class ClusterRecord:
    """What sim.json remembers about a cluster, so a restart reuses its ports and token."""

    name: str
    ports: dict[str, int]
    token: str
    nodes: int
    shape: NodeShape = field(default_factory=NodeShape)

    @classmethod
    def new(cls, name: str, nodes: int, shape: NodeShape) -> ClusterRecord:
        ports = {c: _free_port() for c in (*COMPONENTS, "etcd-peer")}
        return cls(name, ports, secrets.token_hex(16), nodes, shape)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterRecord:
        return cls(data["name"], dict(data["ports"]), data["token"], int(data["nodes"]),
                   NodeShape(**data.get("shape", {})))


class SimK8sCluster:
    """One simulated cluster; every method is blocking (call from a thread in async code)."""

    def __init__(self, home: Path, record: ClusterRecord, binaries: Binaries) -> None:
        self.record = record
        self.name = record.name
        self.context = record.name
        self.kubeconfig = home / "kubeconfig"
        self.dir = home / record.name
        self.binaries = binaries
        self.server = f"https://127.0.0.1:{record.ports['kube-apiserver']}"
        self.ca_file = self.dir / "pki" / "ca.crt"
        self.token = record.token
        self.started_in: float | None = None  # seconds the last start() took

    # ---- processes --------------------------------------------------------------------------

    def _pid_file(self, component: str) -> Path:
        return self.dir / "run" / f"{component}.pid"

    def pid(self, component: str) -> int | None:
        """The running process of ``component``, or None (a stale pid file is ignored)."""
        try:
            pid_s, _, ticks_s = self._pid_file(component).read_text().partition(" ")
            pid, ticks = int(pid_s), int(ticks_s) if ticks_s.strip() else None
        except (OSError, ValueError):
            return None
        return pid if procs.is_ours(pid, ticks) else None

    def _argv(self, component: str) -> list[str]:
        p, d, pki = self.record.ports, self.dir, self.dir / "pki"
        binary = self.binaries.path(component)
        kubeconfig = str(d / "admin.kubeconfig")
        if component == "etcd":
            client, peer = f"http://127.0.0.1:{p['etcd']}", f"http://127.0.0.1:{p['etcd-peer']}"
            return [binary, f"--name={self.name}", f"--data-dir={d / 'etcd'}",
                    f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                    f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster={self.name}={peer}", "--snapshot-count=10000",
                    "--quota-backend-bytes=2147483648"]
        if component == "kube-apiserver":
            return [binary, f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                    "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                    f"--secure-port={p['kube-apiserver']}",
                    f"--tls-cert-file={pki / 'server.crt'}",
                    f"--tls-private-key-file={pki / 'server.key'}",
                    f"--client-ca-file={pki / 'ca.crt'}",
                    f"--token-auth-file={d / 'tokens.csv'}", "--authorization-mode=Node,RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={pki / 'sa.pub'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true",
                    "--enable-priority-and-fairness=false", "--profiling=false",
                    "--kubelet-preferred-address-types=InternalIP",
                    "--endpoint-reconciler-type=none"]
        if component in ("kube-controller-manager", "kube-scheduler"):
            argv = [binary, f"--kubeconfig={kubeconfig}", "--leader-elect=false",
                    "--bind-address=127.0.0.1", f"--secure-port={p[component]}",
                    f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}"]
            if component == "kube-controller-manager":
                argv += [f"--root-ca-file={pki / 'ca.crt'}",
                         f"--service-account-private-key-file={pki / 'sa.key'}",
                         "--use-service-account-credentials=false",
                         ]
            return argv
        return [binary, f"--kubeconfig={kubeconfig}", f"--config={d / 'kwok.yaml'}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                "--node-ip=127.0.0.1", f"--node-port={p['kwok']}",
                f"--server-address=127.0.0.1:{p['kwok']}", "--cidr=10.128.0.1/16",
                f"--tls-cert-file={pki / 'server.crt'}",
                f"--tls-private-key-file={pki / 'server.key'}",
                # a kubelet's default: kwok renews each node's lease every quarter of it, and
                # at 10 s the leases of 3 x 100 idle nodes kept one of two cores busy
                "--node-lease-duration-seconds=40"]

    def _spawn(self, component: str) -> int:
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(self.dir / "home")}
        child = procs.spawn(self._argv(component), env, self.dir / "logs" / f"{component}.log",
                            self.dir, drop=("",))
        ticks = procs.start_ticks(child.pid)
        self._pid_file(component).parent.mkdir(parents=True, exist_ok=True)
        self._pid_file(component).write_text(f"{child.pid} {ticks if ticks is not None else ''}")
        return child.pid

    def _ensure(self, component: str) -> None:
        if self.pid(component) is None:
            self._spawn(component)

    def _stop(self, component: str, grace: float) -> None:
        pid = self.pid(component)
        if pid is not None:
            procs.stop_group(pid, grace)
        self._pid_file(component).unlink(missing_ok=True)

    # ---- files --------------------------------------------------------------------------------

    def _write_files(self) -> None:
        d = self.dir
        for sub in ("logs", "run", "home", "exec"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        _make_pki(d / "pki")
        (d / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        (d / "admin.kubeconfig").write_text(yaml.safe_dump(kubeconfig_doc([self])))
        if not (d / "fake.log").exists():
            (d / "fake.log").write_text(_fake_log(self.name))
        config = kwok_config(self.binaries.stages_dir, d / "fake.log", d / "exec")
        (d / "kwok.yaml").write_text(yaml.safe_dump_all(config, sort_keys=False))

    # ---- API calls ----------------------------------------------------------------------------

    def _tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _http(self) -> httpx.Client:
        return httpx.Client(base_url=self.server, verify=self._tls(), timeout=5.0,
                            headers={"Authorization": f"Bearer {self.token}"})

    def _component_ok(self, component: str) -> tuple[bool, str]:
        if self.pid(component) is None:
            log = procs.tail(self.dir / "logs" / f"{component}.log", 15)
            return False, f"{component} exited: {log}"
        port = self.record.ports[component]
        url = {"etcd": f"http://127.0.0.1:{port}/health",
               "kube-apiserver": f"{self.server}/readyz"}.get(
            component, f"https://127.0.0.1:{port}/healthz")
        try:
            verify = self._tls() if component == "kube-apiserver" else False
            resp = httpx.get(url, verify=verify, timeout=2.0)
        except httpx.HTTPError as exc:
            return False, f"{component}: {type(exc).__name__}"
        return resp.status_code == 200, f"{component}: HTTP {resp.status_code}"

    def _nodes_ready(self, http: httpx.Client) -> tuple[bool, str]:
        """Every fake node Ready and with its InternalIP: the address the apiserver reaches
        kwok's kubelet by for logs and exec (a node without one answers them with "no
        preferred addresses found")."""
        resp = http.get("/api/v1/nodes")
        resp.raise_for_status()
        ready = [
            n for n in resp.json()["items"]
            if any(c["type"] == "Ready" and c["status"] == "True"
                   for c in n.get("status", {}).get("conditions") or [])
            and any(a.get("type") == "InternalIP" and a.get("address")
                    for a in n.get("status", {}).get("addresses") or [])
        ]
        return len(ready) >= self.record.nodes, f"{len(ready)}/{self.record.nodes} nodes ready"

    def _create_nodes(self, http: httpx.Client) -> None:
        shape = self.record.shape
        resources = {"cpu": shape.cpus, "memory": shape.memory, "pods": str(shape.pods)}
        labels = {"type": "kwok", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "skyshift.io/sim-cluster": self.name}
        if shape.gpus:
            resources["nvidia.com/gpu"] = str(shape.gpus)
            labels.update({"nvidia.com/gpu.product": shape.gpu_product,
                           "nvidia.com/gpu.count": str(shape.gpus)})
        for i in range(self.record.nodes):
            name = f"{self.name}-node-{i}"
            node = {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {FAKE_NODE_ANNOTATION: "fake"},
                             "labels": {**labels, "kubernetes.io/hostname": name}},
                # both addresses from the start: kwok's node-initialize stage (run again when
                # the node controller marks a node Unknown, after an apiserver outage) writes an
                # empty address list over a node that has its InternalIP but no Hostname
                # ("no preferred addresses found" for logs and exec, until the next heartbeat)
                "status": {"capacity": resources, "allocatable": resources,
                           "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                         {"type": "Hostname", "address": name}]},
            }
            resp = http.post("/api/v1/nodes", json=node)
            if resp.status_code not in (201, 409):
                raise SimK8sError(f"{self.name}: creating node {name}: {resp.text[:300]}")

    def _wait(self, what: str, check: Callable[[], tuple[bool, str]], deadline: float,
              progress: Progress, t0: float) -> None:
        last_report, detail = 0.0, ""
        while True:
            try:
                ok, detail = check()
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            if ok:
                return
            now = time.monotonic()
            if now > deadline:
                raise SimK8sError(f"{self.name}: {what} not ready in time: {detail}")
            if "exited" in detail:
                raise SimK8sError(f"{self.name}: {detail}")
            if now - last_report >= 5:
                progress(f"{self.name}: waiting for {what} ({now - t0:.0f}s; {detail})")
                last_report = now
            time.sleep(0.2)

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self, progress: Progress | None = None, timeout: float = 300.0) -> None:
        """Start (or adopt the running) components and wait until pods can run."""
        report = progress or (lambda _msg: None)
        t0 = time.monotonic()
        deadline = t0 + timeout
        self._write_files()
        for component in ("etcd", "kube-apiserver"):
            self._ensure(component)
            self._wait(component, partial(self._component_ok, component), deadline, report, t0)
        with self._http() as http:
            self._create_nodes(http)
            for component in COMPONENTS[2:]:
                self._ensure(component)
            for component in COMPONENTS[2:4]:
                self._wait(component, partial(self._component_ok, component), deadline, report,
                           t0)
            self._wait("kwok nodes", lambda: self._nodes_ready(http), deadline, report, t0)

            def default_sa() -> tuple[bool, str]:
                resp = http.get("/api/v1/namespaces/default/serviceaccounts/default")
                return resp.status_code == 200, f"default ServiceAccount: HTTP {resp.status_code}"

            self._wait("service accounts", default_sa, deadline, report, t0)
        self.started_in = time.monotonic() - t0
        report(f"{self.name}: ready in {self.started_in:.1f}s ({self.server}, "
               f"{self.record.nodes} nodes)")

    def stop_apiserver(self, grace: float = 5.0) -> None:
        """Fault injection: the API becomes unreachable; everything else keeps running."""
        self._stop("kube-apiserver", grace)

    def start_apiserver(self, timeout: float = 120.0) -> None:
        """Start the apiserver again (after a test stopped it) and wait until its nodes are
        Ready with their address again, as a start does: logs and exec reach kwok by it."""
        t0 = time.monotonic()
        self._ensure("kube-apiserver")
        self._wait("kube-apiserver", lambda: self._component_ok("kube-apiserver"),
                   t0 + timeout, lambda _m: None, t0)
        with self._http() as http:
            self._wait("kwok nodes", lambda: self._nodes_ready(http), t0 + timeout,
                       lambda _m: None, t0)

    def stop(self, grace: float = 5.0) -> None:
        for component in reversed(COMPONENTS):
            self._stop(component, grace)

    def running(self) -> dict[str, int | None]:
        return {c: self.pid(c) for c in COMPONENTS}


def kubeconfig_doc(clusters: list[SimK8sCluster]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": c.name, "cluster": {"server": c.server,
                                                  "certificate-authority": str(c.ca_file)}}
                     for c in clusters],
        "users": [{"name": f"{c.name}-admin", "user": {"token": c.token}} for c in clusters],
        "contexts": [{"name": c.context, "context": {"cluster": c.name, "user": f"{c.name}-admin"}}
                     for c in clusters],
        "current-context": clusters[0].context if clusters else "",
    }


# ---- many clusters --------------------------------------------------------------------------

_lock = threading.Lock()


def _load_state(home: Path) -> tuple[dict[str, ClusterRecord], Binaries | None]:
    try:
        data = json.loads((home / "sim.json").read_text())
    except (OSError, ValueError):
        return {}, None
    records = {c["name"]: ClusterRecord.from_dict(c) for c in data.get("clusters", [])}
    binaries = None
    if data.get("bin_dir") and data.get("etcd"):
        binaries = Binaries(Path(data["bin_dir"]), data["etcd"])
    return records, binaries


def _save(home: Path, clusters: list[SimK8sCluster], binaries: Binaries) -> None:
    home.mkdir(parents=True, exist_ok=True)
    state = {"bin_dir": str(binaries.bin_dir), "etcd": binaries.etcd,
             "clusters": [asdict(c.record) for c in clusters]}
    tmp = home / "sim.json.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, home / "sim.json")
    tmp = home / "kubeconfig.tmp"
    tmp.write_text(yaml.safe_dump(kubeconfig_doc(clusters)))
    os.replace(tmp, home / "kubeconfig")


def start_k8s_clusters(
    clusters: int = 3,
    nodes: int = 2,
    shape: NodeShape | None = None,
    home: Path | None = None,
    bin_dir: Path | None = None,
    progress: Progress | None = None,
    parallel: bool = True,
    timeout: float = 300.0,
) -> list[SimK8sCluster]:
    """Start ``sim-k8s-1`` .. ``sim-k8s-N`` (reusing running ones) and return them.

    A cluster already recorded in ``home`` keeps its ports, token and node shape.
    """
    home = home or default_home()
    binaries = find_binaries(bin_dir)
    with _lock:
        records, _ = _load_state(home)
        out = []
        for i in range(1, clusters + 1):
            name = f"sim-k8s-{i}"
            record = records.get(name) or ClusterRecord.new(name, nodes, shape or NodeShape())
            out.append(SimK8sCluster(home, record, binaries))
        kept = [SimK8sCluster(home, r, binaries) for n, r in records.items()
                if n not in {c.name for c in out}]
        _save(home, out + kept, binaries)
    if parallel:
        with ThreadPoolExecutor(max_workers=len(out) or 1) as pool:
            for future in [pool.submit(c.start, progress, timeout) for c in out]:
                future.result()
    else:
        for c in out:
            c.start(progress, timeout)
    return out


def load_k8s_clusters(home: Path | None = None) -> list[SimK8sCluster]:
    """The clusters recorded in ``home`` (running or not), without starting anything."""
    home = home or default_home()
    records, binaries = _load_state(home)
    if not records:
        return []
    binaries = binaries or find_binaries(build=False)
    return [SimK8sCluster(home, r, binaries) for r in records.values()]


def stop_k8s_clusters(home: Path | None = None, purge: bool = False) -> list[str]:
    """Stop every recorded cluster; ``purge`` also deletes ``home``. Returns the names."""
    home = home or default_home()
    records, _ = _load_state(home)
    for record in records.values():
        d = home / record.name
        for component in reversed(COMPONENTS):
            pid_file = d / "run" / f"{component}.pid"
            try:
                pid_s, _, ticks_s = pid_file.read_text().partition(" ")
                pid, ticks = int(pid_s), int(ticks_s) if ticks_s.strip() else None
            except (OSError, ValueError):
                continue
            if procs.is_ours(pid, ticks):
                procs.stop_group(pid, 5.0)
            pid_file.unlink(missing_ok=True)
    if purge:
        shutil.rmtree(home, ignore_errors=True)
    return sorted(records)


# ---- CLI --------------------------------------------------------------------------------------


@click.group("k8s")
def k8s() -> None:
    """Simulated Kubernetes clusters (real control plane, kwok nodes) for tests and demos."""


@k8s.command("up")
@click.option("--clusters", default=3, show_default=True, help="number of clusters")
@click.option("--nodes", default=2, show_default=True, help="fake nodes per cluster")
@click.option("--node-cpus", default="8", show_default=True)
@click.option("--node-memory", default="32Gi", show_default=True)
@click.option("--node-gpus", default=0, show_default=True)
@click.option("--gpu-product", default=NodeShape.gpu_product, show_default=True,
              help="value of the nvidia.com/gpu.product node label")
@click.option("--home", type=click.Path(path_type=Path), default=None,
              help="state directory [default: $SKYSHIFT_HOME/sim/k8s]")
def up(clusters: int, nodes: int, node_cpus: str, node_memory: str, node_gpus: int,
       gpu_product: str, home: Path | None) -> None:
    """Start N clusters (a second run reuses running ones) and write one kubeconfig."""
    shape = NodeShape(cpus=node_cpus, memory=node_memory, gpus=node_gpus, gpu_product=gpu_product)
    t0 = time.monotonic()
    try:
        started = start_k8s_clusters(clusters, nodes, shape, home, progress=click.echo)
    except SimK8sError as exc:
        raise click.ClickException(str(exc)) from exc
    path = started[0].kubeconfig if started else None
    click.echo(f"{len(started)} clusters ready in {time.monotonic() - t0:.1f}s; "
               f"contexts {', '.join(c.context for c in started)}")
    click.echo(f"export KUBECONFIG={path}")


@k8s.command("down")
@click.option("--home", type=click.Path(path_type=Path), default=None)
@click.option("--purge", is_flag=True, help="also delete the state directory")
def down(home: Path | None, purge: bool) -> None:
    """Stop every simulated cluster."""
    names = stop_k8s_clusters(home, purge)
    click.echo(f"stopped {', '.join(names) if names else 'nothing'}")
