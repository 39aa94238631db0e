"""Cluster objects -> adapter config: each way to describe a cluster reaches its adapter."""

from __future__ import annotations

from skyshift.lifecycle.convert import manager_config


def cluster(spec: dict[str, object], labels: dict[str, str] | None = None) -> dict[str, object]:
    return {"kind": "Cluster", "metadata": {"name": "c", "labels": labels or {}}, "spec": spec}


def test_k8_takes_config_path_and_context() -> None:
    manager, cfg = manager_config(cluster(
        {"manager": "k8", "config_path": "/k/kubeconfig", "context": "ctx-2", "cpus": 4},
        {"zone": "a"}))
    assert manager == "k8"
    assert cfg == {"kubeconfig": "/k/kubeconfig", "context": "ctx-2", "labels": {"zone": "a"}}


def test_spec_config_wins_over_top_level_fields() -> None:
    _, cfg = manager_config(cluster(
        {"manager": "k8", "config_path": "/old", "config": {"kubeconfig": "/new"}}))
    assert cfg["kubeconfig"] == "/new"


def test_slurm_takes_conf_and_login_node() -> None:
    _, cfg = manager_config(cluster({
        "manager": "slurm", "config_path": "/etc/slurm/slurm.conf",
        "access_config": {"host": "login", "username": "u", "ssh_key_path": "/k"}}))
    assert cfg == {"slurm_conf": "/etc/slurm/slurm.conf", "host": "login", "username": "u",
                   "ssh_key_path": "/k"}


def test_local_takes_declared_capacity() -> None:
    _, cfg = manager_config(cluster(
        {"manager": "local", "cpus": 2, "memory": 4096, "config": {"state_dir": "/s"}}))
    assert cfg == {"cpus": 2, "memory": 4096, "state_dir": "/s"}


def test_ray_takes_the_dashboard_address_and_labels() -> None:
    manager, cfg = manager_config(cluster(
        {"manager": "ray", "config": {"address": "http://127.0.0.1:8265"}}, {"site": "lab"}))
    assert manager == "ray"
    assert cfg == {"address": "http://127.0.0.1:8265", "labels": {"site": "lab"}}
