"""A provisioned Cluster that scales from zero (``provision.nodes.min: 0``): the spec and its
error, the CLI flag, the plan, growth from no nodes, and the ``skypilot`` manager over no
SkyPilot cluster (healthy, no nodes, nothing asked of SkyPilot). The workflow's side is in
tests/workflows/test_cluster_provision_workflow.py; the real launch on demand in
tests/e2e/test_provision_e2e.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from pydantic import ValidationError

from skyshift.activities.scheduling import growables_of
from skyshift.cli.main import cli
from skyshift.compat.errors import Transient
from skyshift.contract.provision import plan_of
from skyshift.models.cluster import ClusterSpec
from skyshift.models.quantity import Resources
from skyshift.scheduler.growth import grow_for
from skyshift.scheduler.types import JobRequest
from tests.fixtures.compat import make_spec
from tests.fixtures.skypilot_driver import fake_manager


def test_min_zero_needs_a_max_and_plans_no_first_launch() -> None:
    s = ClusterSpec.model_validate({"provision": {"infra": "slurm/a", "nodes": {"min": 0,
                                                                                "max": 3}}})
    assert s.provision is not None
    assert (s.provision.nodes.min, s.provision.nodes.max) == (0, 3)
    plan = plan_of(s.model_dump(mode="json"))
    assert plan is not None and (plan.min_nodes, plan.max_nodes) == (0, 3)
    with pytest.raises(ValidationError, match=r"provision.nodes.max: a cluster that scales "
                                              r"from zero \(min 0\) needs max >= 1"):
        ClusterSpec.model_validate({"provision": {"infra": "slurm/a", "nodes": {"min": 0}}})
    # stored without min (an older object): one node first, as before
    old = plan_of({"provision": {"infra": "slurm/a", "nodes": {"max": 2}}})
    assert old is not None and (old.min_nodes, old.max_nodes) == (1, 2)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


def test_cli_min_nodes_zero() -> None:
    result = CliRunner().invoke(cli, ["create", "cluster", "z", "--provision", "--infra",
                                      "slurm/a", "--min-nodes", "0", "--max-nodes", "2",
                                      "--dry-run"])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.stdout)
    assert doc["spec"]["provision"]["nodes"] == {"min": 0, "max": 2}
    for args, needle in ((("--provision", "--infra", "slurm/a", "--min-nodes", "0"),
                          "provision.nodes.max"),
                         (("--min-nodes", "0"), "add --provision and --max-nodes")):
        result = CliRunner().invoke(cli, ["create", "cluster", "z", *args, "--dry-run"])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert needle in result.stderr


def _cluster(phase: str, nodes: int) -> dict[str, Any]:
    return {"metadata": {"name": "z"},
            "spec": {"manager": "skypilot", "provision": {
                "infra": "slurm/a", "cpus": 2, "nodes": {"min": 0, "max": 2}}},
            "status": {"phase": phase, "provision": {"nodes": nodes, "skyClusters": []}}}


def test_a_cluster_at_zero_grows_for_a_waiting_job() -> None:
    [g] = growables_of([_cluster("Ready", 0)], [])
    assert (g.nodes, g.max_nodes, g.busy) == (0, 2, False)
    job = JobRequest("default/j", "u", "default", {}, 0, 0.0, 2, Resources(1, 0), [])
    growth = grow_for(job, [g], [])
    assert growth is not None and (growth.cluster, growth.nodes) == ("z", 1)  # 2 CPUs: both
    big = JobRequest("default/b", "u", "default", {}, 0, 0.0, 5, Resources(1, 0), [])
    assert grow_for(big, [g], []) is None  # 5 replicas need 3 nodes: beyond max 2


@pytest.mark.asyncio
async def test_the_manager_over_no_sky_cluster_is_healthy_and_asks_nothing(
        tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "zero", sky_clusters=[])
    state = await manager.state()
    assert state.healthy and state.nodes == [] and "scaled to zero" in state.message
    assert await manager.replicas() == []
    assert await manager.delete_job("no-such-uid") == []
    with pytest.raises(Transient, match="no SkyPilot cluster of zero is UP"):
        await manager.submit([make_spec("true")])
    assert driver.calls == []
