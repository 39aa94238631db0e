"""Pure mappings of the Kubernetes adapter: quantities, nodes, manifests and pod states."""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.compat.kubernetes import objects as ko
from skyshift.compat.kubernetes.informer import statuses
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, UNKNOWN, ReplicaSpec
from skyshift.models.quantity import Resources


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", 0.5), ("2", 2.0), ("1.5", 1.5), ("16Gi", 16 * 2**30), ("64M", 64e6),
     ("1e3", 1000.0), ("129k", 129e3), ("100n", 1e-7), (4, 4.0), ("1Ki", 1024.0)],
)
def test_parse_quantity(text, value):
    assert ko.parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "abc", "1Qi", "--1"])
def test_parse_quantity_rejects_junk(bad):
    with pytest.raises(ValueError):
        ko.parse_quantity(bad)


def test_quantities_round_trip_exactly():
    assert ko.cpu_quantity(0.5) == "500m" and ko.parse_quantity(ko.cpu_quantity(0.25)) == 0.25
    assert ko.memory_quantity(64) == "64M"
    assert ko.parse_quantity(ko.memory_quantity(64)) / 1e6 == 64
    assert ko.parse_quantity(ko.memory_quantity(0.5)) / 1e6 == 0.5


@pytest.mark.parametrize(
    ("label", "name"),
    [("NVIDIA-A100-SXM4-80GB", "A100"), ("Tesla-T4", "T4"), ("nvidia-tesla-v100", "V100"),
     ("NVIDIA-H100-80GB-HBM3", "H100"), ("NVIDIA-L40S", "L40S"), ("NVIDIA-A10G", "A10G"),
     ("NVIDIA-GeForce-RTX-4090", "GeForce-RTX-4090")],
)
def test_accelerator_name(label, name):
    assert ko.accelerator_name(label) == name


