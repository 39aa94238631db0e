"""Who has a physical cluster first (``activities.identity.holder_of``) and the Slurm
controller's identity from ``scontrol show config`` (issue 31)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from skyshift.activities.identity import holder_of
from skyshift.cli.main import cli
from skyshift.compat.slurm.adapter import controller_identity


def cluster(name: str, created: str, identity: str, **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "creationTimestamp": created, **extra}
    return {"metadata": meta, "status": {"identity": identity, "phase": "Ready"}}


def test_the_oldest_cluster_with_the_identity_holds_it() -> None:
    clusters = [cluster("b", "2026-01-02T00:00:00Z", "k8:x"),
                cluster("a", "2026-01-01T00:00:00Z", "k8:x"),
                cluster("c", "2026-01-03T00:00:00Z", "k8:y")]
    assert holder_of(clusters, "b", "k8:x") == "a"
    assert holder_of(clusters, "a", "k8:x") == ""  # the older one keeps it, whoever asks
    assert holder_of(clusters, "c", "k8:y") == ""
    assert holder_of(clusters, "b", "") == ""  # no identity (e.g. skypilot): nothing to compare


def test_same_age_is_decided_by_name_and_deleting_clusters_do_not_hold() -> None:
    same = "2026-01-01T00:00:00Z"
    clusters = [cluster("b", same, "i"), cluster("a", same, "i")]
    assert (holder_of(clusters, "a", "i"), holder_of(clusters, "b", "i")) == ("", "a")
    clusters[1]["metadata"]["deletionTimestamp"] = same
    assert holder_of(clusters, "b", "i") == ""


def test_slurm_controller_identity() -> None:
    text = """Configuration data as of 2026-11-27T02:00:00
AccountingStorageType   = (null)
ClusterName             = slurm1
SlurmctldHost[0]        = box(127.0.0.1)
SlurmctldPort           = 6817
"""
    assert controller_identity(text) == "slurm:slurm1@box:6817"
    other = text.replace("6817", "6917").replace("slurm1", "slurm2")
    assert controller_identity(other) != controller_identity(text)


def test_skyctl_takes_the_context_named_like_the_cluster(tmp_path: Path) -> None:
    """``skyctl create cluster sim-k8s-2 --config KUBECONFIG`` records the context sim-k8s-2;
    a name no context has, with several contexts, is refused listing them (issue 31)."""
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
           "current-context": "sim-k8s-1",
           "contexts": [{"name": n, "context": {"cluster": n, "user": n}}
                        for n in ("sim-k8s-1", "sim-k8s-2")]}
    path = tmp_path / "kc.yaml"
    path.write_text(yaml.safe_dump(doc))
    runner = CliRunner()
    made = runner.invoke(cli, ["create", "cluster", "sim-k8s-2", "--config", str(path),
                               "--dry-run"])
    assert made.exit_code == 0, made.output
    assert yaml.safe_load(made.output)["spec"]["context"] == "sim-k8s-2"
    refused = runner.invoke(cli, ["create", "cluster", "other", "--config", str(path),
                                  "--dry-run"])
    assert refused.exit_code == 2, refused.output
    assert "sim-k8s-1, sim-k8s-2" in refused.output and "--context" in refused.output
    explicit = runner.invoke(cli, ["create", "cluster", "other", "--config", str(path),
                                   "--context", "sim-k8s-1", "--dry-run"])
    assert yaml.safe_load(explicit.output)["spec"]["context"] == "sim-k8s-1"
    single = tmp_path / "one.yaml"
    single.write_text(yaml.safe_dump({**doc, "contexts": doc["contexts"][:1]}))
    alone = runner.invoke(cli, ["create", "cluster", "other", "--config", str(single),
                                "--dry-run"])
    assert alone.exit_code == 0, alone.output  # the only context: the adapter takes it
