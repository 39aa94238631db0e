"""Every activity checks its input again (issue 26): a workflow's input can be forged by anyone
who reaches Temporal, so a name with a newline and HAProxy directives, a '../', a port out of
range or a label value with a newline ends the activity with a non-retryable ``InvalidInput``
error before any file is written, command run or object touched.

Each activity runs in Temporal's ActivityEnvironment with a manager and a store that record
every call, so "nothing was produced" is what the test sees, not an assumption."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from skyshift.activities.clusters import ClusterContext, SkyletActivities
from skyshift.activities.links import LinkActivities, ProbeActivities
from skyshift.activities.pipelines import PipelineActivities
from skyshift.activities.provisioning import ProvisioningActivities
from skyshift.activities.schedules import ScheduleActivities
from skyshift.activities.service_store import ServiceStoreActivities
from skyshift.activities.services import ServiceActivities
from skyshift.activities.store import StoreActivities
from skyshift.compat.errors import Permanent
from skyshift.compat.local.lb import LocalBalancer
from skyshift.compat.types import ReplicaSpec, ServicePort, ServiceSpec
from skyshift.contract.jobs import (
    ClusterEvent,
    ClusterJobsInput,
    DeleteReplicasInput,
    JobRef,
    JobStatusPatch,
    RemoveObjectInput,
    ReplicaOpInput,
    SubmitInput,
)
from skyshift.contract.links import LinkRef, ProbeInput
from skyshift.contract.pipelines import (
    DeleteOwnedInput,
    ScheduleRef,
    ScheduleRunLook,
    StartRunInput,
    StartStepInput,
)
from skyshift.contract.provision import DownInput, LaunchInput
from skyshift.contract.services import (
    AddressesInput,
    ApplyServiceInput,
    DeleteServiceInput,
    EndpointsWrite,
    ServiceViewInput,
)
from skyshift.models.quantity import Resources

INJECTED = "web\nglobal\n    lua-load /tmp/evil.lua\nfrontend x"
UID = "3f2c1a7e-0000-4000-8000-000000000001"


class Recorder:
    """A ClusterManager, an ObjectStore and a Temporal client at once: any call is recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def record(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            raise AssertionError(f"{name} was called with a forged input")

        return record


def replica(**change: Any) -> ReplicaSpec:
    spec = ReplicaSpec(name=f"web-{UID[:8]}-0", job_name="web", namespace="ml", job_uid=UID,
                       rank=0, run="echo hi", ports=[8080], labels={"app": "web"})
    return dataclasses.replace(spec, **change)


def service(**change: Any) -> ServiceSpec:
    spec = ServiceSpec(name="web", namespace="ml", uid=UID, selector={"app": "web"},
                       ports=[ServicePort(80, 8080)], backends={"8080": ["127.0.0.1:4000"]})
    return dataclasses.replace(spec, **change)


def forged_replicas() -> list[ReplicaSpec]:
    return [
        replica(name=INJECTED), replica(name="../../etc"), replica(job_name="web\n"),
        replica(namespace="../ml"), replica(job_uid="../x"), replica(ports=[0]),
        replica(ports=[70000]), replica(labels={"app": "web\nglobal"}),
        replica(envs={"A=B": "x"}), replica(run="echo\0hi"), replica(restart_policy="Sometimes"),
        replica(image="ubuntu\n"), replica(rank=-1),
        replica(resources=Resources(1, 0, 0, {"a100,gpu:x:9": 1})),
    ]


def forged_services() -> list[ServiceSpec]:
    return [
        service(name=INJECTED), service(name="web\n"), service(namespace="ml\nglobal"),
        service(name="../web"), service(ports=[ServicePort(0)]),
        service(ports=[ServicePort(65536)]),
        service(ports=[ServicePort(80, 8080, protocol="TCP\nglobal")]),
        service(selector={"app": "web\nlua-load /tmp/x"}),
        service(backends={"8080": ["127.0.0.1:4000\nglobal"]}),
        service(backends={"8080": ["127.0.0.1:4000;shutdown sessions"]}),
        service(backends={"80\n": ["127.0.0.1:4000"]}), service(cluster_ip="1.2.3.4\nglobal"),
        service(type="ClusterIP\n"),
    ]


async def refused(call: Awaitable[Any]) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(lambda: call)
    assert info.value.non_retryable, info.value
    assert info.value.type == "InvalidInput", info.value
    return info.value


def skylet(rec: Recorder) -> SkyletActivities:
    return SkyletActivities(ClusterContext("local", rec), rec, rec)  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", forged_replicas(), ids=lambda s: repr(dataclasses.astuple(s))[:60])
async def test_submit_refuses_forged_replicas(spec: ReplicaSpec) -> None:
    rec = Recorder()
    job = JobRef("ml", "web", UID)
    await refused(skylet(rec).submit_replicas(SubmitInput(job, "local", [spec])))
    assert rec.calls == []


@pytest.mark.parametrize("job", [JobRef("ml", INJECTED, UID), JobRef("../ml", "web", UID),
                                 JobRef("ml", "web", "a/b")])
async def test_submit_refuses_a_forged_job(job: JobRef) -> None:
    rec = Recorder()
    await refused(skylet(rec).submit_replicas(SubmitInput(job, "local", [replica()])))
    assert rec.calls == []


async def test_delete_and_replica_ops_refuse_forged_names() -> None:
    rec = Recorder()
    acts = skylet(rec)
    await refused(acts.delete_replicas(DeleteReplicasInput("local", names=["../../x"])))
    await refused(acts.delete_replicas(DeleteReplicasInput("local", job_uid="x\n")))
    await refused(acts.replica_op(ReplicaOpInput("logs", ["local"], ["a/../b"])))
    await refused(acts.replica_op(ReplicaOpInput("exec", ["local"], ["web-1"], command=["a\0b"])))
    await refused(acts.replica_op(ReplicaOpInput("rm", ["local"], ["web-1"])))
    assert rec.calls == []


@pytest.mark.parametrize("spec", forged_services(), ids=lambda s: repr(s.name)[:20])
async def test_apply_service_refuses_forged_specs(spec: ServiceSpec) -> None:
    rec = Recorder()
    await refused(ServiceActivities(ClusterContext("local", rec)).apply_service(  # type: ignore[arg-type]
        ApplyServiceInput("local", spec)))
    assert rec.calls == []


async def test_service_activities_refuse_forged_names_and_ports() -> None:
    rec = Recorder()
    acts = ServiceActivities(ClusterContext("local", rec))  # type: ignore[arg-type]
    await refused(acts.delete_service(DeleteServiceInput("local", "ml", INJECTED)))
    await refused(acts.delete_service(DeleteServiceInput("local", "..", "web")))
    await refused(acts.replica_addresses(AddressesInput("local", [UID], [0])))
    await refused(acts.replica_addresses(AddressesInput("local", ["../x"], [80])))
    assert rec.calls == []


def test_balancer_refuses_forged_specs_and_writes_nothing(tmp_path: Path) -> None:
    """Defense in depth: the HAProxy writer checks on its own, whoever calls it."""
    lb = LocalBalancer("local", tmp_path, "127.0.0.1")
    haproxy_parts = [  # what the balancer writes: name, namespace, ports, backends
        service(name=INJECTED), service(name="web\n"), service(namespace="ml\nglobal"),
        service(name="../web"), service(ports=[ServicePort(0)]),
        service(ports=[ServicePort(80, 70000)]),
        service(backends={"8080": ["127.0.0.1:4000\nglobal"]}),
        service(backends={"8080": ["127.0.0.1:4000;shutdown sessions"]}),
        service(backends={"80\n": ["127.0.0.1:4000"]}),
    ]
    for spec in haproxy_parts:
        with pytest.raises(Permanent):
            lb.apply(spec)
    with pytest.raises(Permanent):
        lb.delete("ml", INJECTED)
    assert not (tmp_path / "lb" / "haproxy.cfg").exists()
    assert not (tmp_path / "lb" / "services.json").exists()


def test_balancer_leaves_a_poisoned_stored_entry_out_of_the_config(tmp_path: Path) -> None:
    """A services.json written before the checks existed cannot carry directives into the
    configuration: the bad entry is left out, the good one written."""
    lb = LocalBalancer("local", tmp_path, "127.0.0.1")
    lb.dir.mkdir(parents=True)
    # as root the config lives in HAProxy's own directory under /run/skyshift/lb
    made = not lb.cfg.parent.exists()
    lb.cfg.parent.mkdir(parents=True, exist_ok=True)
    good = {"ip": "127.77.0.9", "ports": [{"port": 80, "target": 8080}], "backends": {}}
    try:
        lb._write_config({"ml.web": good, f"ml.{INJECTED}": good,
                          "ml.api": {**good, "ip": "127.0.0.1\nglobal"}})
        text = lb.cfg.read_text()
    finally:
        if made and lb.cfg.parent != lb.dir:
            shutil.rmtree(lb.cfg.parent, ignore_errors=True)
    assert "lua-load" not in text and text.count("\nglobal") == 0
    assert "frontend f_ml.web_80" in text and "ml.api" not in text


async def test_store_activities_refuse_forged_keys() -> None:
    rec = Recorder()
    acts = StoreActivities(rec, rec)  # type: ignore[arg-type]
    await refused(acts.write_job_status(JobStatusPatch("ml", "../web", UID)))
    await refused(acts.remove_object(RemoveObjectInput("secrets", "web", UID, "ml")))
    await refused(acts.remove_object(RemoveObjectInput("jobs", "web/../../x", UID, "ml")))
    await refused(acts.notify_cluster_jobs(ClusterJobsInput(
        "x' OR SkyShiftKind != '", ClusterEvent("x", "lost", ""))))
    svc = ServiceStoreActivities(rec)  # type: ignore[arg-type]
    await refused(svc.service_view(ServiceViewInput("ml", {"app": "web\n"})))
    await refused(svc.write_endpoints(EndpointsWrite("ml", "web", UID,
                                                     addresses={"local": ["x:1\nglobal"]})))
    links = LinkActivities(rec)  # type: ignore[arg-type]
    await refused(links.view_link(LinkRef("../l", UID)))
    await refused(ProbeActivities().probe_tcp(ProbeInput("10.0.0.1", 0)))
    await refused(ProbeActivities().probe_tcp(ProbeInput("a b", 80)))
    assert rec.calls == []


async def test_pipeline_schedule_and_provision_activities_refuse_forged_names() -> None:
    rec = Recorder()
    pipes = PipelineActivities(rec, rec)  # type: ignore[arg-type]
    await refused(pipes.start_step(StartStepInput("ml", "p", UID, "../s", 0, "pipeline/ml/p")))
    await refused(pipes.start_step(StartStepInput("ml", "p", UID, "s", 0, "owner\nx")))
    await refused(pipes.delete_owned(DeleteOwnedInput("ml", UID, "skyshift.io/pipeline",
                                                      "p\n", plural="jobs")))
    await refused(pipes.delete_owned(DeleteOwnedInput("ml", UID, "x", "p", plural="users")))
    sched = ScheduleActivities(rec, rec)  # type: ignore[arg-type]
    await refused(sched.sync_schedule(ScheduleRef("ml", "s\n", UID)))
    await refused(sched.start_run(StartRunInput("ml", "s", UID, "2026-01-01T00:00:00Z\n",
                                                "scheduled/ml/s")))
    await refused(sched.start_run(StartRunInput("ml", "../s", UID, "2026-01-01T00:00:00Z",
                                                "scheduled/ml/s")))
    await refused(sched.stop_run(ScheduleRunLook("ml", "Secret", "s", UID)))
    prov = ProvisioningActivities(rec, rec)  # type: ignore[arg-type]
    await refused(prov.provision_cluster(LaunchInput("c", UID, "sky-c; rm -rf /", "aws", 1)))
    await refused(prov.provision_cluster(LaunchInput("c", UID, "sky-c", "aws\n--yes", 1)))
    await refused(prov.unprovision_cluster(DownInput("c", UID, ["../x"])))
    assert rec.calls == []


async def test_a_valid_input_still_reaches_the_manager() -> None:
    """The checks let a real input through: the recorder sees the call (and fails it)."""
    rec = Recorder()
    acts = ServiceActivities(ClusterContext("local", rec))  # type: ignore[arg-type]
    with pytest.raises(Exception):  # noqa: B017 - the recorder refuses the call it records
        await ActivityEnvironment().run(lambda: acts.delete_service(
            DeleteServiceInput("local", "ml", "web")))
    assert rec.calls == ["delete_service"]


@pytest.mark.parametrize("change", [{"namespace": "ml\r"}, {"job_name": "web\tx"},
                                    {"job_uid": "u,1"}, {"job_uid": "u\x00"},
                                    {"resources": Resources(1, 0, 0, {"a100,gpu:x:9": 1})}])
def test_slurm_refuses_what_would_reach_its_comment_or_gres(change: dict[str, Any]) -> None:
    """Defense in depth in the adapter: a strict grammar instead of a list of characters."""
    from skyshift.compat.slurm.parse import validate_spec

    validate_spec(replica())
    with pytest.raises(Permanent):
        validate_spec(replica(**change))


def test_real_inputs_pass_the_checks() -> None:
    """What the lifecycles really send: a headless Kubernetes service, IPv6 and DNS backends,
    replicas with prefixed labels and an accelerator."""
    from skyshift.activities.trust import check_replica, check_service

    check_service(service(cluster_ip="None", type="LoadBalancer"))
    check_service(service(backends={"8080": ["[fd00::1]:8080", "pod-1.ml.svc:8080"]},
                          remote_backends={"8080": ["10.1.2.3:31000"]}))
    check_replica(replica(labels={"skyshift.io/team": "ml", "app": "web"}, image="ghcr.io/o/a:1",
                          resources=Resources(0.5, 512, 1, {"A100": 1}), envs={"X_Y": "1=2"}))
