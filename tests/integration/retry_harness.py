"""The harness of the activity retry property (issue 32): run an activity, run it again with the
same input as Temporal would on a retry, and compare what each attempt did.

What is compared is what a user (or a job workflow) would see: the activity's result, every
object in etcd, the replicas on the cluster, the Temporal Schedules, and the signals and
workflow starts sent. The retry may repeat a signal or a start it already sent (delivery is at
least once and receivers drop repeats), but never send one the first attempt did not: that
would be a second decision.

The Temporal client is a recording fake: the activities under test only start, signal, list
workflows and keep Schedules through it, and the property is about what they send, which a
real server would only make harder to see. Clusters are the real ``local`` adapter, or a fake
strictly below the adapter boundary (:class:`ServiceManagerFake` for the service calls the
local adapter does not have).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from temporalio import activity
from temporalio.client import Schedule, ScheduleAlreadyRunningError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment

from skyshift.compat.base import ClusterManager
from skyshift.compat.types import ServiceSpec, ServiceStatus
from skyshift.models.registry import KINDS
from skyshift.store import ObjectStore

Obj = dict[str, Any]
#: what the fake Schedules answer for their next action times (fixed: no clock in the result)
NEXT_TIMES = [datetime(2030, 1, 1, h, tzinfo=UTC) for h in range(3)]


@dataclass(frozen=True)
class Sent:
    """One call to Temporal that a receiver acts on: a signal, or a (signal-with-)start."""

    op: str  # "signal" | "start"
    workflow_id: str
    name: str  # the signal's name (for a start without one, the workflow type)
    payload: Any


class _Handle:
    def __init__(self, client: RecordingClient, wf_id: str) -> None:
        self.client, self.id = client, wf_id

    async def signal(self, name: str, payload: Any = None) -> None:
        if self.client.unavailable:
            raise RPCError("Temporal is unavailable", RPCStatusCode.UNAVAILABLE, b"")
        if self.id in self.client.gone:
            raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")
        self.client.sent.append(Sent("signal", self.id, name, payload))


class _ScheduleHandle:
    def __init__(self, client: RecordingClient, sched_id: str) -> None:
        self.client, self.id = client, sched_id

    async def update(self, updater: Callable[[Any], Any]) -> None:
        if self.id not in self.client.schedules:
            raise RPCError("schedule not found", RPCStatusCode.NOT_FOUND, b"")
        self.client.schedules[self.id] = updater(None).schedule

    async def describe(self) -> Any:
        return SimpleNamespace(info=SimpleNamespace(next_action_times=list(NEXT_TIMES)))

    async def delete(self) -> None:
        if self.client.schedules.pop(self.id, None) is None:
            raise RPCError("schedule not found", RPCStatusCode.NOT_FOUND, b"")


class RecordingClient:
    """The parts of ``temporalio.client.Client`` the activities use, recording what they send.

    ``running``: workflow ids ``list_workflows`` finds; ``gone``: ids whose signals answer
    NOT_FOUND; ``unavailable``: every signal fails as when the server is down; ``schedules``:
    the Temporal Schedules by id (compared as state)."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.unavailable = False
        self.running: list[str] = []
        self.gone: set[str] = set()
        self.schedules: dict[str, Schedule] = {}

    async def start_workflow(self, workflow: Any, arg: Any = None, *, id: str,
                             start_signal: str | None = None,
                             start_signal_args: Any = (), **_: Any) -> None:
        name = start_signal or str(workflow)
        payload = tuple(start_signal_args or ()) if start_signal else arg
        self.sent.append(Sent("start", id, name, payload))

    def get_workflow_handle(self, wf_id: str) -> _Handle:
        return _Handle(self, wf_id)

    async def list_workflows(self, query: str) -> AsyncIterator[Any]:
        for wf_id in list(self.running):
            yield SimpleNamespace(id=wf_id)

    async def create_schedule(self, sched_id: str, schedule: Schedule) -> None:
        if sched_id in self.schedules:
            raise ScheduleAlreadyRunningError()
        self.schedules[sched_id] = schedule

    def get_schedule_handle(self, sched_id: str) -> _ScheduleHandle:
        return _ScheduleHandle(self, sched_id)


