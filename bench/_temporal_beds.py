"""The test beds bench/temporal_cost.py counts Temporal's work on, one per path.

Each bed is a context manager yielding a :class:`Bed`: the Cluster spec to register on the stack
(manager and config), and what a one-replica job there asks for (CPUs, envs) so that ``true``
runs to Succeeded. They bring up the same simulators as the other benchmarks: a local cluster
(a directory), one Slurm cluster of one node (bench/slurm.py), one kube-apiserver+kwok cluster
of one node whose pods complete after ``SKYSHIFT_SIM_DURATION`` (bench/k8s_scale.py), one Ray
head (bench/ray_jobs.py), and a SkyPilot cluster launched on the SkyPilot bed's Slurm
(tests/fixtures/skypilot.py; minutes to launch, seconds per ``sky`` call).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PATHS = ("local", "slurm", "k8s", "ray", "skypilot")


@dataclass
class Bed:
    spec: dict[str, Any]  # Cluster.spec: manager and config (local: also cpus and memory)
    cpus: float  # what each job asks for
    envs: dict[str, str] = field(default_factory=dict)
    concurrency: int = 8  # jobs in flight at most (the bed's room)


def _short_tmp(prefix: str) -> Path:
    """A short, enterable temp dir (Slurm's and Ray's socket paths must fit in 108 bytes;
    skyshift-run, whom Ray heads run as under root, must enter it)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    tmp.chmod(0o711)
    return tmp


@contextlib.contextmanager
def local_bed(tmp: Path) -> Iterator[Bed]:
    state = tmp / "clusters" / "cost-local"
    state.mkdir(parents=True, exist_ok=True)
    yield Bed({"manager": "local", "cpus": 1000, "memory": 10_000_000,
               "config": {"state_dir": str(state), "grace_period": 0.2}}, cpus=0.001)


@contextlib.contextmanager
def slurm_bed(tmp: Path) -> Iterator[Bed]:
    from skyshift.devstack.sim.slurm import start_slurm_clusters, stop_slurm_clusters

    home = _short_tmp("ssc-")
    try:
        [sim] = start_slurm_clusters(home / "slurm", clusters=1, nodes=1, node_cpus=8,
                                     node_memory=8000, prefix="sc")
        yield Bed({"manager": "slurm", "config": sim.adapter_config(home / "work")}, cpus=1)
    finally:
        stop_slurm_clusters(home / "slurm")
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def k8s_bed(tmp: Path) -> Iterator[Bed]:
    from skyshift.devstack.sim.k8s import (
        DURATION_ENV,
        NodeShape,
        start_k8s_clusters,
        stop_k8s_clusters,
    )

    home = tmp / "k8s"
    try:
        [sim] = start_k8s_clusters(1, 1, NodeShape(cpus="8", memory="16Gi"), home=home,
                                   timeout=600)
        config = {"kubeconfig": str(sim.kubeconfig), "context": sim.context,
                  "namespace": "skyshift", "grace_period": 0}
        yield Bed({"manager": "k8", "config": config}, cpus=0.1, envs={DURATION_ENV: "1s"})
    finally:
        stop_k8s_clusters(home)


@contextlib.contextmanager
def ray_bed(tmp: Path) -> Iterator[Bed]:
    from skyshift.devstack.sim.ray import start_ray_clusters, stop_ray_clusters

    home = _short_tmp("src-")
    try:
        [sim] = start_ray_clusters(home, clusters=1, cpus=2, prefix="rc")
        yield Bed({"manager": "ray", "config": sim.adapter_config()}, cpus=0.25, concurrency=4)
    finally:
        stop_ray_clusters(home)
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def skypilot_bed(tmp: Path) -> Iterator[Bed]:
    from skyshift.compat.provision_types import LaunchRequest, NodeShape
    from skyshift.compat.skypilot.client import SkyPilotClient, stop_api_server
    from skyshift.devstack.sim.skypilot import sky_slurm_bed

    with sky_slurm_bed() as bed:
        client = SkyPilotClient(user=bed.user)
        name = f"ss-cost-{uuid.uuid4().hex[:6]}"
        try:
            client.check([bed.infra.split("/")[0]])
            client.launch(LaunchRequest(cluster=name, infra=bed.infra, nodes=1,
                                        shape=NodeShape(cpus=4, memory_gb=4), timeout_s=900),
                          print)
            yield Bed({"manager": "skypilot",
                       "config": {"sky_clusters": [name], "user": bed.user}},
                      cpus=1, concurrency=4)
        finally:
            with contextlib.suppress(Exception):
                client.down(name, print)
            stop_api_server(client)


BEDS: dict[str, Callable[[Path], contextlib.AbstractContextManager[Bed]]] = {
    "local": local_bed, "slurm": slurm_bed, "k8s": k8s_bed, "ray": ray_bed,
    "skypilot": skypilot_bed,
}
