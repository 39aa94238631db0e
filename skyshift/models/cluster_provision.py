"""A Cluster's ``spec.provision`` and ``status.provision``: what to provision through SkyPilot.

Kept apart from :mod:`skyshift.models.cluster` because it is its own small language: an infra in
SkyPilot's naming (``slurm/<cluster>``, ``kubernetes/<context>``, ``aws/us-east-1``), the shape
of one node, how many nodes (``min`` launched first, up to ``max`` by scaling), when to tear
down an idle cluster, and the infras to fail over to. The original's flat flags
(``provision: true`` with ``cloud``, ``region``, ``cpus``, ``memory``, ``accelerators``,
``num_nodes`` beside it) are mapped onto this form by :func:`flat_provision`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from skyshift.models.meta import StrictModel
from skyshift.models.quantity import parse_accelerators, parse_cpus, parse_memory

MAX_NODES = 64
MAX_CANDIDATES = 8
MAX_IDLE_MINUTES = 7 * 24 * 60
# provider, then up to two path parts (region/zone, a Slurm cluster, a kube context)
INFRA_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}(/[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}){0,2}$")


def check_infra(value: object, field: str) -> str:
    """An infra name as SkyPilot writes it, or a ValueError naming ``field``."""
    if not isinstance(value, str) or not INFRA_RE.fullmatch(value):
        raise ValueError(f"{field}: {str(value)[:80]!r} is not an infra like slurm/<cluster>, "
                         f"kubernetes/<context> or aws/us-east-1")
    return value


class ProvisionNodes(StrictModel):
    """``min`` nodes are launched first; scaling adds node groups up to ``max`` (0: = min).
    ``min: 0`` scales from zero: the Cluster is Ready with no nodes, launches its first group
    when a job waits for it, and goes back to zero nodes after ``idleMinutes`` idle."""

    min: int = Field(default=1, ge=0, le=MAX_NODES)
    max: int = Field(default=0, ge=0, le=MAX_NODES)

    @model_validator(mode="after")
    def _bounds(self) -> ProvisionNodes:
        if self.max == 0 and self.min == 0:
            raise ValueError("provision.nodes.max: a cluster that scales from zero (min 0) "
                             "needs max >= 1, the nodes it may grow to")
        if self.max == 0:
            self.__dict__["max"] = self.min
        elif self.max < self.min:
            raise ValueError(f"provision.nodes.max: {self.max} is below min {self.min}")
        return self


class ProvisionSpec(StrictModel):
    infra: str
    cpus: float = 0.0  # per node; 0: the infra's default
    memory: float = 0.0  # MB per node
    accelerators: dict[str, int] = Field(default_factory=dict)
    nodes: ProvisionNodes = Field(default_factory=ProvisionNodes)
    idleMinutes: int = Field(default=0, ge=0, le=MAX_IDLE_MINUTES)  # 0: never torn down
    candidates: list[str] = Field(default_factory=list, max_length=MAX_CANDIDATES)

    @field_validator("infra", mode="before")
    @classmethod
    def _infra(cls, v: object) -> str:
        return check_infra(v, "provision.infra")

    @field_validator("candidates", mode="before")
    @classmethod
    def _candidates(cls, v: object) -> list[str]:
        if not isinstance(v, list):
            raise ValueError("provision.candidates: a list of infras")
        if len(v) > MAX_CANDIDATES:
            raise ValueError(f"provision.candidates: at most {MAX_CANDIDATES}")
        return [check_infra(x, f"provision.candidates[{i}]") for i, x in enumerate(v)]

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus(cls, v: object) -> float:
        cpus = parse_cpus(v)
        if cpus > 1024:
            raise ValueError("provision.cpus: at most 1024 per node")
        return cpus

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, v: object) -> float:
        mb = parse_memory(v)
        if mb > 64 * 1024 * 1024:
            raise ValueError("provision.memory: at most 64Ti per node")
        return mb

    @field_validator("accelerators", mode="before")
    @classmethod
    def _acc(cls, v: object) -> dict[str, int]:
        acc = parse_accelerators(v)
        if len(acc) > 8 or any(n > 64 or len(k) > 64 for k, n in acc.items()):
            raise ValueError("provision.accelerators: at most 8 kinds, 64 of each per node")
        return acc

    def infras(self) -> list[str]:
        """The infra, then the candidates, without repeats: the failover order."""
        return list(dict.fromkeys([self.infra, *self.candidates]))


class ProvisionStatus(StrictModel):
    """What the provisioning lifecycle did and is doing (written by its activities)."""

    skyClusters: list[str] = Field(default_factory=list)  # launched and UP, in group order
    infra: str = ""  # the infra being tried, or the one they run on
    nodes: int = 0  # nodes UP
    attempts: int = 0  # launch attempts so far (all infras)
    lastError: str = ""
    eta: str | None = None  # while launching: when it is expected UP (an estimate)
    message: str = ""  # the provisioner's last progress line


def flat_provision(data: dict[str, Any]) -> dict[str, Any]:
    """The original's ``provision: true`` (+ cloud/region/cpus/memory/accelerators/num_nodes)
    as the structured spec; ``false``/absent: no provisioning. A dict passes through."""
    value = data.get("provision")
    if value is None or isinstance(value, dict):
        return data
    if value is False:
        return {k: v for k, v in data.items() if k != "provision"}
    if value is not True:
        raise ValueError("provision: true, false or a mapping (infra, cpus, memory, nodes, ...)")
    cloud, region = str(data.get("cloud") or ""), str(data.get("region") or "")
    if not cloud:
        raise ValueError("provision.infra: provision: true needs cloud (and region), "
                         "or give provision.infra like slurm/<cluster> or aws/us-east-1")
    out = dict(data)
    out["provision"] = {
        "infra": f"{cloud.lower()}/{region}" if region else cloud.lower(),
        "cpus": data.get("cpus") or 0, "memory": data.get("memory") or 0,
        "accelerators": data.get("accelerators") or {},
        "nodes": {"min": data.get("num_nodes") or 1},
    }
    return out
