"""Batch queues (issue #16): a batch cluster (Slurm) may take replicas beyond its free capacity
into its own queue, up to the bound it reports, so it starts the next job the moment one ends.

What must hold, checked here on the pure scheduler and on the activity's view of etcd
(``cluster_infos``: status.allocatable and status.queue minus the scheduler's reservations):

* never more promised than free capacity plus the queue's room, in one batch and over many
  rounds of concurrent submissions whose reservations the cluster has not shown yet;
* free capacity anywhere is used before anything is queued;
* a queued job says where it waits and behind how many jobs; a full queue says so;
* a replica no node could ever run is never queued.
"""

from __future__ import annotations

import random
from typing import Any

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.scheduling import cluster_infos
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ClusterState, NodeState, QueueState
from skyshift.contract.jobs import Reservation, SyncInput
from skyshift.models.cluster import Cluster
from skyshift.models.quantity import Resources
from skyshift.scheduler import ClusterInfo, JobRequest, NodeInfo, Preference, schedule_batch
from skyshift.scheduler.types import QueueInfo


def job(name: str, cpus: float = 1, replicas: int = 1, created: float = 0.0,
        memory: float = 0, preferences: list[Preference] | None = None) -> JobRequest:
    return JobRequest(f"default/{name}", f"uid-{name}", "default", {}, 0, created, replicas,
                      Resources(cpus, memory), preferences=preferences or [])


def batch_cluster(name: str, free: list[float], cap: float, room: float,
                  jobs: int = 0) -> ClusterInfo:
    nodes = [NodeInfo(f"{name}-n{i}", Resources(f, 64_000), Resources(cap, 64_000))
             for i, f in enumerate(free)]
    return ClusterInfo(name, {}, True, nodes, "slurm", QueueInfo(Resources(room, 640_000), jobs))


def plain_cluster(name: str, *free: float) -> ClusterInfo:
    nodes = [NodeInfo(f"{name}-n{i}", Resources(f, 64_000)) for i, f in enumerate(free)]
    return ClusterInfo(name, {}, True, nodes, "k8")


def test_full_batch_cluster_queues_up_to_its_room_and_no_further() -> None:
    slurm = batch_cluster("slurm-1", [2, 0], cap=4, room=3, jobs=5)
    decisions = schedule_batch([job(f"j{i}", created=i) for i in range(8)], [slurm], [])
    placed = [d for d in decisions if d.placed]
    assert len(placed) == 2 + 3  # two on the free cpus, three in the queue, not one more
    assert [d.message for d in placed] == [
        "placed 1 replicas: slurm-1=1",
        "placed 1 replicas: slurm-1=1",
        "placed 1 replicas: slurm-1=1; queued in slurm-1 behind 5 jobs",
        "placed 1 replicas: slurm-1=1; queued in slurm-1 behind 6 jobs",
        "placed 1 replicas: slurm-1=1; queued in slurm-1 behind 7 jobs",
    ]
    for d in decisions[5:]:
        assert not d.placed
        assert d.reasons["slurm-1"] == (
            "insufficient resources: cpus: need 1, largest free node has 0 (free capacity was "
            "reserved by jobs placed earlier in this batch); its queue is full")


def test_free_capacity_anywhere_goes_before_a_queue() -> None:
    slurm = batch_cluster("slurm-1", [1], cap=4, room=10)
    k8s = plain_cluster("k8s", 2)
    # three replicas: slurm's free cpu and k8s's two, none queued although slurm ranks first
    wide = job("wide", replicas=3, preferences=[Preference(match_labels={}, weight=5)])
    [d] = schedule_batch([wide], [slurm, k8s], [])
    assert d.assignments == {"k8s": 2, "slurm-1": 1} and "queued" not in d.message
    # four: the one that fits nowhere now waits in slurm's queue
    [d] = schedule_batch([job("wider", replicas=4)], [slurm, k8s], [])
    assert d.assignments == {"k8s": 2, "slurm-1": 2}
    assert d.message.endswith("; 1 queued in slurm-1 behind 0 jobs")