def node(ready: bool = True, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "2", "pods": "110"},
            "capacity": {"cpu": "9", "memory": "17Gi"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    out["spec"].update(extra)
    return out


def test_node_capacity_uses_allocatable_and_gpu_labels():
    cap = ko.node_capacity(node())
    assert cap == Resources(cpus=8, memory=16 * 2**30 / 1e6, gpus=2, accelerators={"A100": 2})


def test_node_schedulable():
    assert ko.node_schedulable(node())
    assert not ko.node_schedulable(node(ready=False))
    assert not ko.node_schedulable(node(unschedulable=True))
    assert not ko.node_schedulable(node(taints=[{"key": "k", "effect": "NoSchedule"}]))
    assert ko.node_schedulable(node(taints=[{"key": "k", "effect": "PreferNoSchedule"}]))


def test_pod_request_sums_containers_and_takes_max_of_init():
    pod = {"spec": {
        "containers": [
            {"resources": {"requests": {"cpu": "500m", "memory": "64M"}}},
            {"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},  # request = limit
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
    }}
    assert ko.pod_request(pod, "A100") == Resources(cpus=4, memory=64, gpus=1,
                                                    accelerators={"A100": 1})


def spec(**kw: Any) -> ReplicaSpec:
    base: dict[str, Any] = dict(
                name="job-12345678-3", job_name="job", namespace="team", job_uid="u" * 32,
                rank=3, image="", run="echo hi", envs={"A": "1"}, ports=[8080],
                resources=Resources(cpus=0.5, memory=64, gpus=0, accelerators={"A100": 2}),
                labels={"team": "x"}, attempt=2)
    base.update(kw)
    return ReplicaSpec(**base)


def test_pod_manifest():
    s = spec()
    pod_spec = ko.pod_spec(s, image="busybox:1.36", pull_policy="IfNotPresent",
                           restart_policy="Never", grace_period=5,
                           accelerator_values={"nvidia.com/gpu.product": ["NVIDIA-A100-SXM4-80GB"]})
    pod = ko.pod_manifest(s, pod_spec, {"a": "b"})
    meta = pod["metadata"]
    assert meta["name"] == s.name and meta["annotations"] == {"a": "b"}
    assert meta["labels"] == {
        "team": "x", ko.MANAGED_BY: "skyshift", ko.JOB_UID: s.job_uid, ko.JOB_NAME: "job",
        ko.NAMESPACE: "team", ko.RANK: "3", ko.REPLICA: s.name, ko.ATTEMPT: "2",
        ko.WORKLOAD: "pod",
    }
    c = pod["spec"]["containers"][0]
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 5
    assert c["image"] == "busybox:1.36" and c["command"] == ["/bin/sh", "-c", "echo hi"]
    assert {e["name"]: e["value"] for e in c["env"]} == {
        "A": "1", "SKYSHIFT_JOB": "job", "SKYSHIFT_NAMESPACE": "team", "SKYSHIFT_RANK": "3",
        "SKYSHIFT_REPLICA": s.name}
    assert c["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "64M", "nvidia.com/gpu": "2"},
                              "limits": {"memory": "64M", "nvidia.com/gpu": "2"}}
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["NVIDIA-A100-SXM4-80GB"]


def test_deployment_manifest_selects_its_own_pods():
    s = spec(image="nginx", run="", resources=Resources(cpus=1))
    pod_spec = ko.pod_spec(s, image="busybox", pull_policy="Always", restart_policy="Always",
                           grace_period=5)
    dep = ko.deployment_manifest(s, pod_spec, {})
    assert dep["spec"]["replicas"] == 1
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "nginx" and "command" not in c and c["imagePullPolicy"] == "Always"
    assert "affinity" not in dep["spec"]["template"]["spec"]
    assert dep["metadata"]["labels"][ko.WORKLOAD] == "deployment"


def pod(phase: str, state: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    labels = {ko.REPLICA: "r-1", ko.JOB_UID: "u1", ko.JOB_NAME: "j", ko.NAMESPACE: "ns",
              ko.RANK: "1", ko.ATTEMPT: "3"}
    cs = [{"name": "main", "state": state}] if state is not None else []
    meta = {"name": "r-1", "labels": labels, "creationTimestamp": "2024-01-01T00:00:00Z"}
    return {"metadata": meta, "status": {"phase": phase, "containerStatuses": cs, **status}}


def test_pod_status_phases():
    pending = ko.pod_status(pod("Pending", {"waiting": {"reason": "ErrImagePull", "message": "m"}}))
    assert (pending.state, pending.reason, pending.message) == (PENDING, "ErrImagePull", "m")
    assert (pending.name, pending.job_uid, pending.rank, pending.attempt) == ("r-1", "u1", 1, 3)
    unsched = ko.pod_status(pod("Pending", conditions=[
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2"}]))
    assert unsched.reason == "Unschedulable" and unsched.message == "0/2"
    running = ko.pod_status(pod("Running", {"running": {"startedAt": "2024-01-01T00:00:10Z"}}))
    assert running.state == RUNNING and running.started_at == 1704067210.0
    crash = ko.pod_status(pod("Running", {"waiting": {"reason": "CrashLoopBackOff"}}))
    assert crash.state == PENDING and crash.reason == "CrashLoopBackOff"
    done = ko.pod_status(pod("Succeeded", {"terminated": {
        "exitCode": 0, "reason": "Completed", "startedAt": "2024-01-01T00:00:10Z",
        "finishedAt": "2024-01-01T00:00:20Z"}}))
    assert (done.state, done.exit_code, done.reason) == (SUCCEEDED, 0, "Completed")
    assert done.started_at is not None and done.finished_at == done.started_at + 10
    oom = ko.pod_status(pod("Failed", {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}))
    assert (oom.state, oom.exit_code, oom.reason) == (FAILED, 137, "OOMKilled")
    evicted = ko.pod_status(pod("Failed", reason="Evicted", message="low memory"))
    assert (evicted.state, evicted.exit_code, evicted.reason) == (FAILED, None, "Evicted")
    assert ko.pod_status(pod("Unknown")).state == UNKNOWN


def test_statuses_group_pods_and_hide_terminating_and_deleted():
    old = pod("Failed", {"terminated": {"exitCode": 1}})
    new = pod("Running", {"running": {}})
    new["metadata"] = {**new["metadata"], "name": "r-1-abc",
                       "creationTimestamp": "2024-01-02T00:00:00Z"}
    gone = pod("Running", {"running": {}})
    gone["metadata"] = {**gone["metadata"], "name": "x", "deletionTimestamp": "now",
                        "labels": {**gone["metadata"]["labels"], ko.REPLICA: "x"}}
    dep = {"metadata": {"name": "d-0", "labels": {ko.REPLICA: "d-0", ko.JOB_UID: "u2"}}}
    out = statuses([old, new, gone], [dep])
    assert [(s.name, s.state) for s in out] == [("d-0", PENDING), ("r-1", RUNNING)]
    assert statuses([old, new], [dep], hidden={"r-1", "d-0"}) == []


def test_endpointslices_for_linked_replicas() -> None:
    """Per target port and address family, named after the Service port; what Kubernetes would
    refuse (loopback, link-local) is left out and counted."""
    from skyshift.compat.kubernetes.slices import desired_slices
    from skyshift.compat.types import ServicePort, ServiceSpec

    spec = ServiceSpec("web", "ml", ports=[ServicePort(80, 8080), ServicePort(443, 8443)],
                       remote_backends={"8080": ["10.1.0.5:8080", "10.1.0.6:8080",
                                                 "127.0.0.1:41000", "169.254.1.1:8080",
                                                 "gw.example.com:30080"],
                                        "9999": ["10.1.0.7:9999"]})
    slices, skipped = desired_slices(spec)
    assert skipped == 2
    assert sorted(slices) == ["web-skyshift-fqdn-8080-30080", "web-skyshift-ipv4-8080-8080"]
    ipv4 = slices["web-skyshift-ipv4-8080-8080"]
    assert ipv4["addressType"] == "IPv4"
    assert [e["addresses"] for e in ipv4["endpoints"]] == [["10.1.0.5"], ["10.1.0.6"]]
    assert ipv4["ports"] == [{"name": "tcp-80", "port": 8080, "protocol": "TCP"}]
    assert ipv4["metadata"]["labels"]["kubernetes.io/service-name"] == "web"
    assert slices["web-skyshift-fqdn-8080-30080"]["addressType"] == "FQDN"
