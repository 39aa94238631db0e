"""The SkyPilot driver against real SkyPilot 0.14 on the simulated Slurm cluster (through its
sshd login node, as the dedicated user): launch adopts, status, errors, down."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.provision_types import LaunchRequest
from skyshift.compat.skypilot.client import SkyPilotClient
from tests.fixtures.skypilot import SESSION_SHAPE, SkyCluster, SkySlurm

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # SkyPilot calls take seconds


def test_launched_cluster_is_up_with_its_node(sky_cluster: SkyCluster,
                                              sky_client: SkyPilotClient,
                                              sky_slurm: SkySlurm) -> None:
    assert sky_cluster.launched.state == "UP"
    assert sky_cluster.launched.nodes == 1
    assert sky_cluster.progress, "launch reported no progress"
    status = sky_client.status(sky_cluster.name)
    assert status.state == "UP" and status.nodes == 1
    # the allocation SkyPilot holds is a Slurm job of the SkyPilot user, not root's
    owners = {line.split()[1] for line in sky_slurm.squeue()}
    assert owners == {sky_slurm.user}


def test_launch_again_adopts_the_cluster(sky_cluster: SkyCluster, sky_client: SkyPilotClient,
                                         sky_slurm: SkySlurm) -> None:
    jobs_before = sky_slurm.squeue()
    again = sky_client.launch(LaunchRequest(cluster=sky_cluster.name, infra=sky_cluster.infra,
                                            nodes=1, shape=SESSION_SHAPE),
                              lambda _: None)
    assert again.state == "UP"
    assert sky_slurm.squeue() == jobs_before  # no second allocation


def test_skypilot_state_lands_in_the_users_home(sky_cluster: SkyCluster,
                                                sky_slurm: SkySlurm) -> None:
    home = sky_slurm.home
    assert (home / ".sky").is_dir() and (home / ".sky_clusters").is_dir()
    assert not Path(pwd.getpwuid(os.geteuid()).pw_dir, ".sky", "config.yaml").exists() or \
        os.geteuid() == pwd.getpwnam(sky_slurm.user).pw_uid
    uid = pwd.getpwnam(sky_slurm.user).pw_uid
    assert (home / ".sky").stat().st_uid == uid


def test_unknown_infra_is_permanent_with_skypilots_message(sky_client: SkyPilotClient,
                                                           sky_slurm: SkySlurm) -> None:
    req = LaunchRequest(cluster="ss-test-nowhere", infra="slurm/no-such-cluster", nodes=1)
    with pytest.raises(Permanent) as err:
        sky_client.launch(req, lambda _: None)
    assert "no-such-cluster" in str(err.value)
    assert sky_client.status("ss-test-nowhere").state == "ABSENT"


def test_disabled_infra_is_permanent(sky_client: SkyPilotClient) -> None:
    """Kubernetes is not enabled on the test bed (``allowed_clouds: [slurm]``, no kubeconfig)."""
    req = LaunchRequest(cluster="ss-test-k8s", infra="kubernetes/no-such-context", nodes=1)
    with pytest.raises(Permanent) as err:
        sky_client.launch(req, lambda _: None)
    assert "kubernetes" in str(err.value).lower()


def test_status_and_down_of_an_absent_cluster(sky_client: SkyPilotClient) -> None:
    assert sky_client.status("ss-test-never-launched").state == "ABSENT"
    sky_client.down("ss-test-never-launched", lambda _: None)  # nothing to do: fine
