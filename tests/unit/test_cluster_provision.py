"""A Cluster's ``provision``: the structured spec, the original's flat flags mapped onto it, the
bounds and their errors (naming the field), ``skyctl create cluster --provision`` flags, the
plan the workflow gets, deterministic SkyPilot names, and which cluster grows for a job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from pydantic import ValidationError

from skyshift.cli.main import cli
from skyshift.contract.provision import plan_of, sky_name
from skyshift.lifecycle.convert import cluster_input, manager_config
from skyshift.models.cluster import Cluster, ClusterSpec
from skyshift.models.quantity import Resources, parse_memory
from skyshift.scheduler.growth import Growable, grow_for, per_node
from skyshift.scheduler.types import Filter, FilterPolicyInfo, JobRequest


def spec(**fields: Any) -> ClusterSpec:
    return ClusterSpec.model_validate(fields)


def error_of(**fields: Any) -> str:
    with pytest.raises(ValidationError) as info:
        ClusterSpec.model_validate(fields)
    return str(info.value)


def test_structured_provision_defaults_and_manager() -> None:
    s = spec(provision={"infra": "slurm/sim-1", "cpus": 2, "memory": "4Gi",
                        "nodes": {"min": 2}, "candidates": ["kubernetes/kind-a", "slurm/sim-1"]})
    assert s.manager == "skypilot"
    assert s.provision is not None
    assert (s.provision.cpus, s.provision.memory) == (2.0, parse_memory("4Gi"))
    assert (s.provision.nodes.min, s.provision.nodes.max) == (2, 2)  # max defaults to min
    assert s.provision.idleMinutes == 0
    assert s.provision.infras() == ["slurm/sim-1", "kubernetes/kind-a"]


def test_the_originals_flat_flags_map_onto_it() -> None:
    s = spec(provision=True, cloud="AWS", region="us-east-1", cpus="4", memory="8Gi",
             accelerators="V100:2", num_nodes=3)
    assert s.provision is not None and s.manager == "skypilot"
    assert s.provision.infra == "aws/us-east-1"
    assert (s.provision.cpus, s.provision.memory, s.provision.accelerators) == (
        4.0, parse_memory("8Gi"), {"V100": 2})
    assert s.provision.nodes.min == 3
    assert spec(provision=True, cloud="gcp").provision.infra == "gcp"  # type: ignore[union-attr]
    assert spec(provision=False).provision is None


@pytest.mark.parametrize(("fields", "needle"), [
    ({"provision": {"infra": "not an infra"}}, "provision.infra"),
    ({"provision": {"infra": "a/" + "x" * 200}}, "provision.infra"),
    ({"provision": {"infra": "slurm/a", "candidates": ["ok/x", "BAD INFRA"]}},
     "provision.candidates[1]"),
    ({"provision": {"infra": "slurm/a", "candidates": ["slurm/b"] * 9}}, "at most 8"),
    ({"provision": {"infra": "slurm/a", "nodes": {"min": 3, "max": 2}}}, "provision.nodes.max"),
    ({"provision": {"infra": "slurm/a", "nodes": {"min": 65}}}, "nodes.min"),
    ({"provision": {"infra": "slurm/a", "idleMinutes": -1}}, "idleMinutes"),
    ({"provision": {"infra": "slurm/a", "cpus": 5000}}, "provision.cpus"),
    ({"provision": {"infra": "slurm/a", "surprise": 1}}, "surprise"),
    ({"provision": True}, "provision.infra"),
    ({"provision": "yes"}, "provision"),
    ({"cloud": "aws"}, "cloud: only for a provisioned cluster"),
    ({"region": "us-east-1"}, "region: only for a provisioned cluster"),
    ({"manager": "slurm", "provision": {"infra": "slurm/a"}}, "manager: a provisioned"),
])
def test_bad_provision_specs_name_the_field(fields: dict[str, Any], needle: str) -> None:
    assert needle in error_of(**fields)


def test_attached_clusters_are_unchanged() -> None:
    s = spec(manager="slurm", cpus=4, num_nodes=2)
    assert s.provision is None and s.manager == "slurm"
    assert spec(manager="sky").manager == "skypilot"


def test_status_phases_and_provision_block() -> None:
    c = Cluster.model_validate({
        "metadata": {"name": "c1"}, "spec": {"provision": {"infra": "slurm/sim-1"}},
        "status": {"phase": "Scaling", "provision": {
            "skyClusters": ["c1-abc-0"], "infra": "slurm/sim-1", "nodes": 2, "attempts": 3,
            "lastError": "no nodes", "eta": "2026-01-01T00:00:00Z"}},
    })
    assert c.status.provision is not None and c.status.provision.nodes == 2
    for phase in ("Init", "Provisioning", "Ready", "Scaling", "Error", "Failed", "Terminating",
                  "Deleting"):
        Cluster.model_validate({"metadata": {"name": "c"}, "status": {"phase": phase}})


def test_plan_input_and_manager_config_of_a_stored_cluster() -> None:
    obj = Cluster.model_validate({
        "metadata": {"name": "c1", "uid": "0f1e2d3c-aaaa"},
        "spec": {"provision": {"infra": "slurm/sim-1", "cpus": 2, "memory": 2048,
                               "nodes": {"min": 1, "max": 4}, "idleMinutes": 10,
                               "candidates": ["kubernetes/k"]}},
    }).model_dump(mode="json", exclude_none=True)
    plan = plan_of(obj["spec"])
    assert plan is not None
    assert (plan.infras, plan.cpus, plan.memory_mb, plan.min_nodes, plan.max_nodes,
            plan.idle_minutes) == (["slurm/sim-1", "kubernetes/k"], 2.0, 2048.0, 1, 4, 10)
    inp = cluster_input(obj)
    assert inp.provision is not None and inp.provision.plan == plan
    assert plan_of({"manager": "slurm"}) is None and cluster_input(
        {"metadata": {"name": "x"}, "spec": {}}).provision is None
    obj["status"] = {"provision": {"skyClusters": ["c1-0f1e2d-0", "c1-0f1e2d-1"]}}
    assert manager_config(obj) == ("skypilot", {"sky_clusters": ["c1-0f1e2d-0",
                                                                 "c1-0f1e2d-1"],
                                                "provisioned": True})


def test_sky_names_are_deterministic_and_valid() -> None:
    a = sky_name("c1", "0F1E2D3C-aaaa", 0)
    assert a == sky_name("c1", "0F1E2D3C-aaaa", 0) == "c1-0f1e2d-0"
    assert sky_name("c1", "other-uid", 0) != a and sky_name("c1", "0F1E2D3C-aaaa", 1) != a
    long = sky_name("9" + "x" * 62, "u" * 36, 12)
    assert long[0].isalpha() and len(long) <= 56


def job(replicas: int, cpus: float, filters: list[Filter] | None = None) -> JobRequest:
    return JobRequest("default/j", "u", "default", {}, 0, 0.0, replicas, Resources(cpus, 0),
                      filters or [])


def test_growth_picks_a_cluster_that_would_hold_the_job_within_max() -> None:
    small = Growable("a-small", {}, Resources(1, 0), 1, 2)
    big = Growable("b-big", {"site": "lab"}, Resources(4, 0), 1, 3, free=[Resources(1, 0)])
    # 6 x 1 cpu: a-small could only reach 2 nodes (2 replicas); b-big holds 1 free + 4 per node
    g = grow_for(job(6, 1), [small, big], [])
    assert g is not None and (g.cluster, g.nodes, g.busy) == ("b-big", 3, False)
    assert grow_for(job(20, 1), [small, big], []) is None  # beyond every max
    assert grow_for(job(1, 8), [small, big], []) is None  # no node shape holds one replica
    # placement filters and FilterPolicies still apply
    only_lab = [Filter(match_labels={"site": "other"})]
    assert grow_for(job(2, 1, only_lab), [small, big], []) is None
    policy = FilterPolicyInfo("p", "default", exclude=["a-small"])
    g = grow_for(job(1, 1), [small], [policy])
    assert g is None
    busy = Growable("c", {}, Resources(1, 0), 1, 4, busy=True)
    g = grow_for(job(2, 1), [busy], [])
    assert g is not None and g.busy and g.nodes == 3
    assert per_node(Resources(1, 0), Resources()) == 1  # unknown shape: one each


def dry(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["create", "cluster", *args, "--dry-run"])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.stdout)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


def test_cli_provision_flags() -> None:
    doc = dry("c1", "--provision", "--infra", "slurm/sim-1", "--cpus", "2", "--memory", "4",
              "--num_nodes", "2", "--max-nodes", "4", "--idle-minutes", "10",
              "--candidate", "kubernetes/ctx", "--candidate", "aws/us-east-1")
    assert doc["spec"] == {"manager": "skypilot", "provision": {
        "infra": "slurm/sim-1", "cpus": "2", "memory": "4G", "nodes": {"min": 2, "max": 4},
        "idleMinutes": 10, "candidates": ["kubernetes/ctx", "aws/us-east-1"]}}


def test_cli_the_originals_cloud_and_region() -> None:
    doc = dry("c2", "--provision", "--cloud", "AWS", "--region", "us-east-1", "--cpus", "4+",
              "--accelerators", "V100:1", "--num_nodes", "2")
    prov = doc["spec"]["provision"]
    assert prov["infra"] == "aws/us-east-1" and prov["nodes"] == {"min": 2}
    assert (prov["cpus"], prov["accelerators"]) == ("4", "V100:1")
    assert doc["spec"]["cloud"] == "AWS"


@pytest.mark.parametrize(("args", "needle"), [
    (("c", "--provision"), "--provision needs --infra"),
    (("c", "--infra", "slurm/x"), "add --provision"),
    (("c", "--candidate", "slurm/x"), "add --provision"),
    (("c", "--cloud", "gcp"), "spec: cloud: only for a provisioned cluster"),
    (("c", "--provision", "--infra", "bad infra"), "provision.infra"),
    (("c", "--provision", "--infra", "slurm/a", "--num_nodes", "3", "--max-nodes", "2"),
     "provision.nodes.max"),
    (("c", "--provision", "--infra", "slurm/a", "--num_nodes", "65"), "65"),
])
def test_cli_provision_errors_are_one_line(args: tuple[str, ...], needle: str) -> None:
    result = CliRunner().invoke(cli, ["create", "cluster", *args, "--dry-run"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert needle in result.stderr


PROVISIONING = {
    "kind": "Cluster", "metadata": {"name": "c1"},
    "spec": {"manager": "skypilot", "provision": {"infra": "slurm/sim-1"}},
    "status": {"phase": "Provisioning", "message": "waiting for c1-abc-0: 12 s left",
               "provision": {"infra": "kubernetes/k", "nodes": 0, "attempts": 4,
                             "eta": "2026-11-25T12:41:05Z"}},
}


def test_wait_line_and_wide_table_show_the_progress() -> None:
    from skyshift.cli.cluster_wait import describe
    from skyshift.cli.tables import CLUSTER_WIDE, cluster_rows

    assert describe(PROVISIONING) == (
        "Provisioning: waiting for c1-abc-0: 12 s left (kubernetes/k, attempt 4, "
        "ETA 12:41:05 UTC)")
    row = cluster_rows(PROVISIONING, True, None)[0]
    wide = dict(zip(CLUSTER_WIDE, row[-len(CLUSTER_WIDE):], strict=True))
    assert (row[1], row[4]) == ("skypilot", "Provisioning")
    assert (wide["INFRA"], wide["NODES"]) == ("kubernetes/k", "0")
    ready = {**PROVISIONING, "status": {"phase": "Ready", "provision": {"nodes": 3}}}
    wide = dict(zip(CLUSTER_WIDE, cluster_rows(ready, True, None)[0][-len(CLUSTER_WIDE):],
                    strict=True))
    assert (wide["INFRA"], wide["NODES"]) == ("slurm/sim-1", "3")  # the spec's until launched


def test_all_contexts_still_builds_and_refuses_wait(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "a", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "one", "context": {"cluster": "a", "user": "u"}}],
        "current-context": "one",
    }))
    args = ["create", "cluster", "--manager", "k8", "--config", str(kubeconfig),
            "--all-contexts", "--dry-run"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["metadata"]["name"] == "one"
    result = CliRunner().invoke(cli, [*args, "--wait"])
    assert result.exit_code == 2 and "--wait follows one cluster" in result.stderr


class StepClient:
    """Answers ``get`` with the next of ``states`` (the last one repeats)."""

    def __init__(self, states: list[dict[str, Any]]) -> None:
        self.states = states
        self.gets = 0

    def get(self, kind: str, name: str) -> dict[str, Any]:
        self.gets += 1
        return self.states[min(self.gets - 1, len(self.states) - 1)]


def test_wait_prints_each_new_line_until_ready(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from skyshift.cli import cluster_wait

    monkeypatch.setattr(cluster_wait, "POLL", 0.0)
    ready = {**PROVISIONING, "status": {"phase": "Ready", "message": "2 nodes"}}
    client = StepClient([PROVISIONING, PROVISIONING, ready])
    obj = cluster_wait.wait_ready(client, "c1", 10)  # type: ignore[arg-type]
    assert obj["status"]["phase"] == "Ready" and client.gets == 3
    err = capsys.readouterr().err.splitlines()
    assert err == [cluster_wait.describe(PROVISIONING), "Ready: 2 nodes"]
    failed = {**PROVISIONING, "status": {"phase": "Failed", "message": "no AWS credentials"}}
    with pytest.raises(SystemExit) as exited:
        cluster_wait.finish(cluster_wait.wait_ready(StepClient([failed]), "c1", 10))  # type: ignore[arg-type]
    assert exited.value.code == 1
    assert "c1 is Failed: no AWS credentials" in capsys.readouterr().err
