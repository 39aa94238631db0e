"""Retry cases of a cluster's task queue (``skylet-<cluster>``): replicas on the real ``local``
adapter, services on a fake below the adapter boundary, and the TCP probe against a real socket
(see retry_harness for the property they are run under).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.links import ProbeActivities
from skyshift.activities.services import ServiceActivities
from skyshift.activities.sync import SkyletWithSync, SyncConfig
from skyshift.compat.local.adapter import LocalManager
from skyshift.compat.types import ReplicaSpec, ServicePort, ServiceSpec
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import (
    DeleteReplicasInput,
    JobRef,
    ReplicaOpInput,
    SubmitInput,
    SyncInput,
    TeardownInput,
    replica_name,
)
from skyshift.contract.links import ProbeInput
from skyshift.contract.services import AddressesInput, ApplyServiceInput, DeleteServiceInput
from skyshift.models.quantity import Resources
from tests.fixtures.compat import local_config, wait_state
from tests.integration.retry_harness import Prepared, ServiceManagerFake, World
from tests.integration.retry_world import NS, add_cluster, add_job, mark_deleting, uid

Case = Callable[[World], Awaitable[Prepared]]
CLUSTER = "c1"


def skylet(w: World) -> tuple[SkyletWithSync, LocalManager]:
    """The skylet of cluster c1 as the skylet manager builds it, on a real local cluster."""
    manager = LocalManager(CLUSTER, local_config(w.tmp / "cluster", grace_period=0.5))
    w.clusters.append(manager)
    ctx = ClusterContext(CLUSTER, manager)
    acts = SkyletWithSync(ctx, w.store, w.client, sync=SyncConfig(interval=0.2))  # type: ignore[arg-type]
    return acts, manager


def spec_of(job: dict[str, object], run: str = "sleep 30", rank: int = 0) -> ReplicaSpec:
    meta = job["metadata"]
    assert isinstance(meta, dict)
    name, job_uid = str(meta["name"]), str(meta["uid"])
    return ReplicaSpec(name=replica_name(name, job_uid, rank), job_name=name, namespace=NS,
                       job_uid=job_uid, rank=rank, run=run, resources=Resources(0.25, 16))


def submit_input(job: dict[str, object], run: str = "sleep 30") -> SubmitInput:
    meta = job["metadata"]
    assert isinstance(meta, dict)
    return SubmitInput(JobRef(NS, str(meta["name"]), str(meta["uid"])), CLUSTER,
                       [spec_of(job, run)])


async def started(manager: LocalManager, job: dict[str, object]) -> None:
    await wait_state(manager, spec_of(job).name, "Running")


async def submit_replicas(w: World) -> Prepared:
    acts, manager = skylet(w)
    job = await add_job(w.store, "sub", placement={CLUSTER: 1})
    other = await add_job(w.store, "other", placement={CLUSTER: 1})

    async def moved() -> None:  # the replica started, and another job's replica arrived
        await started(manager, job)
        await acts.submit_replicas(submit_input(other))
        await started(manager, other)

    return Prepared(acts.submit_replicas, submit_input(job), move_on=moved)


async def delete_replicas(w: World) -> Prepared:
    acts, manager = skylet(w)
    job = await add_job(w.store, "del", placement={CLUSTER: 1})
    other = await add_job(w.store, "keep", placement={CLUSTER: 1})
    await acts.submit_replicas(submit_input(job))
    await acts.submit_replicas(submit_input(other))

    async def moved() -> None:
        await started(manager, other)

    inp = DeleteReplicasInput(CLUSTER, uid(job), [spec_of(job).name])
    return Prepared(acts.delete_replicas, inp, move_on=moved)


async def teardown_cluster(w: World) -> Prepared:
    """The Cluster is being deleted with replicas of two jobs on it. Moving on: the skylet
    process was replaced (a new ClusterContext on the same cluster), so what the first attempt
    deleted and forgot is known to no one but etcd; the retry must still tell both jobs."""
    acts, _ = skylet(w)
    await add_cluster(w.store, CLUSTER)
    await mark_deleting(w.store, "clusters", CLUSTER, None)
    jobs = [await add_job(w.store, n, placement={CLUSTER: 1}) for n in ("ta", "tb")]
    for job in jobs:
        await acts.submit_replicas(submit_input(job))

    async def new_skylet() -> None:
        manager = LocalManager(CLUSTER, local_config(w.tmp / "cluster", grace_period=0.5))
        w.clusters.append(manager)
        acts.ctx = ClusterContext(CLUSTER, manager)

    return Prepared(acts.teardown_cluster, TeardownInput(CLUSTER), move_on=new_skylet)


async def replica_op(w: World) -> Prepared:
    acts, manager = skylet(w)
    job = await add_job(w.store, "logs", placement={CLUSTER: 1})
    await acts.submit_replicas(submit_input(job, run="echo hello"))
    await wait_state(manager, spec_of(job).name, "Succeeded")
    inp = ReplicaOpInput("logs", [CLUSTER], [spec_of(job).name])
    return Prepared(acts.replica_op, inp)


async def sync_cluster(w: World) -> Prepared:
    acts, manager = skylet(w)
    cluster = await add_cluster(w.store, CLUSTER, phase="Init")
    job = await add_job(w.store, "synced", placement={CLUSTER: 1})
    await acts.submit_replicas(submit_input(job))
    await started(manager, job)
    inp = SyncInput(CLUSTER, uid(cluster), phase="Init", max_duration=2.0)
    # lastHeartbeat is the time of the look; everything else must be what the first saw
    return Prepared(acts.sync_cluster, inp, ignore=("status.lastHeartbeat",))


def service_acts(w: World) -> tuple[ServiceActivities, ServiceManagerFake]:
    fake = ServiceManagerFake()
    w.services.append(fake)
    return ServiceActivities(ClusterContext(CLUSTER, fake)), fake  # type: ignore[arg-type]


SERVICE = ServiceSpec("web", NS, selector={"app": "web"}, ports=[ServicePort(80, 8080)])


async def apply_service(w: World) -> Prepared:
    acts, _ = service_acts(w)
    return Prepared(acts.apply_service, ApplyServiceInput(CLUSTER, SERVICE))


async def delete_service(w: World) -> Prepared:
    acts, fake = service_acts(w)
    await fake.apply_service(SERVICE)
    return Prepared(acts.delete_service, DeleteServiceInput(CLUSTER, NS, "web"))


async def replica_addresses(w: World) -> Prepared:
    acts, manager = skylet(w)
    job = await add_job(w.store, "addr", placement={CLUSTER: 1})
    await acts.submit_replicas(submit_input(job))
    await started(manager, job)
    service = ServiceActivities(acts.ctx)
    return Prepared(service.replica_addresses, AddressesInput(CLUSTER, [uid(job)], [8080]))


async def probe_tcp(w: World) -> Prepared:
    server = await asyncio.start_server(lambda r, wr: wr.close(), "127.0.0.1", 0)

    async def stop() -> None:
        server.close()
        await server.wait_closed()

    w.cleanup.append(stop)
    port = server.sockets[0].getsockname()[1]
    return Prepared(ProbeActivities().probe_tcp, ProbeInput("127.0.0.1", port, 2.0))


SKYLET_MOVES_ON = {act.SUBMIT_REPLICAS, act.DELETE_REPLICAS, act.TEARDOWN_CLUSTER}
SKYLET_CASES: dict[str, Case] = {
    act.SUBMIT_REPLICAS: submit_replicas, act.DELETE_REPLICAS: delete_replicas,
    act.TEARDOWN_CLUSTER: teardown_cluster, act.REPLICA_OP: replica_op,
    act.SYNC_CLUSTER: sync_cluster, act.APPLY_SERVICE: apply_service,
    act.REPLICA_ADDRESSES: replica_addresses, act.DELETE_SERVICE: delete_service,
    act.PROBE_TCP: probe_tcp,
}
