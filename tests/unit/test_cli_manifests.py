"""``skyctl create`` flags -> manifests: the original's flags, dash/underscore spellings, aliases,
and one-line errors for bad values (through click's CliRunner, ``--dry-run``, no server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from skyshift.cli import manifests
from skyshift.cli.errors import UsageProblem
from skyshift.cli.main import cli


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


def dry(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["create", *args, "--dry-run"])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.stdout)
    assert isinstance(doc, dict)
    return doc


def fails(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["create", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr


def test_job_flags_of_the_original() -> None:
    doc = dry(
        "job", "train", "--namespace", "ml", "-l", "team", "vision", "-l", "tier", "gpu",
        "--image", "pytorch/pytorch:2.3", "-e", "EPOCHS", "10", "--envs", "LR", "0.1",
        "--cpus", "2", "--gpus", "1", "-a", "T4:1", "--memory", "4096", "--run", "python t.py",
        "--replicas", "3", "--restart_policy", "OnFailure",
        "--ports", "8080", "--priority", "5", "--max_restarts", "7",
    )
    assert doc["kind"] == "Job"
    assert doc["metadata"] == {
        "name": "train", "namespace": "ml", "labels": {"team": "vision", "tier": "gpu"},
    }
    spec = doc["spec"]
    assert spec["image"] == "pytorch/pytorch:2.3"
    assert spec["envs"] == {"EPOCHS": "10", "LR": "0.1"}
    assert spec["resources"] == {"cpus": "2", "gpus": 1, "memory": "4096", "accelerators": "T4:1"}
    assert spec["replicas"] == 3
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["ports"] == [8080]
    assert (spec["priority"], spec["maxRestarts"]) == (5, 7)


def test_job_defaults_follow_the_original() -> None:
    doc = dry("job", "hello", "--run", "echo hi")
    assert doc["metadata"]["namespace"] == "default"
    # The original defaulted to Always, which made a one-shot job loop forever; the model's
    # OnFailure default is used instead (README, "Differences from the original").
    assert doc["spec"]["restartPolicy"] == "OnFailure"
    assert doc["spec"]["resources"]["cpus"] == "1"
    assert "image" not in doc["spec"]  # the server's default image applies


def test_dash_and_underscore_spellings_are_the_same_flag() -> None:
    a = dry("job", "x", "--restart_policy", "never", "--max_restarts", "2")
    b = dry("job", "x", "--restart-policy", "Never", "--max-restarts", "2")
    assert a == b
    assert a["spec"]["restartPolicy"] == "Never"
    c = dry("cluster", "c", "--num-nodes", "2", "--disk-size", "100", "--ssh-key-path", "/k")
    assert c["spec"]["num_nodes"] == 2
    assert c["spec"]["access_config"] == {"ssh_key_path": "/k"}


def test_cluster_flags_and_gb_default() -> None:
    doc = dry(
        "cluster", "hpc", "--manager", "slurm", "-l", "site", "lab", "--cpus", "4+",
        "--memory", "16", "--disk_size", "100GB", "--accelerators", "V100:2", "--ports", "22,80",
        "--ports", "443", "--num_nodes", "3",
        "-c", "/etc/slurm.conf", "-h", "login.lab", "-u", "me", "-k", "~/.ssh/id",
    )
    spec = doc["spec"]
    assert doc["metadata"] == {"name": "hpc", "labels": {"site": "lab"}}
    assert "namespace" not in doc["metadata"]
    assert (spec["manager"], spec["cpus"], spec["memory"], spec["disk_size"]) == (
        "slurm", "4", "16G", "100GB",
    )
    assert spec["ports"] == [22, 80, 443]
    assert spec["config_path"] == "/etc/slurm.conf"
    assert spec["access_config"] == {"host": "login.lab", "username": "me",
                                     "ssh_key_path": "~/.ssh/id"}


def test_ray_cluster_takes_its_dashboard_address() -> None:
    doc = dry("cluster", "r1", "--manager", "ray", "--address", "http://127.0.0.1:8265")
    assert doc["spec"]["manager"] == "ray"
    assert doc["spec"]["config"] == {"address": "http://127.0.0.1:8265"}
    help_text = CliRunner().invoke(cli, ["create", "cluster", "--help"]).output
    assert "ray" in help_text and "--address" in help_text


@pytest.mark.parametrize("alias", ["service", "services", "svc", "SVC"])
def test_service_aliases_and_flags(alias: str) -> None:
    doc = dry(alias, "web", "-t", "loadbalancer", "-s", "app", "web", "-p", "80", "8080",
              "--ports", "443", "8443", "-c", "kind-1")
    assert doc["spec"] == {
        "type": "LoadBalancer",
        "selector": {"app": "web"},
        "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"},
                  {"port": 443, "targetPort": 8443, "protocol": "TCP"}],
        "primaryCluster": "kind-1",
    }
    assert dry(alias, "w", "--service_type", "NodePort")["spec"]["type"] == "NodePort"


def test_other_kinds() -> None:
    fp = dry("filterPolicy", "p", "--labelSelector", "env", "prod", "-i", "a", "-e", "b")
    assert fp["spec"] == {"clusterFilter": {"include": ["a"], "exclude": ["b"]},
                          "labelsSelector": {"env": "prod"}}
    assert dry("fp", "p", "-i", "a")["kind"] == "FilterPolicy"
    link = dry("link", "l", "--source", "a", "-t", "b")
    assert link["spec"] == {"source_cluster": "a", "target_cluster": "b"}
    link = dry("link", "l", "-s", "a", "-t", "b", "--gateway", "gw.example.com:443")
    assert link["spec"]["gateway"] == {"address": "gw.example.com", "port": 443}
    edp = dry("edp", "e", "--num_endpoints", "3", "--exposed", "--primary_cluster", "c1",
              "--selector", "app", "web")
    assert edp["spec"]["endpoints"] == {"c1": {"num_endpoints": 3, "exposed_to_cluster": True}}
    role = dry("role", "dev", "-a", "get", "--action", "list", "-r", "jobs", "-n", "dev",
               "-u", "alice", "--users", "bob")
    assert role["spec"] == {"rules": [{"resources": ["jobs"], "actions": ["get", "list"]}],
                            "namespaces": ["dev"], "users": ["alice", "bob"]}
    assert dry("ns", "dev") == {"kind": "Namespace", "metadata": {"name": "dev"}}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["job", "x", "--restart_policy", "sometimes"], "restart policy"),
        (["job", "x", "--memory", "lots"], "memory"),
        (["job", "x", "-a", "T4:x"], "accelerator"),
        (["job", "x", "-l", "bad key", "v"], "label"),
        (["job", "Bad_Name"], "DNS-1123"),
        (["cluster", "c", "--manager", "mesos"], "manager"),
        (["cluster", "c", "--manager", "ray"], "address"),
        (["cluster", "c", "--manager", "ray", "--address", "127.0.0.1:8265"], "address"),
        (["cluster", "c", "--manager", "slurm", "--address", "http://x:1"], "--manager ray"),
        (["cluster", "c", "--ports", "http"], "port"),
        (["link", "l", "-s", "a", "-t", "a"], "differ"),
        (["link", "l", "-s", "a", "-t", "b", "-g", "gw.example.com"], "HOST:PORT"),
        (["link", "l", "-s", "a", "-t", "b", "-g", "gw:70000"], "port"),
        (["fp", "p", "-i", "a", "-e", "a"], "both included and excluded"),
        (["role", "r", "-a", "explode"], "action"),
    ],
)
def test_bad_values_are_one_line_usage_errors(args: list[str], needle: str) -> None:
    code, err = fails(*args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle.lower() in lines[0].lower()


def test_click_usage_errors_keep_the_usage_message() -> None:
    code, err = fails("job", "x", "--replicas", "many")
    assert code == 2
    assert "Usage: skyctl create job" in err and "--replicas" in err
    code, err = fails("job", "x", "--no-such-flag")
    assert code == 2 and "No such option" in err
    code, err = fails("gadget", "x")
    assert code == 2 and "No such command" in err


def test_builders_directly() -> None:
    assert manifests.parse_ports(["22", "80, 443", ""]) == [22, 80, 443]
    assert manifests.gb_default("8") == "8G" and manifests.gb_default("512Mi") == "512Mi"
    assert manifests.restart_policy("on-failure") == "OnFailure"
    with pytest.raises(UsageProblem):
        manifests.endpoints_manifest("e", namespace="default", exposed=True)
    svc = manifests.service_manifest("s", namespace="default", cluster="auto")
    assert "primaryCluster" not in svc["spec"]


@pytest.mark.parametrize(("args", "field"), [
    (("job", "j", "--run", "true", "-v", "/data", "/mnt/data"), "spec.volumes"),
])
def test_flags_nothing_honours_yet_are_refused_not_ignored(args: tuple[str, ...],
                                                           field: str) -> None:
    code, err = fails(*args, "--dry-run")
    assert code == 2
    assert f"{field}:" in err and "not supported yet" in err


def test_image_pull_policy_in_a_manifest_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("kind: Job\nmetadata: {name: j}\n"
                    "spec: {run: 'true', imagePullPolicy: Always}\n")
    result = CliRunner().invoke(cli, ["apply", "-f", str(path), "--dry-run"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "spec.imagePullPolicy" in result.stderr and "not supported yet" in result.stderr


@pytest.mark.parametrize("image", ["invalid-image-format-#", "UPPER/case", "a b", "x:tag!"])
def test_malformed_image_is_refused(image: str) -> None:
    code, err = fails("job", "j", "--run", "true", "--image", image, "--dry-run")
    assert code == 2 and "spec.image" in err and "not a valid image reference" in err


@pytest.mark.parametrize("image", [
    "busybox", "ubuntu:22.04", "ghcr.io/org/app:1.2", "localhost:5000/a/b@sha256:" + "a" * 64,
])
def test_valid_images_pass(image: str) -> None:
    assert dry("job", "j", "--run", "true", "--image", image)["spec"]["image"] == image


def test_env_value_over_the_bound_is_refused_naming_it() -> None:
    code, err = fails("job", "j", "--run", "true", "-e", "BIG", "x" * (33 * 1024), "--dry-run")
    assert code == 2 and "spec.envs" in err and "BIG" in err and "32 KiB" in err


def test_every_problem_of_a_manifest_is_shown() -> None:
    code, err = fails("job", "j", "--run", "true", "--image", "bad#", "-e", "BIG",
                      "x" * (33 * 1024), "-v", "/a", "/b", "--dry-run")
    assert code == 2
    for field in ("spec.image", "spec.envs", "spec.volumes"):
        assert field in err, err
    assert "3 problems" in err and "more problems" not in err
