"""After ``up``: attach this machine as the ``local`` cluster and point the CLI at the stack.

Both steps are idempotent, so a second ``up`` (or one after ``down``) leaves one cluster and one
``local`` context. Run as root, ``up`` creates the system user ``skyshift-run`` and the cluster
runs its replicas as users of that user's group, one per namespace (``run_as`` and
``namespace_users``), so a job cannot read ``$SKYSHIFT_HOME`` (the admin password, the signing
key, etcd's password) nor another namespace's processes; a cluster attached before that is
updated.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import yaml

from skyshift.client.config import Context, load_config, save_config
from skyshift.compat.local import proc as local_proc
from skyshift.compat.local.lb_run import RUN_BASE, run_dir
from skyshift.compat.local.user import default_work_root
from skyshift.devstack.components import StackError

LOCAL_CLUSTER = "local"
LOCAL_CONTEXT = "local"
RUN_USER = "skyshift-run"


def ensure_run_user(name: str = RUN_USER) -> str:
    """The unprivileged system user local replicas run as, created when missing (needs root)."""
    try:
        pwd.getpwnam(name)
        return name
    except KeyError:
        pass
    argv = ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
            "--shell", "/usr/sbin/nologin", name]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StackError(f"cannot create the user {name} for local replicas: {exc}") from None
    try:
        pwd.getpwnam(name)  # also when another `up` created it at the same time
    except KeyError:
        detail = (done.stderr or done.stdout).strip()
        raise StackError(
            f"cannot create the user {name} for local replicas: `{' '.join(argv)}` failed "
            f"({done.returncode}): {detail}"
        ) from None
    return name


def memory_mb() -> int:
    """Total physical memory in MiB (0 where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))
    except (ValueError, OSError, AttributeError):
        return 0


def local_state_dir(home: Path) -> Path:
    return home / "clusters" / LOCAL_CLUSTER


def stop_replicas(clusters: Path, grace: float) -> int:
    """Stop every replica still running from a local cluster whose state is under ``clusters``
    (``down --purge`` is about to delete their directories: left alone, they would run on with
    nothing that knows of them). Returns how many were running."""
    infos = [info for pid in clusters.glob("*/replicas/*/pid")
             if (info := local_proc.read_pid(pid.parent)) is not None]
    running = sum(local_proc.alive(info) for info in infos)
    local_proc.stop(infos, grace)  # also the groups of supervisors killed on their own
    return running


def _balancer_pid_files(lbs: Iterable[Path]) -> list[Path]:
    """Where the HAProxies of the local clusters with these ``lb`` directories keep their pid
    files: the ``lb`` directory, and as root the runtime directory lb_run made for it under
    /run/skyshift/lb (named by the cluster and a hash of that ``lb`` directory)."""
    found: list[Path] = []
    for lb in lbs:
        found.append(lb / "haproxy.pid")
        runtime = run_dir(lb.parent.name, lb)
        if runtime != lb:
            digest = runtime.name.rsplit("-", 1)[1]
            found += [d / "haproxy.pid" for d in sorted(RUN_BASE.glob(f"*-{digest}"))]
    return found


def _stop_haproxy(pidfile: Path) -> bool:
    """SIGTERM to the HAProxy of ``pidfile`` if its process is one (a pid reused by another
    process is left alone); its runtime directory under /run/skyshift/lb goes either way."""
    stopped = False
    try:
        pid = int(pidfile.read_text().split()[0])
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError, IndexError):
        argv = ""
    if "haproxy" in argv and str(pidfile.parent) in argv:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
            stopped = True
    if pidfile.parent.parent == RUN_BASE:
        shutil.rmtree(pidfile.parent, ignore_errors=True)
    return stopped


def stop_balancer_dirs(lbs: Iterable[Path]) -> int:
    """Stop the HAProxy of every local cluster with one of these ``lb`` directories; how many."""
    return sum(_stop_haproxy(pidfile) for pidfile in _balancer_pid_files(lbs))


def stop_balancers(clusters: Path) -> int:
    """Stop the HAProxy of every local cluster whose state is under ``clusters`` (the services
    of ``down --purge``'s clusters go with their directories). Returns how many were stopped."""
    return stop_balancer_dirs(sorted(clusters.glob("*/lb")))


