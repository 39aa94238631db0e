"""The skypilot manager's mapping (job names, SkyPilot's log format, statuses, node shapes) and
the driver's error classification, on SkyPilot's own strings as the test bed produced them."""

from __future__ import annotations

import pytest

from skyshift.compat.errors import NotFound, Permanent, Transient
from skyshift.compat.provision_types import Capacity
from skyshift.compat.skypilot.adapter import SkyConfig
from skyshift.compat.skypilot.client import SkyJob
from skyshift.compat.skypilot.errors import classify
from skyshift.compat.skypilot.map import (
    JobMeta,
    exit_code_in,
    node_capacity,
    status_of,
    user_log,
    validate_spec,
)
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED
from skyshift.models.quantity import Resources
from tests.fixtures.compat import make_spec

# `sky logs` of a failed job on the test bed (SkyPilot 0.14.1), colours included
FAILED_LOG = (
    "\x1b[2m├── \x1b[0m\x1b[2mWaiting for task resources on 1 node.\x1b[0m\n"
    "\x1b[2m└── \x1b[0mJob started. Streaming logs... \x1b[2m(Ctrl-C to exit log streaming; "
    "job will not be killed)\x1b[0m\n"
    "\x1b[36m(b-x, pid=29422)\x1b[0m oops\n"
    "\x1b[36m(b-x, pid=29422)\x1b[0m (not a prefix, pid=1) kept\n"
    "srun: error: skysim1-n1: task 0: Exited with exit code 7\n"
    "ERROR: \x1b[31mJob 2 failed with return code list:\x1b[0m [7] \n"
    "\x1b[0m\x1b[32m✓ Job finished (status: FAILED).\x1b[0m\x1b[0m\n"
)


def test_job_name_carries_the_replica_and_parses_back() -> None:
    spec = make_spec("true", resources=Resources(cpus=0.25, memory=96), attempt=3)
    meta = JobMeta.of(spec)
    name = meta.job_name()
    assert name.startswith(f"{spec.name}.ss1.default.{spec.job_uid}.")
    back = JobMeta.parse(name)
    assert back == meta
    assert back.job_name_part == spec.job_name and back.rank == spec.rank
    assert (back.cpus, back.memory) == (0.25, 96)
    # SkyPilot on Slurm runs a job as an exclusive srun step of whole CPUs
    assert back.reservation == Resources(cpus=1, memory=96)
    assert JobMeta.of(make_spec("true", resources=Resources(cpus=1.5))).whole_cpus == 2


@pytest.mark.parametrize("name", ["c-x", "sky-cmd", "a.ss1.default", "a.ss1.n.u.x0.c1.m1",
                                  "skyshift-provision"])
def test_foreign_job_names_are_not_ours(name: str) -> None:
    assert JobMeta.parse(name) is None


def test_gpus_are_refused_and_bad_names_too() -> None:
    with pytest.raises(Permanent, match="GPUs"):
        validate_spec(make_spec("true", resources=Resources(cpus=1, gpus=1)))
    spec = make_spec("true")
    spec.namespace = "a.b"
    with pytest.raises(Permanent, match="SkyPilot job name"):
        validate_spec(spec)


def test_logs_keep_only_the_tasks_lines() -> None:
    assert user_log(FAILED_LOG) == "oops\n(not a prefix, pid=1) kept\n"
    assert user_log(FAILED_LOG, tail=1) == "(not a prefix, pid=1) kept\n"
    assert user_log(FAILED_LOG, tail=0) == ""
    assert exit_code_in(FAILED_LOG) == 7
    assert exit_code_in("\x1b[36m(a, pid=1)\x1b[0m done\n") is None


def test_statuses_map_to_replica_states() -> None:
    meta = JobMeta.parse(JobMeta.of(make_spec("true")).job_name())
    assert meta is not None
    job = SkyJob(job_id=4, name="", status="RUNNING", start_at=10.0)
    assert status_of(meta, job, None).state == RUNNING
    assert status_of(meta, SkyJob(4, "", "SETTING_UP"), None).state == PENDING
    ok = status_of(meta, SkyJob(4, "", "SUCCEEDED", start_at=1, end_at=2), None)
    assert (ok.state, ok.exit_code, ok.finished_at) == (SUCCEEDED, 0, 2)
    bad = status_of(meta, SkyJob(4, "", "FAILED_SETUP"), 3)
    assert (bad.state, bad.exit_code, bad.reason) == (FAILED, 3, "FAILED_SETUP")


