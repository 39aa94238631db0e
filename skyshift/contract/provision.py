"""The dataclasses ClusterWorkflow's provisioning states pass around, and their pure helpers.

A provisioned Cluster is one or more SkyPilot clusters ("node groups": SkyPilot cannot resize a
cluster, so scaling adds one). Their names are derived from the Cluster's name and uid
(:func:`sky_name`), so an activity retried after a worker died launches the same name again and
the provisioner adopts what the dead attempt started; deletion tears down every name the
lifecycle ever tried, launched or not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from skyshift.compat.provision_types import LaunchRequest, NodeShape

#: seconds between two launch attempts on one infra (doubled each time, at most 60 s)
BACKOFF_ENV = "SKYSHIFT_PROVISION_BACKOFF"
#: seconds in one of idleMinutes' minutes (60; tests shorten it so idle teardown is seen fast)
MINUTE_ENV = "SKYSHIFT_PROVISION_MINUTE"
#: expected seconds to UP per infra kind, for the ETA shown while launching (an estimate)
EXPECTED_S = {"slurm": 60, "kubernetes": 60, "local": 30}
CLOUD_EXPECTED_S = 300


@dataclass
class ProvisionPlan:
    infras: list[str]  # the infra, then the candidates: the failover order
    cpus: float = 0.0
    memory_mb: float = 0.0
    accelerators: dict[str, int] = field(default_factory=dict)
    min_nodes: int = 1
    max_nodes: int = 1
    idle_minutes: int = 0
    attempts_per_infra: int = 3
    backoff_s: float = 5.0
    timeout_s: int = 900
    minute_s: float = 60.0

    @property
    def idle_s(self) -> float:
        return self.idle_minutes * self.minute_s


@dataclass
class ProvisionState:
    """Carried across continue-as-new: which infra, which groups are UP, what was tried."""

    plan: ProvisionPlan
    infra_index: int = 0
    groups: dict[str, int] = field(default_factory=dict)  # sky cluster -> nodes, UP
    tried: int = 0  # group indices 0..tried-1 were launched at least once (down them all)
    attempts: int = 0
    last_error: str = ""

    @property
    def nodes(self) -> int:
        return sum(self.groups.values())

    @property
    def infra(self) -> str:
        return self.plan.infras[min(self.infra_index, len(self.plan.infras) - 1)]


@dataclass
class ScaleRequest:
    """Grow to ``nodes`` nodes in total (capped at the plan's max); ``reason``: who asked."""

    nodes: int
    reason: str = ""


@dataclass
class LaunchInput:
    cluster: str
    uid: str
    sky_cluster: str
    infra: str
    nodes: int
    cpus: float = 0.0
    memory_mb: float = 0.0
    accelerators: dict[str, int] = field(default_factory=dict)
    timeout_s: int = 900
    attempts_before: int = 0  # launch attempts on earlier infras (for status.provision)
    groups: dict[str, int] = field(default_factory=dict)  # already UP (for status.provision)
    phase: str = "Provisioning"


@dataclass
class LaunchResult:
    sky_cluster: str
    nodes: int
    attempts: int  # this activity's attempt number


@dataclass
class DownInput:
    cluster: str
    uid: str
    sky_clusters: list[str]
    phase: str = "Terminating"
    groups: dict[str, int] = field(default_factory=dict)  # what stays UP (for status)


@dataclass
class UsageInput:
    cluster: str


@dataclass
class UsageResult:
    replicas: int  # unfinished SkyShift replicas placed on the cluster


def sky_name(cluster: str, uid: str, group: int) -> str:
    """Group ``group``'s SkyPilot cluster: ``<cluster>-<uid6>-<group>``, a letter first and at
    most 56 characters, the same for every attempt of this Cluster object."""
    short = re.sub(r"[^a-z0-9]", "", uid.lower())[:6] or "0"
    base = cluster[:40] if cluster[:1].isalpha() else f"c{cluster[:39]}"
    return f"{base}-{short}-{group}"


def launch_request(inp: LaunchInput) -> LaunchRequest:
    shape = NodeShape(inp.cpus, inp.memory_mb / 1024.0, dict(inp.accelerators))
    return LaunchRequest(inp.sky_cluster, inp.infra, inp.nodes, shape, inp.timeout_s)


def expected_seconds(infra: str) -> int:
    return EXPECTED_S.get(infra.split("/", 1)[0], CLOUD_EXPECTED_S)


def min_nodes(nodes: dict[str, Any]) -> int:
    """``provision.nodes.min`` as stored (absent: 1; 0: the cluster scales from zero)."""
    value = nodes.get("min")
    return 1 if value is None else max(int(value), 0)


def plan_of(spec: dict[str, Any]) -> ProvisionPlan | None:
    """The plan for a Cluster's (validated) spec; None when it attaches an existing cluster."""
    prov = spec.get("provision")
    if not isinstance(prov, dict) or not prov.get("infra"):
        return None
    nodes = prov.get("nodes") or {}
    lo = min_nodes(nodes)
    infras = list(dict.fromkeys([str(prov["infra"]), *[str(c) for c in
                                                       prov.get("candidates") or []]]))
    return ProvisionPlan(
        infras=infras, cpus=float(prov.get("cpus") or 0), memory_mb=float(prov.get("memory") or 0),
        accelerators={str(k): int(v) for k, v in (prov.get("accelerators") or {}).items()},
        min_nodes=lo, max_nodes=max(int(nodes.get("max") or lo), lo),
        idle_minutes=int(prov.get("idleMinutes") or 0),
        backoff_s=float(os.environ.get(BACKOFF_ENV) or 5.0),
        minute_s=float(os.environ.get(MINUTE_ENV) or 60.0),
    )
