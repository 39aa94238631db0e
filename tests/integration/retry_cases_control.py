"""Retry cases of the control task queue's activities: the object store, the scheduler,
provisioning, pipelines and schedules (see retry_harness for the property they are run under).

Each case builds its world in etcd, returns the call to retry and, for the activities that
decide or that other writers race, how the world moves on between the attempts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from skyshift.activities.orders import OrderActivities
from skyshift.activities.pipelines import PipelineActivities
from skyshift.activities.provisioning import ProvisioningActivities
from skyshift.activities.schedules import ScheduleActivities
from skyshift.activities.scheduling import SchedulingActivities
from skyshift.activities.service_store import ServiceStoreActivities
from skyshift.activities.store import StoreActivities
from skyshift.compat.types import ReplicaSpec
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import (
    ClusterEvent,
    ClusterJobsInput,
    ClusterStatusPatch,
    DequeueRequest,
    EnqueueRequest,
    JobRef,
    JobStatusPatch,
    PlaceBatchInput,
    QueueEntry,
    ReadJobInput,
    RemoveObjectInput,
    SubmitInput,
    SubmitOrder,
    WithdrawOrders,
    replica_name,
)
from skyshift.contract.links import LinkRef, LinkStatusPatch
from skyshift.contract.names import job_workflow_id, order_name
from skyshift.contract.pipelines import (
    OWNER_UID_ANNOTATION,
    PIPELINE_LABEL,
    SCHEDULE_LABEL,
    DeleteOwnedInput,
    PipelineStatusPatch,
    ReadJobsInput,
    ReadPipelineInput,
    ScheduleRef,
    ScheduleRunLook,
    StartRunInput,
    StartStepInput,
    StepState,
)
from skyshift.contract.provision import DownInput, LaunchInput, UsageInput, sky_name
from skyshift.contract.services import (
    EndpointsWrite,
    ReadServiceInput,
    ServiceStatusPatch,
    ServiceViewInput,
)
from skyshift.models.quantity import Resources
from skyshift.scheduler.types import JobRequest
from tests.integration.provision_fake import FileProvisioner
from tests.integration.retry_harness import Prepared, World
from tests.integration.retry_world import (
    NS,
    add_cluster,
    add_job,
    add_object,
    mark_deleting,
    set_allocatable,
    uid,
)

Case = Callable[[World], Awaitable[Prepared]]
Obj = dict[str, Any]


# ---- the object store ------------------------------------------------------------------------

async def write_job_status(w: World) -> Prepared:
    """The job workflow's patch after a spec reload (observed generation, placement) while
    the skylet counts the replica Running: a retry must not take the phase or counts back."""
    job = await add_job(w.store, "wjs", phase="Scheduled", placement={"c1": 1})
    acts = StoreActivities(w.store, w.client)  # type: ignore[arg-type]
    patch = JobStatusPatch(NS, "wjs", uid(job), observed_generation=1, placement={"c1": 1},
                           workflow_id="job/default/wjs")

    async def skylet_counts() -> None:
        def mutate(obj: Obj) -> Obj:
            obj["status"]["replicaStatus"] = {"c1": {"Running": 1}}
            obj["status"]["phase"] = "Running"
            return obj

        await w.store.guaranteed_update("jobs", "wjs", NS, mutate)

    return Prepared(acts.write_job_status, patch, move_on=skylet_counts)


async def read_job(w: World) -> Prepared:
    job = await add_job(w.store, "rj")
    acts = StoreActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.read_job, ReadJobInput(NS, "rj", uid(job)))


async def remove_object(w: World) -> Prepared:
    job = await add_job(w.store, "ro")
    await mark_deleting(w.store, "jobs", "ro")
    acts = StoreActivities(w.store, w.client)  # type: ignore[arg-type]

    async def reused() -> None:  # a user creates a new job of the same name
        await add_job(w.store, "ro")

    # the result says "removed now" or "already gone"; the workflow ends either way, and what
    # a user checks is the object: the newer job of the same name must stay
    return Prepared(acts.remove_object, RemoveObjectInput("jobs", "ro", uid(job), NS),
                    move_on=reused, same=lambda r: None)


async def write_cluster_status(w: World) -> Prepared:
    cluster = await add_cluster(w.store, "wcs", phase="Init")
    acts = StoreActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.write_cluster_status,
                    ClusterStatusPatch("wcs", uid(cluster), "Error", "unreachable"))


async def notify_cluster_jobs(w: World) -> Prepared:
    w.client.running = [job_workflow_id(NS, "a"), job_workflow_id(NS, "b")]
    acts = StoreActivities(w.store, w.client)  # type: ignore[arg-type]
    event = ClusterEvent("c1", "lost", "c1 unreachable")
    inp = ClusterJobsInput("c1", event, skip=[job_workflow_id(NS, "b")])

    async def finished() -> None:  # job a ended meanwhile: a retry tells no one new
        w.client.running = [job_workflow_id(NS, "b")]

    # the count is of jobs told by this attempt; what matters is who was told what
    return Prepared(acts.notify_cluster_jobs, inp, move_on=finished, same=lambda r: None)


async def post_submit_order(w: World) -> Prepared:
    job = await add_job(w.store, "pso")
    ref = JobRef(NS, "pso", uid(job))
    spec = ReplicaSpec(replica_name("pso", uid(job), 0), "pso", NS, uid(job), 0, run="true")
    order = SubmitOrder(order_name(uid(job), 1), SubmitInput(ref, "c1", [spec]))
    # the retry finds its order written: one order, as after one attempt
    return Prepared(OrderActivities(w.store).post_submit_order, order)


async def withdraw_submit_orders(w: World) -> Prepared:
    job = await add_job(w.store, "wso")
    ref = JobRef(NS, "wso", uid(job))
    acts = OrderActivities(w.store)
    for n in (1, 2):
        spec = ReplicaSpec(replica_name("wso", uid(job), 0), "wso", NS, uid(job), 0, run="true",
                           attempt=n - 1)
        await acts.post_submit_order(SubmitOrder(order_name(uid(job), n),
                                                 SubmitInput(ref, "c1", [spec])))
    # the result counts the orders this attempt removed (2, then 0); what a skylet sees is
    # that none is left
    return Prepared(acts.withdraw_submit_orders, WithdrawOrders("c1", uid(job)),
                    same=lambda r: None)


# ---- services and links in etcd --------------------------------------------------------------

SERVICE_SPEC = {"type": "ClusterIP", "selector": {"app": "web"},
                "ports": [{"port": 80, "target_port": 8080}]}


async def read_service(w: World) -> Prepared:
    svc = await add_object(w.store, "services", "Service", "rs", SERVICE_SPEC)
    acts = ServiceStoreActivities(w.store)
    return Prepared(acts.read_service, ReadServiceInput(NS, "rs", uid(svc)))


async def service_view(w: World) -> Prepared:
    await add_cluster(w.store, "c1")
    await add_job(w.store, "web", labels={"app": "web"}, placement={"c1": 1},
                  replicaStatus={"c1": {"Running": 1}})
    acts = ServiceStoreActivities(w.store)
    return Prepared(acts.service_view, ServiceViewInput(NS, {"app": "web"}))


async def write_service_status(w: World) -> Prepared:
    svc = await add_object(w.store, "services", "Service", "wss", SERVICE_SPEC)
    acts = ServiceStoreActivities(w.store)
    patch = ServiceStatusPatch(NS, "wss", uid(svc), phase="Ready", cluster="c1",
                               cluster_ip="10.96.0.10", observed_generation=1)
    return Prepared(acts.write_service_status, patch)


async def write_endpoints(w: World) -> Prepared:
    svc = await add_object(w.store, "services", "Service", "we", SERVICE_SPEC)
    acts = ServiceStoreActivities(w.store)
    write = EndpointsWrite(NS, "we", uid(svc), {"app": "web"}, "c1", {"c1": 2})
    return Prepared(acts.write_endpoints, write)


async def view_link(w: World) -> Prepared:
    from skyshift.activities.links import LinkActivities

    await add_cluster(w.store, "la")
    await add_cluster(w.store, "lb")
    link = await add_object(w.store, "links", "Link", "vl", {
        "source_cluster": "la", "target_cluster": "lb",
        "gateway": {"address": "127.0.0.1", "port": 9}}, ns=None)
    return Prepared(LinkActivities(w.store).view_link, LinkRef("vl", uid(link)))


async def write_link_status(w: World) -> Prepared:
    from skyshift.activities.links import LinkActivities

    link = await add_object(w.store, "links", "Link", "wl", {
        "source_cluster": "la", "target_cluster": "lb"}, ns=None)
    patch = LinkStatusPatch("wl", uid(link), "Ready", "", 1, "link/wl")
    return Prepared(LinkActivities(w.store).write_link_status, patch)


# ---- the scheduler ---------------------------------------------------------------------------

def entry(job: Obj, seq: int = 1, cpus: float = 1) -> QueueEntry:
    meta = job["metadata"]
    key = f"{meta['namespace']}/{meta['name']}"
    request = JobRequest(key, meta["uid"], meta["namespace"], {}, 0, 0.0, 1, Resources(cpus))
    return QueueEntry(EnqueueRequest(job_workflow_id(meta["namespace"], meta["name"]), seq,
                                     request))


async def enqueue_job(w: World) -> Prepared:
    job = await add_job(w.store, "eq")
    acts = SchedulingActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.enqueue_job, entry(job).req)


async def dequeue_job(w: World) -> Prepared:
    job = await add_job(w.store, "dq")
    acts = SchedulingActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.dequeue_job, DequeueRequest("default/dq", uid(job)))


async def place_batch(w: World) -> Prepared:
    """Issue 32's world: lc2 has room for the job and ``local`` has none, so the first attempt
    places it on lc2 (status.placement {lc2: 1}, signal placed seq=1 {lc2: 1}). Moving on: lc2
    fills up (its skylet writes allocatable 0.5 cpu) and ``local`` frees 4 cpus. A retry must
    repeat {lc2: 1}, not decide {local: 1} from the newer capacity."""
    await add_cluster(w.store, "lc2", cpus=4)
    await add_cluster(w.store, "local", cpus=0.5)
    job = await add_job(w.store, "pb", cpus=1)
    acts = SchedulingActivities(w.store, w.client)  # type: ignore[arg-type]

    async def capacity_changed() -> None:
        await set_allocatable(w.store, "lc2", 0.5)
        await set_allocatable(w.store, "local", 4)

    return Prepared(acts.place_batch, PlaceBatchInput([entry(job)]), move_on=capacity_changed)


# ---- provisioning ----------------------------------------------------------------------------

PROVISION = {"infra": "aws", "cpus": 2, "memory": 4096, "nodes": {"min": 1, "max": 3}}


async def provisioning(w: World) -> tuple[ProvisioningActivities, FileProvisioner, Obj]:
    provisioner = FileProvisioner.create(w.tmp / "sky.json")
    # the SkyPilot clusters that exist (the fake's launch counter counts calls, not clusters)
    w.extra.append(lambda: {n: (c["state"], c["infra"], c["nodes"])
                            for n, c in provisioner.up().items()})
    cluster = await add_cluster(w.store, "pc", phase="Provisioning", provision=PROVISION)
    return ProvisioningActivities(w.store, provisioner), provisioner, cluster


async def provision_cluster(w: World) -> Prepared:
    """Moving on: aws has no capacity left. The retry adopts the SkyPilot cluster its first
    attempt brought UP (same deterministic name) instead of launching, or failing, anew."""
    acts, provisioner, cluster = await provisioning(w)
    sky = sky_name("pc", uid(cluster), 0)
    inp = LaunchInput("pc", uid(cluster), sky, "aws", 1, cpus=2, memory_mb=4096)
    # status.provision.attempts, the progress messages and the ETA say which attempt this is,
    # and so does LaunchResult.attempts (the workflow adds it to its count): honest per attempt.
    # What must not differ: the SkyPilot clusters (one, adopted) and the nodes launched.
    async def capacity_gone() -> None:
        provisioner.script(capacity={"aws": -1})

    return Prepared(acts.provision_cluster, inp, move_on=capacity_gone,
                    same=lambda r: (r.sky_cluster, r.nodes),
                    ignore=("status.message", "status.provision.attempts",
                            "status.provision.message", "status.provision.eta"))


async def unprovision_cluster(w: World) -> Prepared:
    acts, provisioner, cluster = await provisioning(w)
    sky = sky_name("pc", uid(cluster), 0)
    launch = LaunchInput("pc", uid(cluster), sky, "aws", 1, cpus=2, memory_mb=4096)
    provisioner.launch(_launch_request(launch), lambda _: None)
    return Prepared(acts.unprovision_cluster, DownInput("pc", uid(cluster), [sky]))


def _launch_request(inp: LaunchInput) -> Any:
    from skyshift.contract.provision import launch_request

    return launch_request(inp)


async def cluster_usage(w: World) -> Prepared:
    acts, _, _ = await provisioning(w)
    await add_job(w.store, "u1", placement={"pc": 2}, replicaStatus={"pc": {"Running": 2}})
    return Prepared(acts.cluster_usage, UsageInput("pc"))


# ---- pipelines -------------------------------------------------------------------------------

STEP = {"run": "echo a", "resources": {"cpus": 0.25}, "restartPolicy": "Never"}


async def add_pipeline(w: World, name: str) -> Obj:
    return await add_object(w.store, "pipelines", "Pipeline", name,
                            {"steps": [{"name": "a", "job": dict(STEP)}]})


async def owned_job(w: World, name: str, label: str, owner: str, owner_uid: str,
                    phase: str = "Succeeded") -> Obj:
    job = await add_job(w.store, name, labels={label: owner})

    def mutate(obj: Obj) -> Obj:
        obj["metadata"]["annotations"] = {OWNER_UID_ANNOTATION: owner_uid}
        obj["status"]["phase"] = phase
        return obj

    out: Obj = await w.store.guaranteed_update("jobs", name, NS, mutate)
    assert job
    return out


async def start_step(w: World) -> Prepared:
    pipeline = await add_pipeline(w, "pl")
    acts = PipelineActivities(w.store, w.client)  # type: ignore[arg-type]
    inp = StartStepInput(NS, "pl", uid(pipeline), "a", 1, "pipeline/default/pl")

    async def spec_changed() -> None:  # the user edits the step meanwhile
        def mutate(obj: Obj) -> Obj:
            obj["spec"]["steps"][0]["job"]["run"] = "echo changed"
            obj["metadata"]["generation"] += 1
            return obj

        await w.store.guaranteed_update("pipelines", "pl", NS, mutate)

    return Prepared(acts.start_step, inp, move_on=spec_changed)


async def read_step_jobs(w: World) -> Prepared:
    job = await add_job(w.store, "pl-a", phase="Running")
    acts = PipelineActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.read_step_jobs, ReadJobsInput(NS, {"pl-a": uid(job), "pl-b": "x"}))


async def delete_owned(w: World) -> Prepared:
    pipeline = await add_pipeline(w, "pd")
    for step in ("a", "b"):
        await owned_job(w, f"pd-{step}", PIPELINE_LABEL, "pd", uid(pipeline))
    acts = PipelineActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.delete_owned, DeleteOwnedInput(NS, uid(pipeline), PIPELINE_LABEL, "pd"))


async def write_pipeline_status(w: World) -> Prepared:
    pipeline = await add_pipeline(w, "pw")
    acts = PipelineActivities(w.store, w.client)  # type: ignore[arg-type]
    patch = PipelineStatusPatch(NS, "pw", uid(pipeline), "Running", "",
                                {"a": StepState("Running", "pw-a", "u", 1)},
                                "pipeline/default/pw", started=True)
    return Prepared(acts.write_pipeline_status, patch)


async def read_pipeline(w: World) -> Prepared:
    pipeline = await add_pipeline(w, "pr")
    acts = PipelineActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.read_pipeline, ReadPipelineInput(NS, "pr", uid(pipeline)))


# ---- schedules -------------------------------------------------------------------------------

def schedule_spec(**spec: Any) -> Obj:
    return {"interval": "1h", "jobTemplate": {"metadata": {"labels": {}}, "spec": dict(STEP)},
            **spec}


async def sync_schedule(w: World) -> Prepared:
    sched = await add_object(w.store, "schedules", "Schedule", "ss", schedule_spec())
    acts = ScheduleActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.sync_schedule, ScheduleRef(NS, "ss", uid(sched)))


async def drop_schedule(w: World) -> Prepared:
    sched = await add_object(w.store, "schedules", "Schedule", "ds", schedule_spec())
    acts = ScheduleActivities(w.store, w.client)  # type: ignore[arg-type]
    await acts.sync_schedule(ScheduleRef(NS, "ds", uid(sched)))
    await mark_deleting(w.store, "schedules", "ds")
    for run in ("ds-20300101-000000", "ds-20300101-010000"):
        await owned_job(w, run, SCHEDULE_LABEL, "ds", uid(sched))
    return Prepared(acts.drop_schedule, ScheduleRef(NS, "ds", uid(sched)))


async def start_run(w: World) -> Prepared:
    """maxActiveRuns 1: the first attempt starts the 00:00 run. Moving on: the 01:00 run
    started too (a backfill, or AllowAll) and is still running. The retry of the 00:00 start
    must take the run it created, not count the 01:00 run against it and say "skipped"."""
    sched = await add_object(w.store, "schedules", "Schedule", "sr",
                             schedule_spec(maxActiveRuns=1, overlapPolicy="AllowAll"))
    acts = ScheduleActivities(w.store, w.client)  # type: ignore[arg-type]
    inp = StartRunInput(NS, "sr", uid(sched), "2030-01-01T00:00:00Z", "run/default/sr/0")

    async def next_run() -> None:
        await owned_job(w, "sr-20300101-010000", SCHEDULE_LABEL, "sr", uid(sched), "Running")

    return Prepared(acts.start_run, inp, move_on=next_run)


async def read_run(w: World) -> Prepared:
    job = await add_job(w.store, "rr-20300101-000000", phase="Succeeded")
    acts = ScheduleActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.read_run, ScheduleRunLook(NS, "Job", "rr-20300101-000000", uid(job)))


async def stop_run(w: World) -> Prepared:
    sched = await add_object(w.store, "schedules", "Schedule", "st", schedule_spec())
    job = await owned_job(w, "st-20300101-000000", SCHEDULE_LABEL, "st", uid(sched), "Running")
    acts = ScheduleActivities(w.store, w.client)  # type: ignore[arg-type]
    return Prepared(acts.stop_run, ScheduleRunLook(NS, "Job", "st-20300101-000000", uid(job)))


#: the cases whose world moves on between the attempts (the others: reads, and writes whose
#: input names everything they touch, so nothing another writer does changes what they do)
CONTROL_MOVES_ON = {act.WRITE_JOB_STATUS, act.REMOVE_OBJECT, act.NOTIFY_CLUSTER_JOBS,
                    act.PLACE_BATCH, act.PROVISION_CLUSTER, act.START_STEP, act.START_RUN}
CONTROL_CASES: dict[str, Case] = {
    act.WRITE_JOB_STATUS: write_job_status, act.READ_JOB: read_job,
    act.REMOVE_OBJECT: remove_object, act.WRITE_CLUSTER_STATUS: write_cluster_status,
    act.NOTIFY_CLUSTER_JOBS: notify_cluster_jobs, act.READ_SERVICE: read_service,
    act.SERVICE_VIEW: service_view, act.WRITE_SERVICE_STATUS: write_service_status,
    act.WRITE_ENDPOINTS: write_endpoints, act.VIEW_LINK: view_link,
    act.WRITE_LINK_STATUS: write_link_status,
    act.ENQUEUE_JOB: enqueue_job, act.DEQUEUE_JOB: dequeue_job, act.PLACE_BATCH: place_batch,
    act.PROVISION_CLUSTER: provision_cluster, act.UNPROVISION_CLUSTER: unprovision_cluster,
    act.CLUSTER_USAGE: cluster_usage,
    act.START_STEP: start_step, act.READ_STEP_JOBS: read_step_jobs,
    act.DELETE_OWNED: delete_owned, act.WRITE_PIPELINE_STATUS: write_pipeline_status,
    act.READ_PIPELINE: read_pipeline,
    act.SYNC_SCHEDULE: sync_schedule, act.DROP_SCHEDULE: drop_schedule,
    act.START_RUN: start_run, act.READ_RUN: read_run, act.STOP_RUN: stop_run,
    act.POST_SUBMIT_ORDER: post_submit_order, act.WITHDRAW_SUBMIT_ORDERS: withdraw_submit_orders,
}
