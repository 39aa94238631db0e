"""A provisioned Cluster through real SkyPilot 0.14 on the simulated Slurm cluster: the
ClusterWorkflow launches a SkyPilot cluster with the real driver, the Cluster becomes Ready with
the SkyPilot cluster in ``status.provision``, and deleting the Cluster takes the SkyPilot cluster
down and releases its Slurm allocation.

The skylets here run a local cluster in place of the ``skypilot`` cluster manager (built in
parallel, see docs/provisioning.md): what is tested for real is the provisioning half, SkyPilot
and Slurm included. Needs ``scripts/install-skypilot.sh`` (tests/fixtures/skypilot.py).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skyshift.activities import provisioning
from skyshift.activities.provision_plan import sky_name
from skyshift.compat import base as compat_base
from skyshift.compat.provision_types import Provisioner
from tests.fixtures.require import require
from tests.fixtures.temporal import LifecycleStack
from tests.integration.test_provision_lifecycle import create, gone

# the SkyPilot test bed comes with the driver (compat/skypilot_client.py) from its own branch
HAVE_BED = importlib.util.find_spec("tests.fixtures.skypilot") is not None
if HAVE_BED:
    pytest_plugins = ["tests.fixtures.skypilot"]
pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


@pytest.fixture
def sky_slurm_bed(request: pytest.FixtureRequest) -> Any:
    require(HAVE_BED, "the SkyPilot test bed (tests/fixtures/skypilot.py)")
    return request.getfixturevalue("sky_slurm")


@pytest.fixture
def real_provisioner(sky_slurm_bed: Any, request: pytest.FixtureRequest,
                     tmp_path: Path) -> Iterator[Provisioner]:
    """The SkyPilot driver for this process's control worker; local stand-ins as managers."""
    from skyshift.compat.local import LocalManager

    sky_client: Provisioner = request.getfixturevalue("sky_client")

    def stand_in(name: str, config: dict[str, object]) -> LocalManager:
        state = tmp_path / "sky-local" / name
        state.mkdir(parents=True, exist_ok=True)
        return LocalManager(name, {"state_dir": str(state), "cpus": 1, "grace_period": 0.5})

    provisioning.register_provisioner("skypilot", lambda: sky_client)
    compat_base.register_manager("skypilot", stand_in)
    yield sky_client
    provisioning._REGISTRY.pop("skypilot", None)
    compat_base._REGISTRY.pop("skypilot", None)


async def test_provision_on_slurm_through_skypilot_then_delete_releases_it(
    lifecycle_stack: LifecycleStack, real_provisioner: Provisioner, sky_slurm_bed: Any,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    infra = sky_slurm_bed.infra
    started = time.monotonic()
    c = await create(s, "pv-sky", infra=infra, cpus=1, memory="2G")
    sky0 = sky_name("pv-sky", c["metadata"]["uid"], 0)
    ready = await s.cluster_phase("pv-sky", "Ready", timeout=600)
    print(f"time to Ready: {time.monotonic() - started:.1f} s")
    block = ready["status"]["provision"]
    assert block["skyClusters"] == [sky0] and block["infra"] == infra and block["nodes"] == 1
    assert real_provisioner.status(sky0).state == "UP"
    owners = {line.split()[1] for line in sky_slurm_bed.squeue()}
    assert owners == {sky_slurm_bed.user}
    await s.delete("clusters", "pv-sky")
    await gone(s, "pv-sky", timeout=300)
    assert real_provisioner.status(sky0).state == "ABSENT"
    deadline = time.monotonic() + 60
    while sky_slurm_bed.squeue() and time.monotonic() < deadline:
        time.sleep(1)
    assert sky_slurm_bed.squeue() == [], "a Slurm allocation outlived the Cluster"
