"""``skyctl create job --cluster NAME``: a placement filter on the ``skyshift.io/cluster`` label
that the scheduler gives every cluster, so the job lands on the named cluster and nowhere else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skyshift.activities.scheduling import cluster_infos
from skyshift.models import Job
from skyshift.models.quantity import Resources
from skyshift.scheduler import Filter, JobRequest, schedule_batch
from tests.unit.test_cli_commands import FakeClient, last, run


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


def cluster(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    node = {"n1": {"cpus": 8, "memory": 8000, "gpus": 0, "accelerators": {}}}
    return {"kind": "Cluster", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"manager": "local"},
            "status": {"phase": "Ready", "allocatable": node, "capacity": node}}


def test_cluster_flag_writes_one_filter_per_cluster() -> None:
    fake = FakeClient()
    fake.objects["Cluster"] = [cluster("b"), cluster("c")]
    result = run(fake, "create", "job", "j", "--cluster", "b", "--cluster", "c",
                 "--placement", "zone", "eu")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    spec = Job.model_validate(last(fake)[1]).spec
    assert [f.matchLabels for f in spec.placement.filters] == [
        {"zone": "eu", "skyshift.io/cluster": "b"}, {"zone": "eu", "skyshift.io/cluster": "c"}]


def test_cluster_flag_naming_a_missing_cluster_warns_that_the_job_waits() -> None:
    fake = FakeClient()
    result = run(fake, "create", "job", "j", "--cluster", "nosuch")
    assert result.exit_code == 0
    assert result.stdout.strip() == "job/j created"
    assert result.stderr.strip() == ("warning: cluster 'nosuch' does not exist (yet): the job "
                                     "stays Pending until it does (or another --cluster it "
                                     "names is ready)")


def test_the_scheduler_places_a_pinned_job_on_the_named_cluster_only() -> None:
    infos = cluster_infos([cluster("a"), cluster("b")], [])
    pinned = JobRequest("default/j", "u", "default", {}, 0, 0.0, 3, Resources(1, 100),
                        [Filter(match_labels={"skyshift.io/cluster": "b"})])
    [placed] = schedule_batch([pinned], infos, [])
    assert placed.assignments == {"b": 3}


def test_a_hand_set_label_cannot_impersonate_another_cluster() -> None:
    [info] = cluster_infos([cluster("a", {"skyshift.io/cluster": "b"})], [])
    assert info.labels["skyshift.io/cluster"] == "a"
