"""The ``ray`` adapter's pure mapping (``compat.ray.map``): metadata round trip, Jobs API
statuses -> replica states, entrypoint resources, node capacity, log filtering, errors.

The job dicts are shaped like ``JobDetails.model_dump()`` of Ray 2.60 as seen from a real head
(see test_contract_ray.py for the adapter on the real thing)."""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.compat.errors import NotFound, Permanent, Transient
from skyshift.compat.ray.map import (
    GHOST_ENTRYPOINT,
    MB,
    RayMeta,
    classify,
    current,
    custom_resources,
    entrypoint_resources,
    is_ghost,
    is_terminal,
    node_capacity,
    replica_env,
    reservation,
    status_of,
    submission_id,
    user_log,
    validate_spec,
)
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, ReplicaSpec
from skyshift.models.quantity import Resources


def spec(**kw: Any) -> ReplicaSpec:
    base: dict[str, Any] = dict(name="train-0123abcd-1", job_name="train", namespace="ml",
                                job_uid="0123abcd" * 4, rank=1, run="echo hi", attempt=2,
                                resources=Resources(cpus=1.5, memory=256, gpus=0,
                                                    accelerators={"A100": 2}))
    base.update(kw)
    return ReplicaSpec(**base)


def job(status: str, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "submission_id": "train-0123abcd-1", "status": status,
        "metadata": RayMeta.of(spec()).to_metadata(), "start_time": 1_700_000_000_000,
        "end_time": None, "driver_exit_code": None, "message": "", "error_type": None,
    }
    out.update(kw)
    return out


def test_metadata_round_trip_keeps_identity_and_reservation() -> None:
    meta = RayMeta.of(spec())
    back = RayMeta.from_metadata(meta.to_metadata())
    assert back == meta
    assert all(isinstance(v, str) for v in meta.to_metadata().values())


@pytest.mark.parametrize("metadata", [None, {}, {"skyshift": "v0"}, {"owner": "someone"},
                                      {"skyshift": "v1", "skyshift.replica": "x"}])
def test_jobs_without_our_metadata_are_not_ours(metadata: Any) -> None:
    assert status_of(job("RUNNING", metadata=metadata)) is None


def test_states_map_like_other_adapters() -> None:
    pending = status_of(job("PENDING", message="waiting for resources"))
    assert pending is not None and pending[1].state == PENDING
    assert pending[1].started_at is None and "waiting" in pending[1].message
    running = status_of(job("RUNNING"))
    assert running is not None and running[1].state == RUNNING
    assert running[1].started_at == 1_700_000_000.0 and running[1].finished_at is None
    ok = status_of(job("SUCCEEDED", driver_exit_code=0, end_time=1_700_000_005_000))
    assert ok is not None and (ok[1].state, ok[1].exit_code, ok[1].reason) == (
        SUCCEEDED, 0, "Completed")
    assert ok[1].finished_at == 1_700_000_005.0
    failed = status_of(job("FAILED", driver_exit_code=7))
    assert failed is not None and (failed[1].state, failed[1].exit_code) == (FAILED, 7)
    killed = status_of(job("FAILED", driver_exit_code=137))
    assert killed is not None and killed[1].reason == "Signaled"
    stopped = status_of(job("STOPPED", message="Job was intentionally stopped."))
    assert stopped is not None and (stopped[1].state, stopped[1].reason) == (FAILED, "Stopped")
    never = status_of(job("FAILED", error_type="JOB_SUPERVISOR_ACTOR_START_FAILURE",
                          message="could not start\nmore"))
    assert never is not None and never[1].exit_code is None
    assert never[1].reason == "JobSupervisorActorStartFailure"
    assert never[1].message == "could not start"
    assert status_of(job("RUNNING"))[1].attempt == 2  # type: ignore[index]
    assert is_terminal(job("STOPPED")) and not is_terminal(job("PENDING"))


def test_entrypoint_resources_reserve_cpus_memory_gpus_and_type() -> None:
    kw = entrypoint_resources(Resources(cpus=1.5, memory=256, accelerators={"A100": 2}), set())
    assert kw == {"entrypoint_num_cpus": 1.5, "entrypoint_num_gpus": 2.0,
                  "entrypoint_memory": 256 * MB,
                  "entrypoint_resources": {"accelerator_type:A100": 0.001}}
    assert entrypoint_resources(Resources(gpus=1), set()) == {"entrypoint_num_gpus": 1.0}
    assert entrypoint_resources(Resources(accelerators={"TPU": 4}), {"TPU"}) == {
        "entrypoint_resources": {"TPU": 4.0}}
    assert entrypoint_resources(Resources(), set()) == {}
    with pytest.raises(Permanent, match="one accelerator type"):
        entrypoint_resources(Resources(accelerators={"A100": 1, "T4": 1}), set())


