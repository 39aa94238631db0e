"""Parsing and state mapping of the Slurm adapter, on outputs recorded from Slurm 22.05.8.

The files in test_slurm_data/ were captured from the simulated test bed
(skyshift/devstack/sim/slurm.py) on this kind of machine: squeue/sinfo JSON with jobs in every
state the adapter maps, a drained node, the answers while slurmctld was down, and sbatch's
refusals.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from skyshift.compat.errors import NotFound, Permanent, Transient
from skyshift.compat.slurm.parse import (
    MARKER,
    ReplicaMeta,
    SubmitOptions,
    batch_script,
    classify,
    command_line,
    decode_wait_status,
    job_outcome,
    load_json,
    parse_exports,
    parse_gres,
    parse_job_id,
    parse_jobs,
    parse_nodes,
    parse_partitions,
    parse_records,
    sbatch_args,
    strip_srun_noise,
    validate_spec,
)
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, ReplicaSpec
from skyshift.models.quantity import Resources

DATA = Path(__file__).parent / "test_slurm_data"


def data(name: str) -> str:
    return (DATA / name).read_text()


def doc(name: str) -> dict[str, Any]:
    return load_json(data(name), name)


def spec(run: str = "true", **kw: Any) -> ReplicaSpec:
    base: dict[str, Any] = dict(name="demo-abcdef12-0", job_name="demo", namespace="default",
                                job_uid="abcdef12-0000", rank=0, run=run)
    base.update(kw)
    return ReplicaSpec(**base)


# ---- squeue ---------------------------------------------------------------------------------


def test_only_skyshift_jobs_are_parsed() -> None:
    jobs = parse_jobs(doc("squeue.json"))
    raw = json.loads(data("squeue.json"))["jobs"]
    assert any(j["name"] == "not-skyshift" for j in raw)
    assert [j.meta.name for j in jobs] == [f"rec-abcdef12-{i}" for i in range(7)]
    assert {j.meta.job_uid for j in jobs} == {"abcdef12-0000"}
    assert [j.meta.rank for j in jobs] == list(range(7))


def test_states_map_from_recorded_squeue() -> None:
    by_rank = {j.meta.rank: job_outcome(j) for j in parse_jobs(doc("squeue.json"))}
    assert (by_rank[0].state, by_rank[0].exit_code, by_rank[0].reason) == (SUCCEEDED, 0,
                                                                            "Completed")
    assert (by_rank[1].state, by_rank[1].exit_code, by_rank[1].reason) == (FAILED, 3, "Error")
    # "kill -9 $$" inside the command: the batch script exits 137, squeue says 137 << 8
    assert (by_rank[2].state, by_rank[2].exit_code, by_rank[2].reason) == (FAILED, 137,
                                                                            "Signaled")
    assert by_rank[3].state == RUNNING and by_rank[3].started_at is not None
    assert by_rank[3].finished_at is None
    assert (by_rank[4].state, by_rank[4].reason) == (FAILED, "Cancelled")
    assert (by_rank[5].state, by_rank[5].reason) == (PENDING, "Resources")
    assert by_rank[5].started_at is None
    assert (by_rank[6].state, by_rank[6].reason) == (PENDING, "Priority")
    for rank in (0, 1, 2, 4):
        assert by_rank[rank].finished_at is not None


def test_recorded_exit_code_wins_over_squeue() -> None:
    [job] = [j for j in parse_jobs(doc("squeue.json")) if j.meta.rank == 1]
    assert job_outcome(job, recorded_exit=5).exit_code == 5


def test_completing_and_unknown_states() -> None:
    [job] = [j for j in parse_jobs(doc("squeue.json")) if j.meta.rank == 3]
    job.slurm_state = "COMPLETING"
    assert job_outcome(job).state == RUNNING and job.live
    job.slurm_state = "SOMETHING_NEW"
    assert job_outcome(job).state == "Unknown"
    job.slurm_state = "TIMEOUT"
    assert (job_outcome(job).state, job_outcome(job).reason) == (FAILED, "Timeout")


@pytest.mark.parametrize("status,code", [(0, 0), (768, 3), (35072, 137), (9, 137), (15, 143)])
def test_wait_status(status: int, code: int) -> None:
    assert decode_wait_status(status) == code


@pytest.mark.parametrize("name", ["squeue_ctld_down.json", "sinfo_ctld_down.json"])
def test_answers_with_errors_are_transient_not_empty(name: str) -> None:
    """slurmctld down: exit 0, empty lists and an ``errors`` entry (the original's trap)."""
    assert json.loads(data(name))["errors"]
    with pytest.raises(Transient, match="slurmctld"):
        load_json(data(name), name)


def test_garbage_is_transient() -> None:
    with pytest.raises(Transient):
        load_json("slurm_load_jobs error", "squeue")


# ---- sinfo ----------------------------------------------------------------------------------


def test_nodes_capacity_and_allocatable() -> None:
    nodes = {n.name: n for n in parse_nodes(doc("sinfo.json"))}
    assert set(nodes) == {"slurm1-n1", "slurm1-n2"}
    for node in nodes.values():
        assert node.capacity == Resources(cpus=4, memory=4000, gpus=2,
                                          accelerators={"simgpu": 2})
        assert node.usable and node.partitions == ["debug"]
    # n1 runs the non-SkyShift job (1 CPU, DefMemPerCPU=100); n2 the 2-CPU/1-GPU replica
    assert nodes["slurm1-n1"].allocatable == Resources(cpus=3, memory=3900, gpus=2,
                                                       accelerators={"simgpu": 2})
    assert nodes["slurm1-n2"].allocatable == Resources(cpus=2, memory=3000, gpus=1,
                                                       accelerators={"simgpu": 1})


def test_drained_node_is_unusable() -> None:
    nodes = {n.name: n for n in parse_nodes(doc("sinfo_drained.json"))}
    assert nodes["slurm1-n1"].usable
    drained = nodes["slurm1-n2"]
    assert not drained.usable and "drain" in drained.state
    assert drained.capacity.cpus == 4
    assert drained.allocatable.cpus == 0 and drained.allocatable.gpus == 0


@pytest.mark.parametrize("text,gpus,acc", [
    ("", 0, {}),
    ("(null)", 0, {}),
    ("gpu:2", 2, {}),
    ("gpu:a100:2(S:0-1)", 2, {"a100": 2}),
    ("gpu:a100:2(S:0-1),gpu:t4:1,mps:100", 3, {"a100": 2, "t4": 1}),
    ("gpu:simgpu:1(IDX:0)", 1, {"simgpu": 1}),
    ("gpu:simgpu:0(IDX:N/A)", 0, {"simgpu": 0}),
])
def test_gres(text: str, gpus: int, acc: dict[str, int]) -> None:
    assert parse_gres(text) == (gpus, acc)


def test_partitions() -> None:
    assert parse_partitions(data("sinfo_partitions.txt")) == (["debug"], "debug")
    assert parse_partitions("cpu*\ngpu\n") == (["cpu", "gpu"], "cpu")


# ---- records --------------------------------------------------------------------------------


def test_records_from_recorded_workdir() -> None:
    records = parse_records(data("records.txt"))
    assert len(records) == 7
    ok = records["rec-abcdef12-0"]
    assert ok.meta is not None and ok.meta.job_uid == "abcdef12-0000" and ok.meta.rank == 0
    assert (ok.job_id, ok.exit_job_id, ok.exit_code) == (2, 2, 0)
    assert ok.finished_at is not None
    assert (records["rec-abcdef12-2"].exit_code, records["rec-abcdef12-2"].job_id) == (137, 4)
    running = records["rec-abcdef12-3"]
    assert running.job_id == 5 and running.exit_code is None


def test_records_ignore_foreign_files() -> None:
    assert parse_records("./notes.txt:hello\n./Bad_Name.job:{}\nnonsense\n") == {}


# ---- submission -----------------------------------------------------------------------------


def _opts(**kw: Any) -> SubmitOptions:
    return SubmitOptions(workdir="/w", **kw)


def test_cpu_only_job_has_no_memory_or_gres() -> None:
    args = sbatch_args(spec(resources=Resources(cpus=2)), _opts())
    assert "--cpus-per-task=2" in args
    assert not any(a.startswith(("--mem", "--gres")) for a in args)
    assert "--job-name=demo-abcdef12-0" in args
    assert "--output=/w/demo-abcdef12-0.out" in args and "--chdir=/w" in args
    [comment] = [a for a in args if a.startswith("--comment=")]
    assert comment.removeprefix("--comment=").startswith(MARKER)


def test_empty_request_uses_cluster_defaults() -> None:
    args = sbatch_args(spec(resources=Resources()), _opts())
    assert not any(a.startswith(("--mem", "--gres", "--cpus-per-task", "--partition"))
                   for a in args)


def test_memory_gpus_and_rounding() -> None:
    args = sbatch_args(spec(resources=Resources(cpus=0.5, memory=100.2, gpus=2)),
                       _opts(partition="gpu", account="a", qos="q", time_limit="1:00:00",
                             sbatch_args=["--exclusive"]))
    assert "--cpus-per-task=1" in args and "--mem=101M" in args and "--gres=gpu:2" in args
    assert {"--partition=gpu", "--account=a", "--qos=q", "--time=1:00:00",
            "--exclusive"} <= set(args)


def test_typed_accelerators() -> None:
    res = Resources(gpus=3, accelerators={"a100": 2})
    assert "--gres=gpu:a100:2,gpu:1" in sbatch_args(spec(resources=res), _opts())
    res = Resources(accelerators={"a100": 2})
    assert "--gres=gpu:a100:2" in sbatch_args(spec(resources=res), _opts())


def test_batch_script_quotes_env_and_records_exit(tmp_path: Path) -> None:
    tricky = {"A": "it's \"quoted\" $HOME `x` \\", "B": "a,b c=d\nnext", "EMPTY": ""}
    s = spec('printf "%s|%s|%s|%s" "$A" "$B" "$EMPTY" "$SKYSHIFT_RANK"; exit 4', envs=tricky,
             rank=3)
    script = batch_script(s, SubmitOptions(workdir=str(tmp_path)))
    (tmp_path / "job.sh").write_text(script)
    done = subprocess.run(["sh", str(tmp_path / "job.sh")], capture_output=True, text=True,
                          env={"PATH": os.defpath, "SLURM_JOB_ID": "77"}, cwd=tmp_path)
    assert done.returncode == 4
    assert done.stdout == f"{tricky['A']}|{tricky['B']}||3"
    job_id, code, when = (tmp_path / f"{s.name}.exit").read_text().split()
    assert (job_id, code) == ("77", "4") and when.isdigit()
    assert parse_exports(script) == {**tricky, "SKYSHIFT_JOB": "demo",
                                     "SKYSHIFT_NAMESPACE": "default", "SKYSHIFT_RANK": "3",
                                     "SKYSHIFT_REPLICA": s.name}


def test_never_wraps_in_docker_without_a_declared_runtime() -> None:
    s = spec("echo hi", image="ubuntu:22.04")
    assert command_line(s, "") == "/bin/sh -c 'echo hi'"
    assert "docker" not in batch_script(s, _opts())
    wrapped = command_line(s, "apptainer")
    assert wrapped == "apptainer exec docker://ubuntu:22.04 /bin/sh -c 'echo hi'"
    gpu = spec("nvidia-smi", image="/images/cuda.sif", resources=Resources(gpus=1))
    assert command_line(gpu, "singularity") == (
        "singularity exec --nv /images/cuda.sif /bin/sh -c nvidia-smi"
    )


@pytest.mark.parametrize("bad", [
    dict(name="Bad_Name"), dict(envs={"1X": "v"}), dict(envs={"A-B": "v"}), dict(rank=-1),
    dict(job_uid="a;b"), dict(namespace=""),
])
def test_invalid_specs_are_permanent(bad: dict[str, Any]) -> None:
    with pytest.raises(Permanent):
        validate_spec(spec(**bad))


def test_comment_round_trip() -> None:
    meta = ReplicaMeta.of(spec(rank=2, attempt=3))
    assert ReplicaMeta.from_comment(meta.name, meta.comment()) == meta
    assert ReplicaMeta.from_json(meta.to_json()) == meta
    assert ReplicaMeta.from_comment("x", "") is None
    assert ReplicaMeta.from_comment("x", "some user comment") is None
    assert ReplicaMeta.from_comment("x", f"{MARKER};uid=u") is None


def test_job_id_parsing() -> None:
    assert parse_job_id("42\n") == 42
    assert parse_job_id("42;cluster2\n") == 42
    with pytest.raises(Transient):
        parse_job_id("")


def test_srun_noise_is_dropped() -> None:
    err = "real error\nsrun: error: slurm1-n1: task 0: Exited with exit code 4\n"
    assert strip_srun_noise(err) == "real error\n"


# ---- errors ---------------------------------------------------------------------------------


def test_recorded_sbatch_refusals_are_permanent() -> None:
    for args, (rc, stderr) in json.loads(data("sbatch_errors.json")).items():
        assert isinstance(classify("sbatch", rc, stderr, "c"), Permanent), args


def test_recorded_controller_down_errors_are_transient() -> None:
    recorded = json.loads(data("ctld_down_errors.json"))
    for command in ("sbatch", "scancel"):
        rc, stderr = recorded[command]
        assert type(classify(command, rc, stderr, "c")) is Transient, command


def test_other_errors() -> None:
    assert isinstance(classify("squeue", 127, "sh: 1: squeue: not found", "c"), Permanent)
    assert isinstance(classify("squeue", 1, "squeue: command not found", "c"), Permanent)
    assert isinstance(classify("scancel", 1, "Invalid job id specified", "c"), NotFound)
    assert isinstance(classify(
        "sinfo", 1, "sinfo: error: Could not establish a configuration source", "c"), Permanent)
    assert isinstance(classify("squeue", 1, "Socket timed out on send/recv operation", "c"),
                      Transient)
    assert isinstance(classify("sbatch", 1, "Batch job submission failed: Job violates "
                               "accounting/QOS policy (job submit limit, user's size and/or "
                               "time limits)", "c"), Transient)
    assert isinstance(classify("sbatch", 1, "Batch job submission failed: weird", "c"),
                      Permanent)
    assert isinstance(classify("squeue", 1, "weird", "c"), Transient)