def work_roots(clusters: Path) -> list[Path]:
    """The default ``run_as`` working directories (outside the home) of the local clusters whose
    state is under ``clusters``: ``down --purge`` removes them with the clusters."""
    if not clusters.is_dir():
        return []
    return [default_work_root(d.name, d) for d in sorted(clusters.iterdir()) if d.is_dir()]


def local_cluster_config(home: Path, run_as: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"state_dir": str(local_state_dir(home))}
    if run_as:
        config.update(run_as=run_as, namespace_users=True)
    return config


def local_cluster_manifest(home: Path, run_as: str | None = None) -> dict[str, Any]:
    return {
        "kind": "Cluster",
        "metadata": {"name": LOCAL_CLUSTER},
        "spec": {
            "manager": "local",
            "cpus": os.cpu_count() or 1,
            "memory": memory_mb(),
            "config": local_cluster_config(home, run_as),
        },
    }


def attach_local_cluster(
    api_url: str, home: Path, token: str | None = None, run_as: str | None = None
) -> str:
    """Create the ``local`` Cluster through the API. Returns "attached", "already attached" or,
    when the existing one lacks ``run_as``, "updated to run replicas as <user>"."""
    url = f"{api_url.rstrip('/')}/clusters"
    headers = {"Authorization": f"Bearer {token}"} if token else None
    manifest = local_cluster_manifest(home, run_as)
    try:
        resp = httpx.post(url, json=manifest, timeout=30.0, headers=headers)
        if resp.status_code == 409:
            return _update_run_as(f"{url}/{LOCAL_CLUSTER}", headers, run_as)
    except httpx.HTTPError as exc:
        raise StackError(f"could not attach the local cluster: {url}: {exc}") from None
    if resp.is_success:
        return "attached"
    raise _http_error("POST", url, resp)


def _update_run_as(url: str, headers: dict[str, str] | None, run_as: str | None) -> str:
    """Give the existing ``local`` cluster our ``run_as`` and ``namespace_users`` (its other
    settings stay)."""
    if not run_as:
        return "already attached"
    resp = httpx.get(url, timeout=30.0, headers=headers)
    if not resp.is_success:
        raise _http_error("GET", url, resp)
    obj = resp.json()
    spec = obj.setdefault("spec", {})
    config = spec.get("config") or {}
    if config.get("run_as") == run_as and config.get("namespace_users") is True:
        return "already attached"
    spec["config"] = {**config, "run_as": run_as, "namespace_users": True}
    obj.pop("status", None)
    put = httpx.put(url, json=obj, timeout=30.0, headers=headers)
    if not put.is_success:
        raise _http_error("PUT", url, put)
    return f"updated to run replicas as {run_as} (a user per namespace)"


def _http_error(method: str, url: str, resp: httpx.Response) -> StackError:
    body = resp.text.strip().replace("\n", " ")[:200]
    return StackError(
        f"could not attach the local cluster: {method} {url}: HTTP {resp.status_code} {body}"
    )


def write_local_context(
    home: Path, server: str, user: str | None = None, token: str | None = None,
    temporal_ui: str = "",
) -> None:
    """Upsert the ``local`` CLI context (server, namespace default, where the stack's Temporal
    UI is) and make it current; ``user``/``token`` (from logging in as admin) replace the
    context's credentials."""
    path = home / "config.yaml"
    try:
        cfg = load_config(path)
    except (ValueError, OSError, TypeError, yaml.YAMLError) as exc:
        raise StackError(f"cannot read {path}: {exc}") from None
    old = next((c for c in cfg.contexts if c.name == LOCAL_CONTEXT), None)
    ctx = Context(
        name=LOCAL_CONTEXT,
        server=server,
        namespace="default",
        user=user if user is not None else (old.user if old else ""),
        token=token if token is not None else (old.token if old else ""),
        temporal_ui=temporal_ui or (old.temporal_ui if old else ""),
    )
    cfg.upsert(ctx, make_current=True)
    save_config(cfg, path)
