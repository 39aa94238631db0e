"""Object model validation: what a user gets back for good and bad manifests."""

from __future__ import annotations

import json

import pytest
import yaml
from pydantic import ValidationError

from skyshift.models import Cluster, Job, UnknownKind, kind_info, load_manifests, parse_object
from skyshift.models.quantity import Resources, parse_accelerators, parse_cpus, parse_memory


def _job(**spec: object) -> dict[str, object]:
    return {"kind": "Job", "metadata": {"name": "train"}, "spec": spec}


def test_defaults_and_namespace() -> None:
    job = parse_object(_job(run="echo hi"))
    assert isinstance(job, Job)
    assert job.metadata.namespace == "default"
    assert job.spec.replicas == 1
    assert job.spec.restartPolicy == "OnFailure"
    assert job.status.phase == "Pending"


@pytest.mark.parametrize(
    ("value", "cores"), [(2, 2.0), (1.5, 1.5), ("500m", 0.5), ("3", 3.0), ("0.25", 0.25)]
)
def test_cpus(value: object, cores: float) -> None:
    assert parse_cpus(value) == cores


@pytest.mark.parametrize("value", ["abc", "-1", "2x", True, None, "1Gi"])
def test_bad_cpus(value: object) -> None:
    with pytest.raises(ValueError):
        parse_cpus(value)


@pytest.mark.parametrize(
    ("value", "mb"),
    [(512, 512.0), ("512", 512.0), ("1G", 1000.0), ("1Gi", 1073.741824), ("256Mi", 268.435456)],
)
def test_memory(value: object, mb: float) -> None:
    assert parse_memory(value) == pytest.approx(mb)


def test_accelerators() -> None:
    assert parse_accelerators("A100:2") == {"A100": 2}
    assert parse_accelerators("A100:2,T4") == {"A100": 2, "T4": 1}
    assert parse_accelerators(["T4:1", "T4:1"]) == {"T4": 2}
    with pytest.raises(ValueError):
        parse_accelerators("A100:x")


def test_resources_arithmetic() -> None:
    free = Resources(4, 8000, 1, {"A100": 2})
    need = Resources(2, 1000, 0, {"A100": 1})
    assert need.fits_in(free)
    assert (free - need.scaled(2)).accelerators == {"A100": 0}
    assert not Resources(5).fits_in(free)
    assert Resources(5).shortfall(free) == ["cpus: need 5, free 4"]


@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        (_job(replicas=-1), "spec.replicas"),
        (_job(resources={"cpus": "abc"}), "spec.resources.cpus"),
        (_job(restartPolicy="Sometimes"), "spec.restartPolicy"),
        (_job(ports=[70000]), "spec.ports"),
        # numbers no cluster could hold: refused here, not printed as 300 digits later
        (_job(resources={"cpus": 1e300}), "spec.resources.cpus"),
        (_job(resources={"memory": 10**12}), "spec.resources.memory"),
        (_job(resources={"gpus": 10**9}), "spec.resources.gpus"),
        (_job(resources={"accelerators": "A100:1000000"}), "spec.resources.accelerators"),
        (_job(priority=10**23), "spec.priority"),
        (_job(priority=-10**23), "spec.priority"),
        (_job(maxRestarts=10**9), "spec.maxRestarts"),
        (_job(unknownField=1), "spec.unknownField"),
        ({"kind": "Job", "metadata": {"name": "Bad_Name"}}, "metadata.name"),
        ({"kind": "Job", "metadata": {"name": "x" * 64}}, "metadata.name"),
        ({"kind": "Job", "metadata": {"name": "ok", "labels": {"a": "b c"}}}, "metadata.labels"),
    ],
)
def test_bad_fields_are_named(manifest: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_object(manifest)
    locs = {".".join(str(p) for p in e["loc"]) for e in err.value.errors()}
    assert any(loc.startswith(field) for loc in locs), locs


def test_unknown_kind_and_scope() -> None:
    with pytest.raises(UnknownKind):
        parse_object({"kind": "Gizmo", "metadata": {"name": "x"}})
    with pytest.raises(ValueError, match="cluster-scoped"):
        parse_object({"kind": "Cluster", "metadata": {"name": "c", "namespace": "default"}})


def test_kind_aliases() -> None:
    assert kind_info("svc").plural == "services"
    assert kind_info("edp").kind == "Endpoints"
    assert kind_info("FilterPolicy").plural == "filterpolicies"
    assert kind_info("jobs").kind == "Job"


def test_cluster_manager_aliases() -> None:
    c = parse_object(
        {"kind": "Cluster", "metadata": {"name": "k"}, "spec": {"manager": "kubernetes"}}
    )
    assert isinstance(c, Cluster)
    assert c.spec.manager == "k8"
    with pytest.raises(ValidationError):
        parse_object({"kind": "Cluster", "metadata": {"name": "k"}, "spec": {"manager": "nomad"}})


def test_manifest_round_trip_yaml_and_json() -> None:
    text = """
kind: Job
metadata: {name: a, labels: {team: ml}}
spec: {run: "python train.py", resources: {cpus: 500m, memory: 2Gi, accelerators: "A100:1"},
       placement: {filters: [{matchExpressions: [{key: region, operator: In, values: [us]}]}],
                   preferences: [{matchLabels: {tier: cheap}, weight: 50}]}}
---
kind: Cluster
metadata: {name: c1}
spec: {manager: local, cpus: 4, memory: 8Gi}
"""
    docs = load_manifests(text)
    objs = [parse_object(d) for d in docs]
    for obj in objs:
        again = parse_object(json.loads(json.dumps(obj.to_dict())))
        assert again == obj
        assert parse_object(yaml.safe_load(yaml.safe_dump(obj.to_dict()))) == obj
    job = objs[0]
    assert isinstance(job, Job)
    assert job.spec.resources.cpus == 0.5
    assert job.spec.placement.preferences[0].weight == 50
