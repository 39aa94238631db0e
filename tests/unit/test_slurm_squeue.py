"""``squeue --Format`` text -> SkyShift's jobs: the lines in test_slurm_data/squeue.txt were
printed by Slurm 22.05.8 on the simulated cluster (the last four edited into SkyShift jobs)."""

from __future__ import annotations

from pathlib import Path

from skyshift.compat.slurm_parse import job_outcome
from skyshift.compat.slurm_squeue import FORMAT, parse_squeue, squeue_argv
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED

TEXT = (Path(__file__).parent / "test_slurm_data" / "squeue.txt").read_text()


def test_only_marked_jobs_and_max_id_of_all() -> None:
    jobs, max_id = parse_squeue(TEXT)
    assert max_id == 206
    assert [j.job_id for j in jobs] == [1, 203, 204, 205]  # 206: name with '|', bad comment


def test_fields_map_like_squeue_json() -> None:
    by_id = {j.job_id: j for j in parse_squeue(TEXT)[0]}
    done, failed, pending, running = by_id[1], by_id[203], by_id[204], by_id[205]
    assert done.meta.name == "lat-7053e9-0-fa7060a2-0" and done.meta.job_name == "lat-7053e9-0"
    assert (done.start_time, done.end_time, done.nodes) == (1795315959.0, 1795315962.0, "bs1-n1")
    assert job_outcome(done).state == SUCCEEDED
    assert failed.meta.attempt == 2 and failed.wait_status == 768
    assert (job_outcome(failed).state, job_outcome(failed).exit_code) == (FAILED, 3)
    assert pending.start_time is None and pending.nodes == ""
    assert (job_outcome(pending).state, job_outcome(pending).reason) == (PENDING, "Resources")
    assert job_outcome(running).state == RUNNING and running.state_reason == ""


def test_argv_filters_names_and_ids() -> None:
    assert squeue_argv()[:3] == ["env", "SLURM_TIME_FORMAT=%s", "squeue"]
    assert f"--Format={FORMAT}" in squeue_argv()
    assert squeue_argv(names=["b", "a", "b"])[-1] == "--name=a,b"
    assert squeue_argv(ids=[3, 1])[-1] == "--jobs=1,3"


def test_garbage_lines_are_skipped() -> None:
    assert parse_squeue("\nslurm_load_jobs error\nx|y\n") == ([], 0)
