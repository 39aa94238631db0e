"""SlurmManager logic over a scripted runner: merging squeue with the workdir records,
adoption on retries, restarts, tombstones after delete, error mapping, SSH failures, and what a
submit costs (only its own names looked up, concurrent submits side by side).

The squeue entries are the recorded ones from test_slurm_data/squeue.json, edited per test, and
served the way ``squeue --Format`` prints them (slurm_squeue).
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from skyshift.compat.errors import Permanent, Transient
from skyshift.compat.slurm import runner as slurm_runner
from skyshift.compat.slurm.adapter import SlurmManager
from skyshift.compat.slurm.parse import ReplicaMeta
from skyshift.compat.slurm.runner import Result, SshRunner
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, ReplicaSpec
from skyshift.models.quantity import Resources

DATA = Path(__file__).parent / "test_slurm_data"
SQUEUE = json.loads((DATA / "squeue.json").read_text())
SINFO = (DATA / "sinfo.json").read_text()
UID = "abcdef12-0000"


def template(rank: int) -> dict[str, Any]:
    return copy.deepcopy(next(j for j in SQUEUE["jobs"] if j["name"] == f"rec-abcdef12-{rank}"))


def job(name: str, job_id: int, state: str, attempt: int = 0, uid: str = UID,
        wait_status: int = 0) -> dict[str, Any]:
    raw = template({"RUNNING": 3, "PENDING": 5, "COMPLETED": 0, "FAILED": 1,
                    "CANCELLED": 4}.get(state, 3))
    meta = ReplicaMeta(name, uid, "default", "rec", int(name.rsplit("-", 1)[1]), attempt)
    raw.update(job_id=job_id, name=name, job_state=state, comment=meta.comment(),
               exit_code=wait_status)
    return raw


def record(name: str, job_id: int, attempt: int = 0, exit_code: int | None = None,
           exit_job: int | None = None) -> str:
    meta = ReplicaMeta(name, UID, "default", "rec", int(name.rsplit("-", 1)[1]), attempt)
    out = f"./{name}.job:{meta.to_json()}\n./{name}.job:{job_id}\n"
    if exit_code is not None:
        out += f"./{name}.exit:{exit_job or job_id} {exit_code} 1795305661\n"
    return out


def squeue_text(jobs: list[dict[str, Any]]) -> str:
    """What ``squeue --noheader --Format=<slurm_squeue.FORMAT>`` prints for these jobs."""
    def t(v: Any) -> str:
        return str(v) if v else "0"

    return "".join(
        f"{j['job_id']}|{j.get('exit_code', 0)}|{j['job_state']}|{j.get('state_reason') or 'None'}"
        f"|{t(j.get('submit_time'))}|{t(j.get('start_time'))}|{t(j.get('end_time'))}"
        f"|{j.get('nodes') or ''}|{j.get('partition') or ''}"
        f"|{j.get('tres_alloc_str') or j.get('tres_req_str') or ''}|N/A|N/A"
        f"|{j['name']}|{j.get('comment') or '(null)'}\n"
        for j in jobs
    )


def flag(argv: list[str], name: str) -> list[str] | None:
    value = next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")), None)
    return value.split(",") if value is not None else None


class FakeRunner:
    """Answers the adapter's commands from in-memory state and records every call."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.records = ""
        self.calls: list[list[str]] = []
        self.next_id = 100
        self.squeue_errors: list[dict[str, Any]] = []
        self.sbatch_result: Result | None = None
        self.sbatch_delay = 0.0
        self.scancel_delay = 0.0
        self.sbatch_running = 0
        self.sbatch_peak = 0

    async def run(self, argv: list[str], stdin: bytes | None = None,
                  timeout: float = 60.0) -> Result:
        self.calls.append(argv)
        if argv[:2] == ["sinfo", "-h"]:
            return Result(0, "debug*\n", "")
        if argv[:2] == ["sinfo", "--json"]:
            return Result(0, SINFO, "")
        if argv[:3] == ["env", "SLURM_TIME_FORMAT=%s", "squeue"]:
            if self.squeue_errors:
                return Result(1, "", "slurm_load_jobs error: Unable to contact slurm controller "
                                     "(connect failure)\n")
            names, ids = flag(argv, "name"), flag(argv, "jobs")
            wanted = flag(argv, "states")
            shown = [j for j in self.jobs if (names is None or j["name"] in names)
                     and (ids is None or str(j["job_id"]) in ids)
                     and (wanted in (None, ["all"]) or j["job_state"] in (wanted or []))]
            if ids is not None and not shown:
                return Result(1, "", "slurm_load_jobs error: Invalid job id specified\n")
            return Result(0, squeue_text(shown), "")
        if argv[0] == "scancel":
            await asyncio.sleep(self.scancel_delay)
            ids = {int(a) for a in argv[1:]}
            for j in self.jobs:
                if j["job_id"] in ids:
                    j["job_state"] = "CANCELLED"
            return Result(0, "", "")
        if argv[:2] == ["sh", "-c"]:
            script, args = argv[2], argv[4:]
            if "pwd -P" in script:
                return Result(0, "/work/dir\n", "")
            if "find . -maxdepth 1" in script:
                return Result(0, self.records, "")
            if "grep -lF" in script:  # one job's records, by the uid in their metadata
                names = {line[2:].split(".", 1)[0] for line in self.records.splitlines()
                         if args[1] in line}
                return Result(0, "".join(
                    line for line in self.records.splitlines(keepends=True)
                    if line[2:].split(".", 1)[0] in names), "")
            if "grep -sH" in script:  # the named replicas' records
                wanted = set(args[1:])
                return Result(0, "".join(
                    line for line in self.records.splitlines(keepends=True)
                    if line[2:].split(".", 1)[0] in wanted), "")
            if "sbatch" in script:
                self.sbatch_running += 1
                self.sbatch_peak = max(self.sbatch_peak, self.sbatch_running)
                try:
                    await asyncio.sleep(self.sbatch_delay)
                finally:
                    self.sbatch_running -= 1
                if self.sbatch_result is not None:
                    return self.sbatch_result
                name, meta = args[1], ReplicaMeta.from_json(args[3])
                assert meta is not None and stdin is not None
                self.next_id += 1
                self.jobs.append(job(name, self.next_id, "PENDING", meta.attempt))
                return Result(0, f"{self.next_id}\n", "")
            if "rm -f" in script:
                gone = set(args[1:])
                self.records = "".join(
                    line for line in self.records.splitlines(keepends=True)
                    if line[2:].split(".", 1)[0] not in gone
                )
            return Result(0, "", "")  # record writes
        raise AssertionError(f"unexpected command {argv}")

    async def close(self) -> None:
        return None

    def count(self, *prefix: str) -> int:
        return sum(1 for c in self.calls if c[: len(prefix)] == list(prefix))

    def squeue_calls(self) -> list[list[str]]:
        return [c for c in self.calls if "squeue" in c[:3]]

    def sbatch_calls(self) -> list[list[str]]:
        return [c for c in self.calls if c[:2] == ["sh", "-c"] and "sbatch" in c[2]]


