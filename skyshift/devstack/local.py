"""After ``up``: attach this machine as the ``local`` cluster and point the CLI at the stack.

Both steps are idempotent, so a second ``up`` (or one after ``down``) leaves one cluster and one
``local`` context.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import yaml

from skyshift.client.config import Context, load_config, save_config
from skyshift.devstack.components import StackError

LOCAL_CLUSTER = "local"
LOCAL_CONTEXT = "local"


def memory_mb() -> int:
    """Total physical memory in MiB (0 where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))
    except (ValueError, OSError, AttributeError):
        return 0


def local_cluster_manifest(home: Path) -> dict[str, Any]:
    return {
        "kind": "Cluster",
        "metadata": {"name": LOCAL_CLUSTER},
        "spec": {
            "manager": "local",
            "cpus": os.cpu_count() or 1,
            "memory": memory_mb(),
            "config": {"state_dir": str(home / "clusters" / LOCAL_CLUSTER)},
        },
    }


def attach_local_cluster(api_url: str, home: Path, token: str | None = None) -> str:
    """Create the ``local`` Cluster through the API. Returns "attached" or "already attached"."""
    url = f"{api_url.rstrip('/')}/clusters"
    headers = {"Authorization": f"Bearer {token}"} if token else None
    try:
        resp = httpx.post(url, json=local_cluster_manifest(home), timeout=30.0, headers=headers)
    except httpx.HTTPError as exc:
        raise StackError(f"could not attach the local cluster: POST {url}: {exc}") from None
    if resp.status_code == 409:
        return "already attached"
    if resp.is_success:
        return "attached"
    body = resp.text.strip().replace("\n", " ")[:200]
    raise StackError(
        f"could not attach the local cluster: POST {url}: HTTP {resp.status_code} {body}"
    )


def write_local_context(
    home: Path, server: str, user: str | None = None, token: str | None = None
) -> None:
    """Upsert the ``local`` CLI context (server, namespace default) and make it current;
    ``user``/``token`` (from logging in as admin) replace the context's credentials."""
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
    )
    cfg.upsert(ctx, make_current=True)
    save_config(cfg, path)
