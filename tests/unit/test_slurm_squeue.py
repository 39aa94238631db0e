"""``squeue --Format`` text -> SkyShift's jobs and the queue's pending requests: the lines in
test_slurm_data/squeue.txt were printed by Slurm 22.05.8 on the simulated cluster (203-206 edited
into SkyShift jobs; 207-213 are foreign jobs submitted with --mem, --gres, --gpus and --hold,
renumbered, and 212's partitions edited)."""

from __future__ import annotations

from pathlib import Path

from skyshift.compat.slurm.parse import job_outcome
from skyshift.compat.slurm.squeue import FORMAT, parse_gpus, parse_squeue, squeue_argv
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED
from skyshift.models.quantity import Resources

TEXT = (Path(__file__).parent / "test_slurm_data" / "squeue.txt").read_text()


def test_only_marked_jobs_and_max_id_of_all() -> None:
    jobs, max_id, _ = parse_squeue(TEXT)
    assert max_id == 213
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
    assert "--states=PENDING" in squeue_argv(states="PENDING")


def test_garbage_lines_are_skipped() -> None:
    assert parse_squeue("\nslurm_load_jobs error\nx|y\n") == ([], 0, [])


def test_pending_jobs_of_anyone_with_their_requests() -> None:
    """Every pending job counts (SkyShift's 204 and the foreign ones), GPUs from --gres
    (tres-per-node) and --gpus (tres-per-job) included; the held one (213) does not."""
    _, _, pending = parse_squeue(TEXT)
    by_id = {p.job_id: p for p in pending}
    assert sorted(by_id) == [202, 204, 207, 208, 209, 210, 211, 212]
    assert by_id[204].request == Resources(2, 200, 1)
    assert by_id[207].request == Resources(2, 1024)
    assert by_id[209].request == Resources(1, 100, 2, {"simgpu": 2})
    assert by_id[211].request == Resources(1, 100, 2)
    assert by_id[212].partitions == ["gpu", "other"]
    assert by_id[212].request == Resources(1, 2048, 1)


def test_gpu_columns() -> None:
    assert parse_gpus("N/A") == (0, {})
    assert parse_gpus("gres:gpu:a100:1,gres:gpu:t4:2,gres:mps:100") == (3, {"a100": 1, "t4": 2})
    assert parse_gpus("gres/gpu:4") == (4, {})