@pytest.fixture
def runner() -> FakeRunner:
    return FakeRunner()


@pytest.fixture
def manager(runner: FakeRunner) -> SlurmManager:
    m = SlurmManager("c1", {"workdir": "w"})
    m.runner = runner  # type: ignore[assignment]
    return m


def spec(rank: int = 0, attempt: int = 0, uid: str = UID, run: str = "true") -> ReplicaSpec:
    return ReplicaSpec(name=f"rec-abcdef12-{rank}", job_name="rec", namespace="default",
                       job_uid=uid, rank=rank, run=run, attempt=attempt)


async def states(manager: SlurmManager) -> dict[str, tuple[str, int | None, str]]:
    return {s.name: (s.state, s.exit_code, s.reason) for s in await manager.replicas()}


async def test_connect_resolves_workdir_and_default_partition(manager: SlurmManager) -> None:
    await manager.connect()
    assert manager.workdir == "/work/dir" and manager.partition == "debug"


async def test_replicas_is_one_squeue_call(manager: SlurmManager, runner: FakeRunner) -> None:
    runner.jobs = [job(f"rec-abcdef12-{i}", 10 + i, "RUNNING") for i in range(5)]
    await manager.connect()
    assert len(await manager.replicas()) == 5
    assert len(runner.squeue_calls()) == 1


async def test_finished_replicas_outlive_squeue(manager: SlurmManager, runner: FakeRunner) -> None:
    """MinJobAge passed: squeue forgot the jobs, the records did not."""
    runner.jobs = [job("rec-abcdef12-9", 50, "RUNNING")]  # max job id seen: 50
    runner.records = (record("rec-abcdef12-0", 10, exit_code=0)
                      + record("rec-abcdef12-1", 11, exit_code=3)
                      + record("rec-abcdef12-2", 12)            # no exit: cancelled or lost
                      + record("rec-abcdef12-3", 13, exit_code=0, exit_job=9)  # stale exit
                      + record("rec-abcdef12-4", 51))           # newer than the snapshot
    got = await states(manager)
    assert got["rec-abcdef12-0"] == (SUCCEEDED, 0, "Completed")
    assert got["rec-abcdef12-1"] == (FAILED, 3, "Error")
    assert got["rec-abcdef12-2"][0] == FAILED and got["rec-abcdef12-2"][2] == "Lost"
    assert got["rec-abcdef12-3"][2] == "Lost"
    assert got["rec-abcdef12-4"][0] == PENDING
    assert got["rec-abcdef12-9"][0] == RUNNING  # live job without a record: still listed


