"""Runs the shared ClusterManager contract against the ``local`` adapter (no daemons needed),
as the skylet's own user and, when we are root, with ``run_as`` (replicas as ``skyshift-run``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyshift.compat.local.adapter import LocalManager
from skyshift.devstack.local import ensure_run_user
from tests.fixtures.compat import local_config
from tests.integration.contract_suite import ClusterManagerContract, ManagerFactory


class TestLocalContract(ClusterManagerContract):
    deadline = 30.0

    @pytest.fixture
    def manager_factory(self, tmp_path: Path) -> ManagerFactory:
        config = local_config(tmp_path / "cluster")
        return lambda: LocalManager("local-contract", config)


class TestLocalRunAsContract(ClusterManagerContract):
    deadline = 30.0

    @pytest.fixture
    def manager_factory(self, tmp_path: Path) -> Iterator[ManagerFactory]:
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            pytest.skip("run_as needs root and setpriv (util-linux)")
        config = local_config(tmp_path / "cluster", run_as=ensure_run_user())
        yield lambda: LocalManager("local-contract", config)
        shutil.rmtree(LocalManager("local-contract", config)._work_root, ignore_errors=True)
