"""ServiceWorkflow on the time-skipping test server with same-name fake activities: which cluster
it picks, what it writes, how it fails on a cluster without services, and how it tears down."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from skyshift.compat.services import unsupported
from skyshift.compat.types import ServicePort, ServiceStatus
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import DeleteRequest, RemoveObjectInput, SpecChanged
from skyshift.contract.names import (
    CONTROL_QUEUE,
    SIG_DELETE,
    SIG_ENSURE,
    SIG_REFRESH,
    SIG_SPEC,
    service_workflow_id,
    skylet_queue,
)
from skyshift.contract.services import (
    AddressesInput,
    AddressesResult,
    ApplyServiceInput,
    ApplyServiceResult,
    DeleteServiceInput,
    EndpointsWrite,
    ReadServiceInput,
    ReadServiceResult,
    Refresh,
    ServiceConfig,
    ServiceInput,
    ServiceState,
    ServiceStatusPatch,
    ServiceTemplate,
    ServiceView,
    ServiceViewInput,
)
from skyshift.workflows.service import ServiceWorkflow
from tests.workflows.fakes import STARTED, unique

pytestmark = pytest.mark.asyncio


@dataclass
class ServiceFakes:
    calls: list[tuple[str, Any]] = field(default_factory=list)
    view: ServiceView = field(default_factory=ServiceView)
    no_services: set[str] = field(default_factory=set)  # clusters answering Unsupported
    read_result: ReadServiceResult | None = None
    ip: int = 0
    addresses: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # cluster -> port

    def of(self, name: str) -> list[Any]:
        return [p for n, p in self.calls if n == name]

    async def wait_for(self, name: str, count: int = 1, timeout: float = 30.0) -> list[Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.of(name)) < count:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{name} called {len(self.of(name))} times, want {count}: "
                                     f"{[n for n, _ in self.calls]}")
            await asyncio.sleep(0.02)
        return self.of(name)

    @activity.defn(name=act.SERVICE_VIEW)
    async def service_view(self, inp: ServiceViewInput) -> ServiceView:
        self.calls.append(("service_view", inp))
        return self.view

    @activity.defn(name=act.READ_SERVICE)
    async def read_service(self, inp: ReadServiceInput) -> ReadServiceResult:
        self.calls.append(("read_service", inp))
        assert self.read_result is not None
        return self.read_result

    @activity.defn(name=act.WRITE_SERVICE_STATUS)
    async def write_service_status(self, patch: ServiceStatusPatch) -> bool:
        self.calls.append(("write_service_status", patch))
        return True

    @activity.defn(name=act.WRITE_ENDPOINTS)
    async def write_endpoints(self, w: EndpointsWrite) -> bool:
        self.calls.append(("write_endpoints", w))
        return True

    @activity.defn(name=act.REMOVE_OBJECT)
    async def remove_object(self, inp: RemoveObjectInput) -> bool:
        self.calls.append(("remove_object", inp))
        return True

    @activity.defn(name=act.APPLY_SERVICE)
    async def apply_service(self, inp: ApplyServiceInput) -> ApplyServiceResult:
        self.calls.append(("apply_service", inp))
        if inp.cluster in self.no_services:
            err = unsupported("slurm")
            raise ApplicationError(str(err), type="Unsupported", non_retryable=True)
        self.ip += 1
        return ApplyServiceResult.of(ServiceStatus(inp.spec.name, inp.spec.namespace,
                                                   cluster_ip=f"10.0.0.{self.ip}"))

    @activity.defn(name=act.DELETE_SERVICE)
    async def delete_service(self, inp: DeleteServiceInput) -> None:
        self.calls.append(("delete_service", inp))

    @activity.defn(name=act.REPLICA_ADDRESSES)
    async def replica_addresses(self, inp: AddressesInput) -> AddressesResult:
        self.calls.append(("replica_addresses", inp))
        return AddressesResult(dict(self.addresses.get(inp.cluster, {})))

    def control(self) -> list[Any]:
        return [self.service_view, self.read_service, self.write_service_status,
                self.write_endpoints, self.remove_object]

    def skylet(self) -> list[Any]:
        return [self.apply_service, self.delete_service, self.replica_addresses]


@asynccontextmanager
async def workers(client: Client, fakes: ServiceFakes, clusters: list[str]) -> AsyncIterator[str]:
    queue = unique(f"{CONTROL_QUEUE}-svc-")
    ws = [Worker(client, task_queue=queue, workflows=[ServiceWorkflow],
                 activities=fakes.control())]
    ws += [Worker(client, task_queue=skylet_queue(c), activities=fakes.skylet())
           for c in clusters]
    async with AsyncExitStack() as stack:
        for w in ws:
            await stack.enter_async_context(w)
        yield queue


def service(primary: str = "", refresh: float = 15.0, history_limit: int = 1000) -> ServiceInput:
    return ServiceInput(
        namespace="ns", name=unique("s"), uid=str(uuid.uuid4()), generation=1,
        template=ServiceTemplate(selector={"app": "web"}, ports=[ServicePort(80, 8080)],
                                 primary_cluster=primary),
        config=ServiceConfig(refresh=refresh, history_limit=history_limit),
    )


async def start(client: Client, queue: str,
                inp: ServiceInput) -> WorkflowHandle[ServiceWorkflow, str]:
    h = await client.start_workflow(
        ServiceWorkflow.run, inp, id=service_workflow_id(inp.namespace, inp.name),
        task_queue=queue,
    )
    STARTED.append(h)
    return h


async def last_status(fakes: ServiceFakes, phase: str, timeout: float = 30.0) -> ServiceStatusPatch:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        writes = fakes.of("write_service_status")
        if writes and writes[-1].phase == phase:
            return writes[-1]  # type: ignore[no-any-return]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no status {phase}: {writes[-1:] or 'none'}; calls: "
                                 f"{[n for n, _ in fakes.calls]}")
        await asyncio.sleep(0.02)


async def test_ready_on_the_cluster_with_most_replicas(workflow_env: WorkflowEnvironment) -> None:
    a, b = unique("a"), unique("b")
    fakes = ServiceFakes(view=ServiceView(placed={a: 1, b: 3}, running={a: 1, b: 2},
                                          clusters={a: "Ready", b: "Ready"}, jobs=2))
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = service()
        h = await start(workflow_env.client, q, inp)
        ready = await last_status(fakes, "Ready")
        assert ready.cluster == b and ready.cluster_ip == "10.0.0.1"
        assert ready.workflow_id == f"service/ns/{inp.name}"
        [applied] = fakes.of("apply_service")
        assert applied.cluster == b and applied.spec.selector == {"app": "web"}
        assert applied.spec.ports == [ServicePort(80, 8080)]
        ep = fakes.of("write_endpoints")[-1]
        assert ep.endpoints == {a: 1, b: 2} and ep.primary_cluster == b
        state = await h.query(ServiceWorkflow.state)
        assert state.phase == "Ready" and state.cluster == b

        # replicas now run elsewhere too: a refresh updates the endpoints, not the cluster
        fakes.view = ServiceView(placed={a: 5, b: 1}, running={a: 5, b: 1},
                                 clusters={a: "Ready", b: "Ready"}, jobs=2)
        await h.signal(SIG_REFRESH, Refresh())
        await fakes.wait_for("write_endpoints", 2)
        assert fakes.of("write_endpoints")[-1].endpoints == {a: 5, b: 1}
        assert len(fakes.of("apply_service")) == 1  # sticky while replicas stay on b
        # nothing changed: a timer-driven refresh writes nothing
        writes = len(fakes.calls)
        await workflow_env.sleep(16)
        await fakes.wait_for("service_view", 3)
        await asyncio.sleep(0.2)
        assert [n for n, _ in fakes.calls[writes:]] == ["service_view"]


async def test_pending_without_matching_replicas_then_ready(
    workflow_env: WorkflowEnvironment,
) -> None:
    a = unique("a")
    fakes = ServiceFakes(view=ServiceView(clusters={a: "Ready"}))
    async with workers(workflow_env.client, fakes, [a]) as q:
        h = await start(workflow_env.client, q, service(refresh=5))
        pending = await last_status(fakes, "Pending")
        assert "app=web" in (pending.message or "") and "waiting" in (pending.message or "")
        assert not fakes.of("apply_service")
        fakes.view = ServiceView(placed={a: 1}, running={a: 1}, clusters={a: "Ready"}, jobs=1)
        await workflow_env.sleep(6)  # the refresh timer
        ready = await last_status(fakes, "Ready")
        assert ready.cluster == a
        assert (await h.query(ServiceWorkflow.state)).endpoints == {a: 1}


async def test_cluster_without_services_fails_once_with_the_message(
    workflow_env: WorkflowEnvironment,
) -> None:
    slurm, k8 = unique("slurm"), unique("k8")
    fakes = ServiceFakes(view=ServiceView(placed={slurm: 2}, running={slurm: 2},
                                          clusters={slurm: "Ready", k8: "Ready"}, jobs=1),
                         no_services={slurm})
    async with workers(workflow_env.client, fakes, [slurm, k8]) as q:
        inp = service(primary=slurm, refresh=5)
        h = await start(workflow_env.client, q, inp)
        failed = await last_status(fakes, "Failed")
        assert "Slurm clusters have no services" in (failed.message or "")
        assert "Kubernetes" in (failed.message or "")
        assert failed.cluster == ""
        # several refreshes: no retry of the same spec. Not a multiple of the 5 s refresh: the
        # time-skipping test server fails a workflow task whose local activities run while a
        # timer fires ("invalid history builder state for action") and never retries it, which
        # the spec-change signal below would otherwise hit about one run in three.
        await workflow_env.sleep(17.5)
        await fakes.wait_for("service_view", 3)
        assert len(fakes.of("apply_service")) == 1
        # a spec change (to a cluster with services) tries again and succeeds
        fakes.read_result = ReadServiceResult(True, 2, ServiceTemplate(
            selector={"app": "web"}, ports=[ServicePort(80)], primary_cluster=k8))
        await h.signal(SIG_SPEC, SpecChanged(2))
        ready = await last_status(fakes, "Ready")
        assert ready.cluster == k8 and ready.observed_generation == 2
        # deletion: no delete on the Slurm cluster (nothing was created there)
        await h.signal(SIG_DELETE, DeleteRequest(inp.uid))
        assert await h.result() == "Deleted"
    assert [d.cluster for d in fakes.of("delete_service")] == [k8]


async def test_delete_tears_down_then_removes_object(workflow_env: WorkflowEnvironment) -> None:
    a = unique("a")
    fakes = ServiceFakes(view=ServiceView(placed={a: 1}, running={a: 1}, clusters={a: "Ready"},
                                          jobs=1))
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = service()
        h = await start(workflow_env.client, q, inp)
        await last_status(fakes, "Ready")
        await h.signal(SIG_DELETE, DeleteRequest("some-other-uid"))  # not this object: ignored
        await h.signal(SIG_ENSURE, ServiceInput(inp.namespace, inp.name, inp.uid, 1,
                                                deleting=True))
        assert await h.result() == "Deleted"
    names = [n for n, _ in fakes.calls]
    tail = names[names.index("delete_service"):]
    assert tail == ["delete_service", "write_endpoints", "remove_object"]
    assert fakes.of("write_endpoints")[-1].remove
    removed = fakes.of("remove_object")[0]
    assert (removed.plural, removed.name, removed.uid) == ("services", inp.name, inp.uid)


async def test_moves_when_replicas_leave_and_unknown_cluster_waits(
    workflow_env: WorkflowEnvironment,
) -> None:
    a, b = unique("a"), unique("b")
    fakes = ServiceFakes(view=ServiceView(placed={a: 1}, running={a: 1},
                                          clusters={a: "Ready", b: "Ready"}, jobs=1))
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = service()
        h = await start(workflow_env.client, q, inp)
        await last_status(fakes, "Ready")
        fakes.view = ServiceView(placed={b: 1}, running={b: 1},
                                 clusters={a: "Ready", b: "Ready"}, jobs=1)
        await h.signal(SIG_REFRESH, Refresh())
        await fakes.wait_for("apply_service", 2)
        await fakes.wait_for("delete_service", 1)
        assert fakes.of("apply_service")[-1].cluster == b
        assert fakes.of("delete_service")[0].cluster == a  # the old one, after the new is up
        fakes.read_result = ReadServiceResult(True, 2, ServiceTemplate(
            selector={"app": "web"}, ports=[ServicePort(80)], primary_cluster="nowhere"))
        await h.signal(SIG_SPEC, SpecChanged(2))
        await fakes.wait_for("read_service")
        await asyncio.sleep(0.3)
        state: ServiceState = await h.query(ServiceWorkflow.state)
        assert "cluster nowhere does not exist" in state.message
        assert state.cluster == b  # still served where it was


async def test_continues_as_new_keeping_state(workflow_env: WorkflowEnvironment) -> None:
    a = unique("a")
    fakes = ServiceFakes(view=ServiceView(placed={a: 1}, running={a: 1}, clusters={a: "Ready"},
                                          jobs=1))
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = service(refresh=1, history_limit=40)
        h = await start(workflow_env.client, q, inp)
        await last_status(fakes, "Ready")
        first_run = (await h.describe()).run_id
        for _ in range(20):
            await workflow_env.sleep(2)
            if (await h.describe()).run_id != first_run:
                break
        assert (await h.describe()).run_id != first_run
        state = await workflow_env.client.get_workflow_handle(h.id).query(ServiceWorkflow.state)
        assert state.phase == "Ready" and state.cluster == a and state.cluster_ip == "10.0.0.1"
        assert len(fakes.of("apply_service")) == 1  # not applied again after continue-as-new


class UnreachableFakes(ServiceFakes):
    """A cluster that never answers: every delete there fails as a connection error would."""

    @activity.defn(name=act.DELETE_SERVICE)
    async def delete_service(self, inp: DeleteServiceInput) -> None:
        self.calls.append(("delete_service", inp))
        raise ApplicationError(f"cluster {inp.cluster} unreachable: connection refused")


async def test_delete_on_an_unreachable_cluster_gives_up_after_the_teardown_timeout(
    workflow_env: WorkflowEnvironment,
) -> None:
    """Deleting a service whose cluster is away ends (the object is removed, what is left there
    is the cluster's cleanup on return) instead of retrying for as long as the cluster is away."""
    a = unique("a")
    fakes = UnreachableFakes(view=ServiceView(placed={a: 1}, running={a: 1},
                                              clusters={a: "Ready"}, jobs=1))
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = service()
        h = await start(workflow_env.client, q, inp)
        await last_status(fakes, "Ready")
        await h.signal(SIG_ENSURE, ServiceInput(inp.namespace, inp.name, inp.uid, 1,
                                                deleting=True))
        assert await asyncio.wait_for(h.result(), 60) == "Deleted"
    assert len(fakes.of("delete_service")) >= 2  # it was retried before giving up
    removed = fakes.of("remove_object")[0]
    assert (removed.plural, removed.name) == ("services", inp.name)


async def status_where(fakes: ServiceFakes, what: str, ok: Any,
                       timeout: float = 30.0) -> ServiceStatusPatch:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        writes = fakes.of("write_service_status")
        if writes and ok(writes[-1]):
            return writes[-1]  # type: ignore[no-any-return]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no status with {what}: {writes[-1:] or 'none'}")
        await asyncio.sleep(0.02)


async def test_copies_on_linked_clusters_follow_replicas_and_links(
    workflow_env: WorkflowEnvironment,
) -> None:
    """A service on p, linked (either direction) with a and with s (no services there): a gets
    a selector-less copy in front of the replicas on p and a, p balances over both too; s's
    refusal is said once, not retried; the copy follows an address change and goes when the
    link goes; the primary's own replicas' addresses are in the Endpoints."""
    p, a, s, x = unique("p"), unique("a"), unique("s"), unique("x")
    ready = {c: "Ready" for c in (p, a, s, x)}
    linked = {p: [a, s], a: [p], s: [p]}
    fakes = ServiceFakes(
        view=ServiceView(placed={p: 1, a: 1, x: 1}, running={p: 1, a: 1, x: 1},
                         clusters=ready, jobs=3,
                         job_uids={p: ["u1"], a: ["u2"], x: ["u3"]}, peers=linked),
        addresses={p: {"8080": ["10.0.0.1:8080"]}, a: {"8080": ["10.1.0.1:8080"]},
                   x: {"8080": ["10.9.0.1:8080"]}},
        no_services={s})
    async with workers(workflow_env.client, fakes, [p, a, s, x]) as q:
        inp = service(primary=p)
        h = await start(workflow_env.client, q, inp)
        st = await status_where(fakes, "a copy on a", lambda w: len(w.reachable or []) == 2)
        assert st.phase == "Ready" and st.cluster == p
        assert [(r.cluster, r.role) for r in st.reachable or []] == [(p, "primary"),
                                                                    (a, "linked")]
        assert f"no copy on linked cluster {s}: " in (st.message or "")
        assert "Slurm clusters have no services" in (st.message or "")
        applied = {i.cluster: i.spec for i in fakes.of("apply_service")}
        both = {"8080": ["10.0.0.1:8080", "10.1.0.1:8080"]}
        assert not applied[p].linked and applied[p].backends == both
        assert applied[p].remote_backends == {"8080": ["10.1.0.1:8080"]}
        assert applied[a].linked and applied[a].backends == both
        assert applied[a].selector == {"app": "web"} and applied[a].type == "ClusterIP"
        # x is not linked: asked nothing, fronted by nobody
        assert {i.cluster for i in fakes.of("replica_addresses")} == {p, a}
        ep = fakes.of("write_endpoints")[-1]
        assert ep.addresses == {p: ["10.0.0.1:8080"], a: ["10.1.0.1:8080"]}

        # the replica on a moves to another address: both are applied again, s is not retried
        fakes.addresses[a] = {"8080": ["10.1.0.2:8080"]}
        await h.signal(SIG_REFRESH, Refresh())
        await fakes.wait_for("apply_service", 5)
        await asyncio.sleep(0.3)
        later = fakes.of("apply_service")[3:]
        assert {i.cluster for i in later} == {p, a}
        assert all(i.spec.backends["8080"] == ["10.0.0.1:8080", "10.1.0.2:8080"] for i in later)

        # the link goes: the copy on a is deleted, the service stays on p
        fakes.view = ServiceView(placed={p: 1, a: 1}, running={p: 1, a: 1}, clusters=ready,
                                 jobs=2, job_uids={p: ["u1"], a: ["u2"]})
        await h.signal(SIG_REFRESH, Refresh())
        [gone] = await fakes.wait_for("delete_service")
        assert gone.cluster == a
        st = await status_where(fakes, "only p", lambda w: len(w.reachable or []) == 1)
        assert st.reachable is not None and st.reachable[0].cluster == p
        assert "no copy" not in (st.message or "")
        await h.signal(SIG_DELETE, DeleteRequest(inp.uid))
        assert await h.result() == "Deleted"
    assert [d.cluster for d in fakes.of("delete_service")] == [a, p]


async def test_a_move_between_linked_clusters_swaps_primary_and_copy(
    workflow_env: WorkflowEnvironment,
) -> None:
    """Replicas leave p for q, linked with it: the service becomes q's own (not a copy any more)
    and p keeps a copy instead of losing the service: nothing is deleted."""
    p, q = unique("p"), unique("q")
    ready = {p: "Ready", q: "Ready"}
    peers = {p: [q], q: [p]}
    fakes = ServiceFakes(
        view=ServiceView(placed={p: 1}, running={p: 1}, clusters=ready, jobs=1,
                         job_uids={p: ["u1"]}, peers=peers),
        addresses={p: {"8080": ["10.0.0.1:8080"]}, q: {"8080": ["10.1.0.1:8080"]}})
    async with workers(workflow_env.client, fakes, [p, q]) as queue:
        inp = service()
        h = await start(workflow_env.client, queue, inp)
        await status_where(fakes, "p and its copy on q",
                           lambda w: [(r.cluster, r.role) for r in w.reachable or []]
                           == [(p, "primary"), (q, "linked")])
        fakes.view = ServiceView(placed={q: 1}, running={q: 1}, clusters=ready, jobs=1,
                                 job_uids={q: ["u2"]}, peers=peers)
        await h.signal(SIG_REFRESH, Refresh())
        st = await status_where(fakes, "q and its copy on p",
                                lambda w: [(r.cluster, r.role) for r in w.reachable or []]
                                == [(q, "primary"), (p, "linked")])
        assert st.cluster == q
        last = {i.cluster: i.spec for i in fakes.of("apply_service")}
        assert not last[q].linked and last[p].linked
        assert last[p].backends == {"8080": ["10.1.0.1:8080"]}  # only q runs replicas now
        assert fakes.of("delete_service") == []
        await h.signal(SIG_DELETE, DeleteRequest(inp.uid))
        assert await h.result() == "Deleted"
    assert sorted(d.cluster for d in fakes.of("delete_service")) == sorted([p, q])
