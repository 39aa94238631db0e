"""Runs the shared ClusterManager contract against the ``local`` adapter (no daemons needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.compat.local import LocalManager
from tests.fixtures.compat import local_config
from tests.integration.contract_suite import ClusterManagerContract, ManagerFactory


class TestLocalContract(ClusterManagerContract):
    deadline = 30.0

    @pytest.fixture
    def manager_factory(self, tmp_path: Path) -> ManagerFactory:
        config = local_config(tmp_path / "cluster")
        return lambda: LocalManager("local-contract", config)
