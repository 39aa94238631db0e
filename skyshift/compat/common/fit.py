"""The "can never fit" check that batch managers (Slurm, Ray) make before submitting: a replica
bigger than every node of the cluster would pend forever, so it is refused as Permanent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from skyshift.compat.errors import Permanent
from skyshift.models.quantity import Resources


class SizedNode(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def capacity(self) -> Resources: ...


def check_fits(replica: str, request: Resources, nodes: Sequence[SizedNode], where: str,
               detail: str = "") -> None:
    """Permanent when ``request`` fits no node (nothing known about the nodes: no verdict).
    ``where`` names the cluster ("Ray cluster r1"); ``detail`` goes before the largest node."""
    if not nodes or any(request.fits_in(n.capacity) for n in nodes):
        return
    biggest = max(nodes, key=lambda n: (n.capacity.cpus, n.capacity.memory))
    raise Permanent(
        f"replica {replica} can never fit a node of {where} "
        f"({detail}largest node {biggest.name}: {'; '.join(request.shortfall(biggest.capacity))})"
    )
