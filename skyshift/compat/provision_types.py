"""What the control plane asks of a cluster provisioner, and what it answers.

The provisioning activities (ClusterWorkflow's Provisioning, Scaling and Terminating states) and
the SkyPilot driver meet here, so neither imports the other: the activities hold a
``Provisioner`` and see only these types and the compat errors (``Capacity`` retried with backoff
and then failed over to the next candidate infra, ``Permanent`` ending the cluster Failed with the
provisioner's message, ``Transient`` retried). Every call blocks (SkyPilot's SDK does) and is made
from a thread; ``progress`` is how a long call reports what it is doing (the activity heartbeats
with it and writes it to the Cluster's status).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from skyshift.compat.errors import Transient

Progress = Callable[[str], None]
SkyState = Literal["UP", "INIT", "STOPPED", "ABSENT"]


class Capacity(Transient):
    """The infra has no room for the request right now (quota, no nodes, allocation pending
    past the provisioner's timeout): worth retrying later or elsewhere."""


@dataclass(frozen=True)
class NodeShape:
    """Per-node resources asked of the infra (0 / empty: the provisioner's default)."""

    cpus: float = 0.0
    memory_gb: float = 0.0
    accelerators: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchRequest:
    """One provisioned cluster (SkyPilot's unit): ``nodes`` nodes of ``shape`` on ``infra``
    (SkyPilot's names: ``slurm/<cluster>``, ``kubernetes/<context>``, ``aws/us-east-1``).
    ``cluster`` is deterministic, so launching it again adopts what a previous attempt started."""

    cluster: str
    infra: str
    nodes: int = 1
    shape: NodeShape = field(default_factory=NodeShape)
    timeout_s: int = 900


@dataclass(frozen=True)
class ProvisionedCluster:
    """What the provisioner reports about one of its clusters."""

    cluster: str
    state: SkyState
    infra: str = ""
    nodes: int = 0
    head_ip: str = ""
    message: str = ""


class Provisioner(Protocol):
    """Launches, inspects and tears down provisioned clusters. All calls are idempotent."""

    def launch(self, req: LaunchRequest, progress: Progress) -> ProvisionedCluster:
        """Bring ``req.cluster`` UP (adopting one already launched under that name). Raises
        Capacity, Permanent (no credentials, infra disabled, a shape it never has) or
        Transient."""

    def status(self, cluster: str) -> ProvisionedCluster:
        """The cluster's state; ``ABSENT`` when the provisioner has no such cluster."""

    def down(self, cluster: str, progress: Progress) -> None:
        """Tear the cluster down and release what it holds; an absent cluster is fine."""