class ServiceManagerFake:
    """Services of a cluster, below the adapter boundary: ``apply_service`` is idempotent by
    name (as the ServiceManager protocol asks), every call is recorded."""

    manager = "fake"

    def __init__(self) -> None:
        self.services: dict[tuple[str, str], ServiceSpec] = {}
        self.calls: list[str] = []

    async def apply_service(self, spec: ServiceSpec) -> ServiceStatus:
        self.calls.append(f"apply {spec.namespace}/{spec.name}")
        self.services[(spec.namespace, spec.name)] = spec
        return ServiceStatus(spec.name, spec.namespace, cluster_ip="10.96.0.10",
                             ports=list(spec.ports))

    async def delete_service(self, namespace: str, name: str) -> None:
        self.calls.append(f"delete {namespace}/{name}")
        self.services.pop((namespace, name), None)


@dataclass
class World:
    """What a case sets up and the harness observes."""

    store: ObjectStore
    client: RecordingClient
    tmp: Path
    clusters: list[ClusterManager] = field(default_factory=list)  # replicas are compared
    services: list[ServiceManagerFake] = field(default_factory=list)
    extra: list[Callable[[], Any]] = field(default_factory=list)  # more state to compare
    cleanup: list[Callable[[], Awaitable[Any]]] = field(default_factory=list)

    async def close(self) -> None:
        """Stop what the case started: replicas on the clusters, servers."""
        for manager in self.clusters:
            for uid in sorted({r.job_uid for r in await manager.replicas()}):
                await manager.delete_job(uid)
            await manager.close()
        for fn in self.cleanup:
            await fn()


@dataclass
class Prepared:
    """One activity call to retry. ``move_on``: the world changing between the attempts
    (capacity, another object, time passing); ``same``: the part of the result a retry must
    repeat (all of it unless a field honestly counts attempts); ``ignore``: dotted paths of
    etcd objects that honestly differ per attempt (e.g. an attempt counter in status)."""

    fn: Callable[[Any], Awaitable[Any]]
    inp: Any
    move_on: Callable[[], Awaitable[None]] | None = None
    same: Callable[[Any], Any] = lambda r: r
    ignore: tuple[str, ...] = ()


def activity_name(fn: Callable[..., Any]) -> str:
    """The name ``fn`` is registered under (what a workflow schedules)."""
    defn = activity._Definition.must_from_callable(fn)
    return str(defn.name)


async def run_attempt(prepared: Prepared, attempt: int) -> Any:
    """Run the activity as Temporal's attempt number ``attempt`` would."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt)
    return await env.run(prepared.fn, prepared.inp)


def _drop(obj: Obj, path: str) -> None:
    *parents, last = path.split(".")
    node: Any = obj
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


async def store_objects(store: ObjectStore, ignore: tuple[str, ...] = ()) -> dict[str, Obj]:
    """Every object in the test's prefix, without its resourceVersion (a rewrite of the same
    content is not a change anyone sees)."""
    out: dict[str, Obj] = {}
    for kind in KINDS:
        for obj in (await store.list(kind.plural)).items:
            meta = obj.get("metadata") or {}
            meta.pop("resourceVersion", None)
            for path in ignore:
                _drop(obj, path)
            out[f"{kind.plural}/{meta.get('namespace') or ''}/{meta.get('name')}"] = obj
    return out


async def observe(world: World, ignore: tuple[str, ...] = ()) -> dict[str, Any]:
    """Everything a retry must leave as it was."""
    replicas = []
    for manager in world.clusters:
        replicas.append(sorted((r.name, r.job_uid, r.attempt) for r in await manager.replicas()))
    return {
        "etcd": await store_objects(world.store, ignore),
        "replicas": replicas,
        "services": [sorted(f.services) for f in world.services],
        "schedules": dict(world.client.schedules),
        "extra": [get() for get in world.extra],
    }


async def check_retry(world: World, prepared: Prepared, moved: bool) -> None:
    """The property: a retry (after the world moved on, when ``moved``) returns what the
    first attempt returned and changes nothing the first attempt had not already done."""
    first = await run_attempt(prepared, 1)
    sent_first = list(world.client.sent)
    if moved:
        assert prepared.move_on is not None
        await prepared.move_on()
    before = await observe(world, prepared.ignore)
    mark = len(world.client.sent)
    second = await run_attempt(prepared, 2)
    after = await observe(world, prepared.ignore)
    was, now = prepared.same(first), prepared.same(second)
    assert now == was, f"the retry decided differently: first {was!r}, retry {now!r}"
    for key in before:
        assert after[key] == before[key], f"the retry changed {key}"
    new = [s for s in world.client.sent[mark:] if s not in sent_first]
    assert not new, f"the retry sent what the first attempt did not: {new}"
