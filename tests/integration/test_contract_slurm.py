"""Runs the shared ClusterManager contract against the ``slurm`` adapter on a simulated cluster
(real slurmctld/slurmd; see skyshift/devstack/sim/slurm.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from skyshift.compat.slurm.adapter import SlurmManager
from skyshift.devstack.sim.slurm import SimSlurmCluster
from skyshift.models.quantity import Resources
from tests.integration.contract_suite import ClusterManagerContract, ManagerFactory

pytest_plugins = ["tests.fixtures.slurm"]
pytestmark = pytest.mark.integration


class TestSlurmContract(ClusterManagerContract):
    # Slurm allocates whole CPUs: a request of 0.5 would take 1 and the allocatable check
    # compares exact amounts
    request = Resources(cpus=1, memory=64)
    deadline = 60.0

    @pytest.fixture
    def manager_factory(self, slurm_clusters: list[SimSlurmCluster]) -> ManagerFactory:
        cluster = slurm_clusters[0]
        workdir = Path(cluster.root) / "work" / f"contract-{uuid.uuid4().hex[:8]}"
        config = cluster.adapter_config(workdir)
        return lambda: SlurmManager(cluster.name, config)