def test_node_capacity_from_resources_total() -> None:
    total = {"CPU": 4.0, "GPU": 2.0, "memory": 8e9, "object_store_memory": 1e8,
             "node:127.0.0.1": 1.0, "node:__internal_head__": 1.0,
             "accelerator_type:simgpu": 1.0, "TPU": 8.0}
    cap = node_capacity(total)
    assert cap == Resources(cpus=4.0, memory=8000.0, gpus=2,
                            accelerators={"simgpu": 2, "TPU": 8})
    assert custom_resources(total) == {"TPU"}
    held = reservation(RayMeta.of(spec()), custom_resources(total))
    assert held.gpus == 2 and held.fits_in(Resources(cpus=2, memory=300, gpus=2,
                                                     accelerators={"A100": 2}))


def test_env_and_validation() -> None:
    env = replica_env(spec(envs={"A": "x y"}))
    assert env == {"A": "x y", "SKYSHIFT_JOB": "train", "SKYSHIFT_NAMESPACE": "ml",
                   "SKYSHIFT_RANK": "1", "SKYSHIFT_REPLICA": "train-0123abcd-1"}
    validate_spec(spec())
    for bad in (dict(name="Bad_Name"), dict(run="  "), dict(envs={"1X": "v"}), dict(rank=-1),
                dict(name="train\n"), dict(namespace="ml\n"), dict(job_name="../x")):
        with pytest.raises(Permanent):
            validate_spec(spec(**bad))


def test_user_log_drops_the_supervisors_lines_and_tails() -> None:
    raw = ("2026-11-25 09:36:22,212\tINFO job_manager.py:581 -- Runtime env is setting up.\n"
           "one\nhello\n"
           "Running entrypoint for job train-0123abcd-1: echo one; echo hello; echo three\n"
           "three\n")
    assert user_log(raw, "train-0123abcd-1") == "one\nhello\nthree\n"
    assert user_log(raw, "train-0123abcd-1", tail=2) == "hello\nthree\n"
    assert user_log(raw, "train-0123abcd-1", tail=0) == ""
    assert user_log("Running entrypoint for job other: x\n", "mine") != ""


def test_errors_are_classified_by_http_status() -> None:
    assert isinstance(classify("stop_job", RuntimeError(
        "Request failed with status code 404: Job x does not exist."), "r1"), NotFound)
    assert isinstance(classify("submit_job", RuntimeError(
        "Request failed with status code 400: bad runtime_env"), "r1"), Permanent)
    err = classify("submit_job", RuntimeError(
        "Request failed with status code 500: Traceback ...\nValueError: Job with "
        "submission_id x already exists."), "r1")
    assert isinstance(err, Transient) and "already exists" in str(err)
    assert isinstance(classify("list_jobs", ConnectionError("refused"), "r1"), Transient)


def test_each_attempt_has_its_own_submission_id_and_the_latest_is_current() -> None:
    assert submission_id("train-0123abcd-1", 0) == "train-0123abcd-1"
    assert submission_id("train-0123abcd-1", 3) == "train-0123abcd-1.3"
    old = job("STOPPED", submission_id="train-0123abcd-1",
              metadata=RayMeta.of(spec(attempt=0)).to_metadata())
    new = job("RUNNING", submission_id="train-0123abcd-1.1",
              metadata=RayMeta.of(spec(attempt=1)).to_metadata())
    ghost = {"submission_id": "x-1", "entrypoint": GHOST_ENTRYPOINT, "metadata": None,
             "status": "FAILED"}
    now = current([new, old, ghost])
    assert list(now) == ["train-0123abcd-1"]
    meta, status, sid = now["train-0123abcd-1"]
    assert (meta.attempt, status.state, sid) == (1, RUNNING, "train-0123abcd-1.1")
    assert is_ghost(ghost) and not is_ghost(new)


def test_config_needs_the_dashboard_url_and_sane_numbers() -> None:
    from skyshift.compat.ray.adapter import RayConfig

    cfg = RayConfig.parse("r1", {"address": "http://127.0.0.1:8265/", "labels": {"a": "b"}})
    assert (cfg.address, cfg.request_timeout, cfg.labels) == (
        "http://127.0.0.1:8265", 30.0, {"a": "b"})
    for bad in ({}, {"address": "127.0.0.1:8265"}, {"address": "http://x y"},
                {"address": "http://x:1", "request_timeout": 0},
                {"address": "http://x:1", "delete_wait": True}):
        with pytest.raises(Permanent, match="ray cluster r1"):
            RayConfig.parse("r1", bad)