def test_node_capacity_from_a_status_record() -> None:
    record = {"cpus": "2", "memory": "2", "instance_type": "2CPU--2GB"}
    assert node_capacity(record) == Resources(cpus=2, memory=2048)
    assert node_capacity({"cpus": "4+", "instance_type": "4CPU--8GB"}) == Resources(
        cpus=4, memory=8192)


def test_config_needs_sky_cluster_names() -> None:
    assert SkyConfig.parse("c", {"sky_clusters": ["a-1", "a-1", "b"]}).sky_clusters == [
        "a-1", "b"]
    for bad in ({}, {"sky_clusters": []}, {"sky_clusters": ["Bad_Name"]},
                {"sky_clusters": ["a"], "call_timeout": 0}):
        with pytest.raises(Permanent):
            SkyConfig.parse("c", bad)
    # a provisioned Cluster (its lifecycle launches the SkyPilot clusters) may be at zero
    assert SkyConfig.parse("c", {"provisioned": True}).sky_clusters == []
    assert SkyConfig.parse("c", {"provisioned": True, "sky_clusters": []}).sky_clusters == []
    with pytest.raises(Permanent, match="must list 0 to 64"):
        SkyConfig.parse("c", {"provisioned": True, "sky_clusters": ["x"] * 65})


@pytest.mark.parametrize(("error", "kind"), [
    ({"type": "ClusterDoesNotExist", "mro": ["ClusterDoesNotExist", "ValueError"],
      "message": "\x1b[33mCluster 'x' does not exist.\x1b[0m"}, NotFound),
    ({"type": "ResourcesUnavailableError", "mro": ["ResourcesUnavailableError"],
      "message": "Failed to provision all possible launchable resources. Relax the task's "
                 "resource requirements: 1x Slurm(...) timed out"}, Capacity),
    ({"type": "ResourcesUnavailableError", "mro": ["ResourcesUnavailableError"],
      "message": "Catalog does not contain any instances satisfying the request"}, Permanent),
    ({"type": "ImportError", "mro": ["ImportError"], "message": "Failed to import "
      "dependencies for Kubernetes"}, Permanent),
    ({"type": "CloudError", "mro": ["CloudError"], "message": "requests error"}, Transient),
    ({"type": "ApiServerConnectionError", "mro": ["ApiServerConnectionError", "RuntimeError"],
      "message": "Could not connect to SkyPilot API server"}, Transient),
])
def test_errors_are_classified_keeping_skypilots_message(error: dict[str, object],
                                                         kind: type) -> None:
    got = classify(error, "launch of c")
    assert type(got) is kind
    assert "\x1b" not in str(got)
    assert str(error["message"]).split()[1].strip("\x1b[0m") in str(got)


def test_submit_places_on_the_first_sky_cluster_with_room() -> None:
    from skyshift.compat.skypilot.adapter import SkyPilotManager
    from skyshift.compat.types import NodeState

    manager = SkyPilotManager("c", {"sky_clusters": ["a", "b"]})
    cap = Resources(cpus=2, memory=2048)
    shapes = {c: [NodeState(f"{c}-0", cap, cap)] for c in ("a", "b")}
    one = Resources(cpus=1, memory=64)
    a_full = [("a", SkyJob(1, "", "RUNNING"), JobMeta("x-1-0", "default", "u", 0, 2, 64))]
    b_full = [("b", SkyJob(1, "", "PENDING"), JobMeta("y-1-0", "default", "v", 0, 2, 64))]
    a_done = [("a", SkyJob(2, "", "SUCCEEDED"), JobMeta("z-1-0", "default", "w", 0, 2, 64))]
    assert manager._place(one, [], shapes) == "a"
    assert manager._place(one, a_full, shapes) == "b"
    assert manager._place(one, a_done + b_full, shapes) == "a"  # finished jobs hold nothing
    # no room anywhere: the first cluster where it fits a node (it waits in SkyPilot's queue)
    assert manager._place(one, a_full + b_full, shapes) == "a"
    assert manager._place(one, [], {"b": shapes["b"]}) == "b"  # a is not up
