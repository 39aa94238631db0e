"""Configuration of a ``local`` cluster: declared capacity split into fake nodes.

The local manager does not measure the machine: an operator declares what SkyShift may use
(``cpus``, ``memory`` in MB or a quantity like ``"8Gi"``, optional fake ``gpus`` and
``accelerators``; ``cpus`` and ``memory`` left out, or 0, default to this host's CPU count and
memory, so a cluster created with no capacity can run jobs), and optionally ``nodes`` to
split it evenly into several equal nodes so that placement and spreading can be exercised on
one machine. ``state_dir`` (replica state) defaults to ``$SKYSHIFT_HOME/clusters/<name>`` of
the skylet, where ``skyshift down --purge`` of the
embedded stack removes it (so ``skyctl create cluster b --manager local`` needs no config).
``run_as`` (a user name) and
``work_root`` (where that user's working directories go) are explained in
:mod:`skyshift.compat.local.user`, ``namespace_users`` in
:mod:`skyshift.compat.local.tenants`. Kept apart from the adapter so a bad config fails at
construction with a ``Permanent`` error that names the field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyshift.compat.errors import Permanent
from skyshift.config import skyshift_home
from skyshift.models.quantity import (
    Resources,
    parse_accelerators,
    parse_cpus,
    parse_memory,
)


def default_state_dir(cluster: str) -> Path:
    """Where a local cluster keeps replica state when its config names no ``state_dir``."""
    return skyshift_home() / "clusters" / cluster




def host_cpus() -> float:
    """This host's CPUs: the default capacity of a local cluster that declares none."""
    return float(os.cpu_count() or 1)


def host_memory_mb() -> float:
    """This host's memory in MB (10^6 bytes), the default of a local cluster that declares none."""
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) / 1e6

@dataclass
class LocalConfig:
    state_dir: Path
    capacity: Resources
    nodes: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    grace_period: float = 5.0  # seconds between SIGTERM and SIGKILL on delete
    run_as: str | None = None  # the user replicas run as (None: the skylet's own user)
    work_root: Path | None = None  # where run_as working directories go (None: the default)
    address: str = "127.0.0.1"  # where replicas and services listen (the host's address)
    namespace_users: bool = False  # with run_as: a user per namespace and a private /proc

    @classmethod
    def parse(cls, name: str, config: dict[str, Any]) -> LocalConfig:
        try:
            state_dir = config.get("state_dir") or default_state_dir(name)
            if not isinstance(state_dir, str | Path):
                raise ValueError("state_dir must be a directory path")
            gpus = config.get("gpus", 0)
            if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
                raise ValueError("gpus must be an integer >= 0")
            nodes = config.get("nodes", 1)
            if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
                raise ValueError("nodes must be an integer >= 1")
            labels = config.get("labels") or {}
            if not isinstance(labels, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
            ):
                raise ValueError("labels must map strings to strings")
            grace = config.get("grace_period", 5.0)
            if isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0:
                raise ValueError("grace_period must be a number of seconds >= 0")
            run_as = config.get("run_as") or None
            if run_as is not None and (not isinstance(run_as, str) or ":" in run_as
                                       or "/" in run_as or run_as.strip() != run_as):
                raise ValueError("run_as must be a user name")
            work_root = config.get("work_root") or None
            if work_root is not None and (not isinstance(work_root, str | Path)
                                          or not Path(work_root).is_absolute()):
                raise ValueError("work_root must be an absolute directory path")
            namespace_users = config.get("namespace_users", False)
            if not isinstance(namespace_users, bool):
                raise ValueError("namespace_users must be true or false")
            if namespace_users and run_as is None:
                raise ValueError("namespace_users needs run_as (the users' group is its group)")
            address = config.get("address") or "127.0.0.1"
            if not isinstance(address, str) or any(c.isspace() or c in "/:@" for c in address):
                raise ValueError("address must be a host name or an IPv4 address")
            capacity = Resources(
                cpus=parse_cpus(config.get("cpus") or host_cpus()),
                memory=parse_memory(config.get("memory") or host_memory_mb()),
                gpus=gpus,
                accelerators=parse_accelerators(config.get("accelerators")),
            )
        except ValueError as exc:
            raise Permanent(f"local cluster {name}: {exc}") from exc
        return cls(Path(state_dir), capacity, nodes, dict(labels), float(grace), run_as,
                   Path(work_root) if work_root is not None else None, address, namespace_users)

    def node_names(self, cluster: str) -> list[str]:
        return [f"{cluster}-{i}" for i in range(self.nodes)]

    def node_capacity(self) -> list[Resources]:
        """The capacity split evenly; integer counts give the remainder to the first nodes."""
        n, total = self.nodes, self.capacity

        def share(count: int, i: int) -> int:
            base, extra = divmod(count, n)
            return base + (1 if i < extra else 0)

        return [
            Resources(
                cpus=total.cpus / n,
                memory=total.memory / n,
                gpus=share(total.gpus, i),
                accelerators={k: share(v, i) for k, v in total.accelerators.items()},
            )
            for i in range(n)
        ]