def test_a_job_no_node_can_run_is_never_queued() -> None:
    slurm = batch_cluster("slurm-1", [0, 0], cap=4, room=100)
    [d] = schedule_batch([job("huge", cpus=8)], [slurm], [])
    assert not d.placed
    assert "queue" not in d.reasons["slurm-1"]  # waiting would not help: no node has 8 cpus


def test_cpu_less_requests_are_charged_a_cpu_each() -> None:
    node = NodeInfo("n0", Resources(0, 0), Resources(4, 64_000))  # full: no cpu, no memory
    slurm = ClusterInfo("slurm-1", {}, True, [node], "slurm",
                        QueueInfo(Resources(3, 640_000)))
    decisions = schedule_batch([job(f"z{i}", cpus=0, memory=100, created=i) for i in range(10)],
                               [slurm], [])
    assert sum(d.placed for d in decisions) == 3  # Slurm gives each a cpu: three fill the room


def test_the_preferred_queue_then_the_shortest_one() -> None:
    a = batch_cluster("a", [0], cap=4, room=4, jobs=9)
    b = batch_cluster("b", [0], cap=4, room=4, jobs=2)
    [d] = schedule_batch([job("j")], [a, b], [])
    assert d.assignments == {"b": 1} and d.message.endswith("queued in b behind 2 jobs")
    likes_a = job("k", preferences=[Preference(match_labels={"site": "a"}, weight=10)])
    a.labels["site"] = "a"
    [d] = schedule_batch([likes_a], [a, b], [])
    assert d.assignments == {"a": 1}


# ---- over many rounds, through the activity's view of etcd ------------------------------------

NODE = {"cpus": 4.0, "memory": 8000.0, "gpus": 0, "disk": 0.0, "accelerators": {}}


def status(free: list[float], queued_cpus: float, jobs: int, depth: float = 1.0) -> dict[str, Any]:
    alloc = {f"n{i}": dict(NODE, cpus=f) for i, f in enumerate(free)}
    cap = {f"n{i}": dict(NODE) for i in range(len(free))}
    limit = dict(NODE, cpus=4.0 * len(free) * depth, memory=8000.0 * len(free) * depth)
    return {"phase": "Ready", "allocatable": alloc, "capacity": cap,
            "queue": {"limit": limit, "queued": dict(NODE, cpus=queued_cpus, memory=0.0),
                      "jobs": jobs}}


def cluster_obj(st: dict[str, Any]) -> dict[str, Any]:
    obj = {"kind": "Cluster", "metadata": {"name": "slurm-1", "uid": "u"},
           "spec": {"manager": "slurm"}, "status": st}
    Cluster.model_validate(obj)  # what the skylet writes is a valid Cluster
    return obj


def test_concurrent_rounds_never_promise_more_than_capacity_plus_depth() -> None:
    """Bursts of submissions over many scheduler rounds, while the cluster shows only some of
    the placed replicas (running, or pending in its queue) and releases none: what is promised
    (running + pending there + reserved) never exceeds capacity (8 cpus) + depth (8 cpus)."""
    rng = random.Random(16)
    capacity, limit = 8.0, 8.0
    running: list[float] = []  # cpus of replicas the cluster runs
    pending: list[float] = []  # cpus of replicas waiting in its queue
    reservations: list[Reservation] = []
    seq = 0
    for rnd in range(60):
        # the cluster shows a few reserved replicas (the skylet reports them; reservation gone)
        rng.shuffle(reservations)
        for r in reservations[: rng.randint(0, 3)]:
            reservations.remove(r)
            (running if sum(running) + r.per_replica.cpus <= capacity else pending).append(
                r.per_replica.cpus)
        if rng.random() < 0.3 and running:  # a job ends; slurm starts the next queued one
            running.pop(0)
            if pending and sum(running) + pending[0] <= capacity:
                running.append(pending.pop(0))
        # free per node: fill node by node (what sinfo would show)
        used, free = sum(running), []
        for _ in range(2):
            take = min(used, 4.0)
            free.append(4.0 - take)
            used -= take
        infos = cluster_infos([cluster_obj(status(free, sum(pending), len(pending)))],
                              reservations)
        burst = [job(f"r{rnd}-{i}", cpus=rng.choice([1, 1, 2]), created=seq + i)
                 for i in range(rng.randint(1, 12))]
        seq += len(burst)
        for j, d in zip(burst, schedule_batch(burst, infos, []), strict=True):
            if d.placed:
                reservations.append(Reservation(j.uid, j.key, "slurm-1", j.per_replica,
                                                d.assignments["slurm-1"], float(rnd)))
        promised = sum(running) + sum(pending) + sum(
            r.per_replica.cpus * r.count for r in reservations)
        assert promised <= capacity + limit + 1e-9, (rnd, running, pending, reservations)
    assert sum(running) + sum(pending) > capacity  # the queue was used at all