async def test_finished_job_without_record_is_not_listed(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.jobs = [job("rec-abcdef12-0", 10, "COMPLETED")]
    assert await manager.replicas() == []


async def test_exit_record_refines_squeue_exit(manager: SlurmManager, runner: FakeRunner) -> None:
    runner.jobs = [job("rec-abcdef12-1", 10, "FAILED", wait_status=256)]
    runner.records = record("rec-abcdef12-1", 10, exit_code=1)
    assert (await states(manager))["rec-abcdef12-1"] == (FAILED, 1, "Error")


async def test_retry_adopts_live_job(manager: SlurmManager, runner: FakeRunner) -> None:
    runner.jobs = [job("rec-abcdef12-0", 10, "RUNNING")]  # submitted, record never written
    [status] = await manager.submit([spec()])
    assert status.state == RUNNING
    assert runner.sbatch_calls() == []
    writes = [c for c in runner.calls if c[:2] == ["sh", "-c"] and "job.tmp" in c[2]
              and "sbatch" not in c[2]]
    assert len(writes) == 1 and writes[0][-1] == "10"


async def test_retry_of_finished_attempt_does_not_rerun(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.records = record("rec-abcdef12-0", 10, exit_code=2)
    [status] = await manager.submit([spec()])
    assert (status.state, status.exit_code) == (FAILED, 2)
    assert runner.sbatch_calls() == []


async def test_same_name_twice_in_a_batch_submits_once(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    out = await manager.submit([spec(), spec()])
    assert [s.name for s in out] == ["rec-abcdef12-0"] * 2
    assert len(runner.sbatch_calls()) == 1


async def test_new_attempt_cancels_old_and_resubmits(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.jobs = [job("rec-abcdef12-0", 10, "RUNNING")]
    runner.records = record("rec-abcdef12-0", 10)
    [status] = await manager.submit([spec(attempt=1)])
    assert status.state == PENDING and status.attempt == 1
    assert ["scancel", "10"] in runner.calls
    [call] = runner.sbatch_calls()
    assert call[4:7] == ["/work/dir", "rec-abcdef12-0", "0"]  # previous attempt's log kept
    # the cancelled old attempt never shows again; the new one does
    runner.records = record("rec-abcdef12-0", 101, attempt=1)
    [now] = await manager.replicas()
    assert (now.state, now.attempt) == (PENDING, 1)


async def test_name_taken_by_other_job_is_permanent(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.jobs = [job("rec-abcdef12-0", 10, "RUNNING", uid="someone-else")]
    with pytest.raises(Permanent, match="taken"):
        await manager.submit([spec()])


async def test_deleted_jobs_are_not_listed_while_completing(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.jobs = [job("rec-abcdef12-0", 10, "RUNNING"), job("rec-abcdef12-1", 11, "RUNNING")]
    runner.records = record("rec-abcdef12-0", 10) + record("rec-abcdef12-1", 11)
    manager.config.delete_wait = 0
    await manager.delete(["rec-abcdef12-0"])
    runner.jobs[0]["job_state"] = "COMPLETING"  # what squeue shows right after scancel
    runner.records = record("rec-abcdef12-1", 11)
    assert list(await states(manager)) == ["rec-abcdef12-1"]
    assert await manager.delete_job(UID) == ["rec-abcdef12-1"]
    assert await manager.delete_job(UID) == []


async def test_submit_maps_sbatch_failures(manager: SlurmManager, runner: FakeRunner) -> None:
    runner.sbatch_result = Result(1, "", "sbatch: error: Batch job submission failed: "
                                         "Invalid partition name specified\n")
    with pytest.raises(Permanent, match="Invalid partition"):
        await manager.submit([spec()])
    runner.sbatch_result = Result(1, "", "sbatch: error: Batch job submission failed: "
                                         "Unable to contact slurm controller (connect failure)\n")
    with pytest.raises(Transient):
        await manager.submit([spec()])


async def test_squeue_errors_are_transient(manager: SlurmManager, runner: FakeRunner) -> None:
    runner.squeue_errors = [{"error": "Unspecified error", "error_number": -1}]
    with pytest.raises(Transient):
        await manager.replicas()


async def test_state_from_recorded_sinfo(manager: SlurmManager) -> None:
    state = await manager.state()
    assert state.healthy and state.labels == {"slurm/partition": "debug"}
    assert state.capacity().cpus == 8 and state.capacity().gpus == 4
    assert state.allocatable().cpus == 5 and state.allocatable().gpus == 3


async def test_never_fitting_request_is_permanent(manager: SlurmManager) -> None:
    big = spec()
    big.resources = type(big.resources)(cpus=64)
    with pytest.raises(Permanent, match="never fit"):
        await manager.submit([big])


@pytest.mark.parametrize("config,match", [
    ({"port": "22"}, "port"),
    ({"poll_interval": 0}, "poll_interval"),
    ({"poll_interval": 3600}, "poll_interval"),
    ({"sbatch_args": "--exclusive"}, "sbatch_args"),
    ({"container_runtime": "docker"}, "container_runtime"),
    ({"slurm_conf": 3}, "slurm_conf"),
    ({"sbatch_concurrency": 0}, "sbatch_concurrency"),
    ({"queue_depth": -1}, "queue_depth"),
    ({"queue_depth": 1e9}, "queue_depth"),
    ({"queue_depth": "2"}, "queue_depth"),
])
def test_bad_config_is_permanent(config: dict[str, Any], match: str) -> None:
    with pytest.raises(Permanent, match=match):
        SlurmManager("c1", config)


def test_ssh_config_selects_ssh_runner() -> None:
    m = SlurmManager("c1", {"host": "login", "username": "u", "ssh_key_path": "/k", "port": 2222})
    assert isinstance(m.runner, SshRunner)
    assert m.runner.where == "u@login:2222"


@pytest.mark.parametrize("stderr,error", [
    ("u@login: Permission denied (publickey).", Permanent),
    ("Host key verification failed.", Permanent),
    ("ssh: Could not resolve hostname nowhere: Name or service not known", Permanent),
    ("ssh: connect to host login port 22: Connection refused", Transient),
    ("ssh: connect to host login port 22: Connection timed out", Transient),
    ("", Transient),
])
async def test_ssh_failures(monkeypatch: pytest.MonkeyPatch, stderr: str,
                            error: type[Exception]) -> None:
    async def fake_run(argv: list[str], stdin: bytes | None, timeout: float,
                       env: dict[str, str] | None) -> Result:
        assert "BatchMode=yes" in argv
        return Result(255, "", stderr)

    monkeypatch.setattr(slurm_runner, "_run", fake_run)
    runner = SshRunner("c1", "/etc/slurm/slurm.conf", "login", "u", None)
    with pytest.raises(error) as info:
        await runner.run(["squeue", "--json"])
    assert type(info.value) is error


async def test_ssh_remote_command_sets_slurm_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    async def fake_run(argv: list[str], stdin: bytes | None, timeout: float,
                       env: dict[str, str] | None) -> Result:
        seen.append(argv)
        return Result(0, "ok", "")

    monkeypatch.setattr(slurm_runner, "_run", fake_run)
    runner = SshRunner("c1", "/my conf/slurm.conf", "login", "u", None)
    await runner.run(["sh", "-c", "echo \"$1\"", "sh", "a b"])
    assert seen[0][-1] == "env SLURM_CONF='/my conf/slurm.conf' sh -c 'echo \"$1\"' sh 'a b'"
    await runner.close()


async def test_local_runner_missing_binary_is_permanent() -> None:
    runner = slurm_runner.LocalRunner("c1", None)
    with pytest.raises(Permanent, match="not found"):
        await runner.run(["definitely-not-a-slurm-binary"])


async def test_local_runner_timeout_is_transient() -> None:
    runner = slurm_runner.LocalRunner("c1", None)
    with pytest.raises(Transient, match="timed out"):
        await runner.run(["sleep", "5"], timeout=0.2)


async def test_local_runner_does_not_leak_worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_SECRET_TOKEN", "hush")
    runner = slurm_runner.LocalRunner("c1", "/x/slurm.conf")
    out = await runner.run(["env"])
    assert "hush" not in out.stdout and "SLURM_CONF=/x/slurm.conf" in out.stdout


async def test_submit_looks_up_only_its_names(manager: SlurmManager, runner: FakeRunner) -> None:
    """No full squeue or records read per submit (4 MB at 1,100 jobs made bursts crawl)."""
    runner.jobs = [job(f"rec-abcdef12-{r}", 10 + r, "RUNNING") for r in range(1, 4)]
    await manager.state()
    runner.calls.clear()
    await manager.submit([spec(0)])
    assert [c[-1] for c in runner.squeue_calls()] == ["--name=rec-abcdef12-0"]
    assert not any("find . -maxdepth 1" in " ".join(c) for c in runner.calls)
    assert runner.count("sinfo") == 0  # node sizes come from the last state()


async def test_concurrent_submits_overlap_and_share_lookups(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.sbatch_delay = 0.02
    await asyncio.gather(*(manager.submit([spec(r)]) for r in range(12)))
    assert len(runner.sbatch_calls()) == 12
    assert 1 < runner.sbatch_peak <= manager.config.sbatch_concurrency
    assert len(runner.squeue_calls()) < 12  # lookups of waiting submits were shared
    assert {s.name for s in await manager.replicas()} == {spec(r).name for r in range(12)}


async def test_concurrent_retries_of_one_name_submit_once(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.sbatch_delay = 0.02
    out = await asyncio.gather(*(manager.submit([spec(0)]) for _ in range(4)))
    assert len(runner.sbatch_calls()) == 1
    assert {(s.name, s.state) for [s] in out} == {(spec(0).name, PENDING)}


async def test_delete_waits_for_submits_in_flight(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.sbatch_delay = 0.05
    manager.config.delete_wait = 0
    submit = asyncio.create_task(manager.submit([spec(0)]))
    await asyncio.sleep(0.01)
    assert await manager.delete_job(UID) == ["rec-abcdef12-0"]  # saw the submitted job
    await submit
    assert await manager.replicas() == []


async def test_listing_does_not_wait_for_a_delete_and_hides_its_names(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    """A burst of deletes held up the sync's poll until it timed out (cluster Error)."""
    runner.jobs = [job("rec-abcdef12-0", 10, "RUNNING"), job("rec-abcdef12-1", 11, "RUNNING")]
    runner.records = record("rec-abcdef12-0", 10) + record("rec-abcdef12-1", 11)
    runner.scancel_delay = 0.2
    manager.config.delete_wait = 0
    deleting = asyncio.create_task(manager.delete(["rec-abcdef12-0"]))
    await asyncio.sleep(0.05)  # the delete is in scancel
    listed = await asyncio.wait_for(states(manager), 0.1)
    assert list(listed) == ["rec-abcdef12-1"]
    assert not deleting.done()
    await deleting
    assert list(await states(manager)) == ["rec-abcdef12-1"]
    assert not manager._hidden and not manager._listings


async def test_delete_job_reads_only_that_jobs_records(
    manager: SlurmManager, runner: FakeRunner,
) -> None:
    runner.records = record("rec-abcdef12-0", 10, exit_code=0)
    assert await manager.delete_job(UID) == ["rec-abcdef12-0"]
    assert not any("find . -maxdepth 1" in " ".join(c) for c in runner.calls)
    assert runner.records == ""


# ---- the queue (issue #16) ------------------------------------------------------------------


async def test_state_reports_every_pending_request_read_before_the_nodes(
    manager: SlurmManager, runner: FakeRunner
) -> None:
    """The queue counts every pending job's request, SkyShift's or not, from a squeue of its
    own that runs before sinfo (so a job starting in between is counted twice, never not at
    all), also right after a listing (a replica submitted after the listing's squeue is listed
    Pending from its record and must be in the queue)."""
    foreign = job("rec-abcdef12-8", 60, "PENDING", uid="other-uid")
    foreign.update(comment="", name="theirs", tres_req_str="cpu=3,mem=1G,node=1")
    runner.jobs = [job("rec-abcdef12-1", 50, "RUNNING"), job("rec-abcdef12-2", 51, "PENDING"),
                   foreign]
    await manager.connect()
    await manager.replicas()
    runner.calls.clear()
    state = await manager.state()
    order = [c for c in runner.calls if "squeue" in c[:3] or c[:2] == ["sinfo", "--json"]]
    assert "--states=PENDING" in order[0] and order[1][:2] == ["sinfo", "--json"]
    assert state.queue is not None
    assert state.queue.jobs == 2
    assert state.queue.queued == Resources(4 + 3, 400 + 1024)  # template 5 asks 4 cpus, 400M
    assert state.queue.limit == Resources(8, 8000, 4, {"simgpu": 4})  # depth 1 x two nodes


async def test_queue_depth_zero_reports_no_queue(runner: FakeRunner) -> None:
    m = SlurmManager("c1", {"workdir": "w", "queue_depth": 0})
    m.runner = runner  # type: ignore[assignment]
    state = await m.state()
    assert state.queue is None and not runner.squeue_calls()