def test_reservations_beyond_free_capacity_use_up_the_queue() -> None:
    st = status([1.0, 0.0], queued_cpus=2.0, jobs=2)
    held = [Reservation("u1", "default/a", "slurm-1", Resources(1, 100), 3, 0.0)]
    [info] = cluster_infos([cluster_obj(st)], held)
    assert [n.free.cpus for n in info.nodes] == [0.0, 0.0]  # one on the free cpu
    assert info.queue is not None
    assert (info.queue.room.cpus, info.queue.jobs) == (8.0 - 2.0 - 2.0, 4)  # two queued


def test_clusters_without_a_queue_are_unchanged() -> None:
    st = status([1.0, 0.0], 0.0, 0)
    del st["queue"]
    held = [Reservation("u1", "default/a", "slurm-1", Resources(1, 100), 3, 0.0)]
    [info] = cluster_infos([cluster_obj(st)], held)
    assert info.queue is None
    assert [n.free.cpus for n in info.nodes] == [0.0, 0.0]
    assert not schedule_batch([job("x")], [info], [])[0].placed


# ---- the skylet's sync writes the queue, and room in it is freed capacity ---------------------


class FakeStore:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    async def guaranteed_update(self, plural: str, name: str, namespace: str | None,
                                mutate: Any) -> dict[str, Any]:
        self.obj = mutate(self.obj) or self.obj
        return self.obj


async def test_sync_writes_the_queue_and_a_shorter_queue_frees_capacity() -> None:
    store = FakeStore(cluster_obj({"phase": "Init"}))
    acts = SkyletWithSync(ClusterContext("slurm-1", None), store, None)  # type: ignore[arg-type]
    syncer = Syncer(acts, SyncConfig())
    full = [NodeState("n0", Resources(4, 8000), Resources(0, 7600))]

    def state(queued: float, jobs: int) -> ClusterState:
        return ClusterState(True, nodes=full, queue=QueueState(
            Resources(4, 8000), Resources(queued, queued * 100), jobs))

    await syncer._write_cluster(SyncInput("slurm-1", "u"), "Ready", "", state(3, 3))
    queue = store.obj["status"]["queue"]
    assert (queue["limit"]["cpus"], queue["queued"]["cpus"], queue["jobs"]) == (4, 3, 3)
    Cluster.model_validate(store.obj)  # the API reads it back
    [info] = cluster_infos([store.obj], [])
    assert info.queue is not None and (info.queue.room.cpus, info.queue.jobs) == (1, 3)
    # a job ended and Slurm started a queued one: the nodes look the same, the queue is shorter
    await syncer._write_cluster(SyncInput("slurm-1", "u"), "Ready", "", state(2, 2))
    assert syncer.gained  # the scheduler is told: there is room again
    await syncer._write_cluster(SyncInput("slurm-1", "u"), "Ready", "", state(2, 2))
    assert not syncer.gained
    await syncer._write_cluster(SyncInput("slurm-1", "u"), "Ready", "", state(4, 4))
    assert not syncer.gained  # a longer queue frees nothing
