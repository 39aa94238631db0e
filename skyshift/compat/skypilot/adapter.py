"""The ``skypilot`` cluster manager: replicas are jobs in the queues of provisioned SkyPilot
clusters.

A SkyShift cluster of this manager stands for one or more SkyPilot clusters that SkyShift
provisioned (the provisioning side adds SkyPilot clusters to it to scale up). Config
(``Cluster.spec.config``)::

    sky_clusters   SkyPilot cluster names, 1..64 (required; 0 when ``provisioned``)
    provisioned    true for a Cluster with ``spec.provision``: no SkyPilot cluster then means
                   scaled to zero (healthy, no nodes, until it grows)
    venv           SkyPilot's virtualenv [SKYSHIFT_SKYPILOT_VENV or /opt/skyshift/skypilot/venv]
    user           the user SkyPilot runs as [SKYSHIFT_SKY_USER or skyshift-sky]
    call_timeout   seconds before one SkyPilot call counts as hung -> Transient [120]
    status_ttl     seconds a cluster's shape (from ``sky status``) is reused [60]
    state_dir      where deleted-but-finished replicas are remembered
                   [$SKYSHIFT_HOME/skypilot]
    labels         labels the cluster reports for placement filters

Mapping (``map``): one SkyPilot job per replica attempt, submitted with ``sky exec`` (async: it
returns once the job is queued) under a deterministic job name carrying the replica's identity,
so a submit looks the name up in the queues first (the last sync round's listing when nothing of
that name can have landed since, see ``_submit_listing``) and adopts what is there (same or
higher attempt); an attempt found twice keeps its first job, the rest are cancelled.
``replicas()`` is one ``sky queue`` per SkyPilot cluster, all in one runner request; ``state()``
right after it (a sync round) reuses that listing. ``state()``: each cluster's nodes from ``sky
status`` (cached ``status_ttl``), allocatable = their capacity minus what SkyShift's pending and
running jobs reserve. SkyPilot schedules a cluster's jobs by CPUs, and on Slurm runs each as an
exclusive ``srun`` step of whole CPUs: a job asks for, and is counted with, its replica's CPUs
rounded up. ``submit`` picks the first cluster with room, else one where it fits a node (the job
waits in SkyPilot's queue). ``delete`` cancels; SkyPilot keeps finished jobs in its table
forever, so a deleted finished replica is remembered in ``state_dir`` and not listed again; a
delete of replicas that the last listing (under 15 s old) shows finished takes that listing
rather than a `sky queue` of its own (``_finished_in_listing``).
``logs`` is ``sky logs`` of the latest attempt, found in the last listing (a sync round's, 15 s
old at most) or a fresh one; a replica whose job has not started yet is ``NotFound`` saying so
(SkyPilot's own call would wait seconds for a log, then print an error as the log). No exec into
a job (``sky exec`` starts a new job), no services: both ``Unsupported``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from skyshift.compat.base import RESUBMIT
from skyshift.compat.common.name_locks import NameLocks
from skyshift.compat.errors import CompatError, NotFound, Permanent, Transient, Unsupported
from skyshift.compat.skypilot.client import SkyJob, SkyPilotClient
from skyshift.compat.skypilot.listing import (
    FINISHED,
    Found,
    allocate,
    duplicates,
    latest,
    reserved,
)
from skyshift.compat.skypilot.map import (
    CANCELLED,
    JobMeta,
    exit_code_in,
    node_capacity,
    replica_env,
    status_of,
    user_log,
    validate_spec,
)
from skyshift.compat.skypilot.tombstones import Tombstones
from skyshift.compat.types import (
    FAILED,
    ClusterState,
    ExecResult,
    NodeState,
    ReplicaSpec,
    ReplicaStatus,
)
from skyshift.config import skyshift_home
from skyshift.models.quantity import Resources

T = TypeVar("T")
_NAME = re.compile(r"[a-z][a-z0-9-]{0,62}")
_LOCKS: dict[str, NameLocks] = {}  # per SkyShift cluster, shared by its manager instances
# per SkyShift cluster: replica name -> when this process last sent its `sky exec`
_SENT: dict[str, dict[str, float]] = {}
_SENT_JOBS: dict[str, dict[str, float]] = {}  # the same per job uid (what delete_job checks)
_SENT_KEEP = 3600.0  # seconds a sent exec is remembered (it has long landed by then)
_EXIT_CODES: dict[tuple[str, int], int] = {}  # (sky cluster, job id) -> a FAILED job's code
_SKY_LINES = 10  # lines SkyPilot adds after a job's output in ``sky logs``
_NOT_STARTED = ("INIT", "PENDING")  # no log yet: `sky logs` would wait for one, then say so
_LISTING_TTL = 15.0  # seconds a listing names a replica's latest job for logs
_PENDING_REUSE = 3.0  # seconds a listing answers logs of a replica that has not started
_STATE_REUSE = 5.0  # seconds state() takes the last listing as its own
_SUBMIT_REUSE = 15.0  # seconds a submit looks its replicas up in the last listing
LOGS_TIMEOUT = 40.0  # one `sky logs` call (seconds when well, over 15 s on a loaded machine;
#                      the API gives a cluster 45 s)


@dataclass
class SkyConfig:
    sky_clusters: list[str]
    venv: str | None = None
    user: str | None = None
    call_timeout: float = 120.0
    status_ttl: float = 60.0
    state_dir: Path = field(default_factory=lambda: skyshift_home() / "skypilot")
    labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, name: str, config: dict[str, Any]) -> SkyConfig:
        clusters = config.get("sky_clusters")
        least = 0 if config.get("provisioned") is True else 1  # provisioned: may be at zero
        if clusters is None and least == 0:
            clusters = []
        if (not isinstance(clusters, list) or not least <= len(clusters) <= 64
                or not all(isinstance(c, str) and _NAME.fullmatch(c) for c in clusters)):
            raise Permanent(f"skypilot cluster {name}: sky_clusters must list {least} to 64 "
                            "SkyPilot cluster names (lowercase letters, digits, dashes)")

        def number(key: str, default: float) -> float:
            value = config.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise Permanent(f"skypilot cluster {name}: {key} must be a number > 0")
            return float(value)

        def text(key: str) -> str | None:
            value = config.get(key)
            if value is not None and (not isinstance(value, str) or len(value) > 4096):
                raise Permanent(f"skypilot cluster {name}: {key} must be a string")
            return value

        labels = config.get("labels") or {}
        if not isinstance(labels, dict):
            raise Permanent(f"skypilot cluster {name}: labels must map strings to strings")
        state_dir = text("state_dir")
        return cls(list(dict.fromkeys(clusters)), text("venv"), text("user"),
                   number("call_timeout", 120.0), number("status_ttl", 60.0),
                   Path(state_dir) if state_dir else skyshift_home() / "skypilot",
                   {str(k): str(v) for k, v in labels.items()})


class SkyPilotManager:
    """ClusterManager over the job queues of provisioned SkyPilot clusters (module docstring)."""

    manager = "skypilot"

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.config = SkyConfig.parse(name, config)
        # its calls go to the runner process shared by this process's clients of that venv
        # and user (SkyPilot imported once, requests served side by side)
        self.client = SkyPilotClient(self.config.venv, self.config.user,
                                     self.config.call_timeout)
        # held from now: when this manager replaces another of the cluster (a scale-up adds a
        # SkyPilot cluster, the skylet rebuilds), the old one's close keeps the runner running
        self.client.hold()
        self._names = _LOCKS.setdefault(name, NameLocks())
        self._shapes: dict[str, list[NodeState]] = {}
        self._shapes_at = 0.0
        self._listed: tuple[float, list[Found]] = (0.0, [])  # the last listing, and when
        self._listed_from = 0.0  # when that listing's `sky queue` was asked for
        self._listing: asyncio.Task[list[Found]] | None = None  # the `sky queue` in flight
        self._sent = _SENT.setdefault(name, {})
        self._sent_jobs = _SENT_JOBS.setdefault(name, {})
        self._tombstones = Tombstones(self.config.state_dir, name)

    @property
    def sync_timeout(self) -> float:
        """One sync round (a `sky queue` per SkyPilot cluster, `sky status` now and then)
        takes seconds when all is well: the skylet's sync waits this long for it, and calls
        the cluster lost only after two such rounds (activities/sync.py)."""
        return min(self.config.call_timeout, 60.0)

    # ---- ClusterManager -------------------------------------------------------------------

    async def connect(self) -> None:
        return None  # the runner starts with the first call (or prepare())

    async def prepare(self) -> None:
        """Start SkyPilot's runner ahead of the first call: the skylet builds this manager
        while the Cluster is still provisioning (or at zero), and the first sync after the
        launch then does not wait for SkyPilot's import (seconds of every first Ready)."""
        await asyncio.to_thread(self.client.warm)

    async def close(self) -> None:
        self.client.close()  # lets go of the shared runner (the last client ends it)

    async def state(self) -> ClusterState:
        if not self.config.sky_clusters:  # scaled to zero: nothing to ask SkyPilot
            return ClusterState(healthy=True, nodes=[], labels=dict(self.config.labels),
                                message="no SkyPilot cluster up: scaled to zero, grows when a "
                                        "job waits for it")
        # a sync round lists the replicas just before: its listing, not a second `sky queue`
        # (seconds each, and the round's wait until a started job is seen Running)
        fresh = time.monotonic() - self._listed[0] < _STATE_REUSE
        shapes, found = await asyncio.gather(
            self._cluster_nodes(), self._listed_now() if fresh else self._list(join=True))
        used = reserved(found)
        nodes: list[NodeState] = []
        for cluster in self.config.sky_clusters:
            nodes.extend(allocate(shapes.get(cluster, []), used.get(cluster, [])))
        up = [c for c in self.config.sky_clusters if shapes.get(c)]
        down = [c for c in self.config.sky_clusters if not shapes.get(c)]
        message = f"{len(up)} SkyPilot cluster(s) up" + (
            f"; not up: {', '.join(down)}" if down else "")
        return ClusterState(healthy=bool(nodes), message=message, nodes=nodes,
                            labels=dict(self.config.labels))

    async def submit(self, replicas: list[ReplicaSpec]) -> list[ReplicaStatus]:
        for spec in replicas:
            validate_spec(spec)
        first: dict[str, ReplicaSpec] = {}
        for spec in replicas:
            first.setdefault(spec.name, spec)
        async with self._names.hold(list(first)):
            # the shapes (`sky status` once their cache is stale) and the queue at once
            shapes, found = await asyncio.gather(
                self._cluster_nodes(), self._submit_listing(list(first)))
            for spec in first.values():
                self._check_fits(spec, shapes)
            done: dict[str, ReplicaStatus] = {}
            todo: list[tuple[ReplicaSpec, JobMeta, str]] = []
            for spec in first.values():  # placed one by one: each sees the ones before it
                adopted = await self._adopt(spec, found)
                if adopted is not None:
                    done[spec.name] = adopted
                    continue
                meta = JobMeta.of(spec)
                cluster = self._place(meta.reservation, found, shapes)
                found.append((cluster, SkyJob(-1, meta.job_name(), "PENDING"), meta))
                todo.append((spec, meta, cluster))
                self._sent[spec.name] = self._sent_jobs[spec.job_uid] = time.monotonic()
            # each exec waits for SkyPilot to queue the job (seconds): the batch's go together
            results = await asyncio.gather(*(self._exec(*t) for t in todo),
                                           return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        for (spec, _, _), status in zip(todo, results, strict=True):
            assert isinstance(status, ReplicaStatus)
            done[spec.name] = status
        return [done[spec.name] for spec in replicas]

    async def replicas(self) -> list[ReplicaStatus]:
        # a sync round asks state() next, which needs the shapes: `sky status` (once its cache
        # is stale) beside `sky queue`, not after it (a cluster's first round decides Ready)
        found, _ = await asyncio.gather(self._list(join=True), self._shapes_ahead())
        extra = duplicates(found)
        if extra:  # one replica attempt sent twice (see _submit_listing): keep the first
            await self._cancel(extra)
        out = []
        for name, (cluster, job, meta) in sorted(latest(found).items()):
            out.append(status_of(meta, job, await self._exit_code(cluster, job)))
            del name
        return out

    async def delete(self, names: list[str]) -> None:
        wanted = set(names)
        sent = max((self._sent.get(n, 0.0) for n in wanted), default=0.0)
        await self._delete_where(lambda m: m.name in wanted, sent, wanted)

    async def delete_job(self, job_uid: str) -> list[str]:
        sent = self._sent_jobs.get(job_uid, 0.0)
        return await self._delete_where(lambda m: m.job_uid == job_uid, sent)

    async def logs(self, name: str, tail: int | None = None) -> str:
        # the sync round's listing names the job (its id never changes): no `sky queue` first;
        # one not started yet is asked about again only once that listing is a few seconds old
        # (`skyctl logs -f` asks for each replica until they start)
        got = latest(self._listed[1]).get(name)
        age = time.monotonic() - self._listed[0]
        if (got is None or age > _LISTING_TTL
                or (got[1].status in _NOT_STARTED and age > _PENDING_REUSE)):
            got = latest(await self._list(join=True)).get(name)
        if got is None:
            raise NotFound(f"replica {name} not found on cluster {self.name}")
        cluster, job, _ = got
        if job.status in _NOT_STARTED:
            raise NotFound(f"replica {name} has not started yet (SkyPilot job {job.job_id} on "
                           f"{cluster} is {job.status})")
        # SkyPilot's tail counts its own lines too: ask for a few more, keep the task's
        extra = 0 if tail is None else tail + _SKY_LINES
        limit = min(self.config.call_timeout, LOGS_TIMEOUT)
        text = await self._call(lambda: self.client.logs(cluster, job.job_id, tail=extra,
                                                         timeout=limit))
        return user_log(text, tail)

    async def exec(self, name: str, command: list[str], timeout: float = 60) -> ExecResult:
        raise Unsupported(f"SkyPilot jobs have no exec (cluster {self.name}): `sky exec` starts "
                          "a new job; run the command as part of the job, or read its logs")

    # ---- helpers --------------------------------------------------------------------------

    async def _call(self, fn: Callable[[], T]) -> T:
        """A blocking driver call in a thread (the driver bounds it with its own timeout)."""
        return await asyncio.to_thread(fn)

    async def _cluster_nodes(self) -> dict[str, list[NodeState]]:
        """Each UP SkyPilot cluster's nodes (capacity only), cached ``status_ttl`` seconds."""
        if self._shapes and time.monotonic() - self._shapes_at < self.config.status_ttl:
            return self._shapes
        names = self.config.sky_clusters
        if not names:
            return {}
        records = await self._call(lambda: self.client.clusters(names))
        shapes: dict[str, list[NodeState]] = {}
        for rec in records:
            cluster = str(rec.get("name"))
            if cluster not in names or str(rec.get("status")).upper() != "UP":
                continue
            cap = node_capacity(rec)
            count = int(rec.get("nodes") or 1)
            shapes[cluster] = [NodeState(name=f"{cluster}-{i}", capacity=cap, allocatable=cap)
                               for i in range(count)]
        self._shapes, self._shapes_at = shapes, time.monotonic()
        return shapes

    async def _shapes_ahead(self) -> None:
        """Fill the shape cache; an error is state()'s to report (it asks again)."""
        with contextlib.suppress(CompatError):
            await self._cluster_nodes()

    async def _listed_now(self) -> list[Found]:
        return self._listed[1]

    async def _submit_listing(self, names: list[str]) -> list[Found]:
        """What the queues hold, for a submit to adopt rather than send twice: the last sync
        round's listing when it is recent and nothing could have landed since for these names,
        else a `sky queue` of its own (seconds, the most of a submit's wait).

        A job of these names lands after a listing only from an exec sent earlier: by this
        process (``_SENT``: then a fresh listing), or by an earlier attempt of the submit that
        died with its exec in flight in SkyPilot's API server (then the skylet sets
        ``RESUBMIT``: a fresh listing too). A fresh listing narrows that window without closing
        it (the exec may land just after it too); a replica attempt sent twice all the same is
        cancelled by the next ``replicas()`` but for its first job."""
        now = time.monotonic()
        for sent in (self._sent, self._sent_jobs):
            for key, at in list(sent.items()):
                if now - at > _SENT_KEEP:
                    del sent[key]
        started = self._listed_from
        if (now - started < _SUBMIT_REUSE and not RESUBMIT.get()
                and not any(n in self._sent for n in names)):
            return list(self._listed[1])
        return await self._list()

    async def _list(self, join: bool = False) -> list[Found]:
        """SkyShift's jobs in every SkyPilot cluster's queue (one runner request), cancelled and
        deleted ones left out. ``join``: a listing of this manager already in flight is answer
        enough (the readers: a sync round, logs), rather than a second `sky queue` beside it,
        which SkyPilot's API server runs slower for both (9-15 s each, three at once, against
        2.5 s alone). Submits and deletes ask for one of their own."""
        pending = self._listing
        if (join and pending is not None and not pending.done()
                and pending.get_loop() is asyncio.get_running_loop()):
            return list(await asyncio.shield(pending))
        task = asyncio.ensure_future(self._list_now())
        task.add_done_callback(_retrieved)
        self._listing = task
        return list(await asyncio.shield(task))  # a caller that gives up leaves it to the others

    async def _list_now(self) -> list[Found]:
        names = self.config.sky_clusters
        if not names:
            return []
        started = time.monotonic()
        tables = await self._call(lambda: self.client.queue(
            names, timeout=self.config.call_timeout))
        gone = self._tombstones.load()
        found: list[Found] = []
        live: set[str] = set()
        for cluster in names:
            table = tables.get(cluster, [])
            if isinstance(table, NotFound):
                continue  # torn down: nothing of ours is there any more
            if isinstance(table, Exception):
                raise table
            for job in table:
                meta = JobMeta.parse(job.name)
                key = f"{cluster}:{job.job_id}"
                live.add(key)
                if meta is None or job.status == CANCELLED or key in gone:
                    continue
                found.append((cluster, job, meta))
        if gone - live:
            self._tombstones.save(gone & live)
        self._listed, self._listed_from = (time.monotonic(), found), started
        return found

    async def _exit_code(self, cluster: str, job: SkyJob) -> int | None:
        """A FAILED job's exit status: from its log's marker, read once and remembered."""
        if job.status not in FINISHED[1:] or job.exit_codes:
            return None
        key = (cluster, job.job_id)
        if key not in _EXIT_CODES:
            try:
                text = await self._call(lambda: self.client.logs(
                    cluster, job.job_id, tail=20, timeout=self.config.call_timeout))
            except Transient:
                return None
            code = exit_code_in(text)
            if code is None:
                return None
            _EXIT_CODES[key] = code
        return _EXIT_CODES[key]

    def _check_fits(self, spec: ReplicaSpec, shapes: dict[str, list[NodeState]]) -> None:
        nodes = [n for ns in shapes.values() for n in ns]
        if not nodes:
            raise Transient(f"no SkyPilot cluster of {self.name} is UP "
                            f"({', '.join(self.config.sky_clusters)})")
        request = JobMeta.of(spec).reservation
        if any(request.fits_in(n.capacity) for n in nodes):
            return
        biggest = max(nodes, key=lambda n: (n.capacity.cpus, n.capacity.memory))
        raise Permanent(f"replica {spec.name} can never fit a node of cluster {self.name} "
                        f"(largest: {'; '.join(request.shortfall(biggest.capacity))})")

    async def _adopt(self, spec: ReplicaSpec, found: list[Found]) -> ReplicaStatus | None:
        """The status of the job already there for this replica (same or higher attempt), or
        None after cancelling what is left of lower attempts."""
        have = latest(found).get(spec.name)
        if have is None:
            return None
        cluster, job, meta = have
        if meta.job_uid != spec.job_uid:
            raise Permanent(f"replica name {spec.name} is taken by job uid {meta.job_uid}")
        if spec.attempt <= meta.attempt:  # a retry (or a late one): adopt what is there
            return status_of(meta, job, await self._exit_code(cluster, job))
        await self._cancel([(c, j, m) for c, j, m in found
                            if m.name == spec.name and m.attempt < spec.attempt])
        return None

    async def _exec(self, spec: ReplicaSpec, meta: JobMeta, cluster: str) -> ReplicaStatus:
        job_id = await self._call(lambda: self.client.exec_async(
            cluster, meta.job_name(), spec.run, replica_env(spec), cpus=meta.whole_cpus,
            timeout=self.config.call_timeout))
        return status_of(meta, SkyJob(job_id, meta.job_name(), "PENDING"), None)

    def _place(self, request: Resources, found: list[Found],
               shapes: dict[str, list[NodeState]]) -> str:
        """The first cluster with room for ``request`` now, else the first where it fits a node
        (it waits in SkyPilot's queue there)."""
        used = reserved(found)
        fits = [c for c in self.config.sky_clusters
                if any(request.fits_in(n.capacity) for n in shapes.get(c, []))]
        for cluster in fits:
            free = allocate(shapes[cluster], used.get(cluster, []))
            if any(request.fits_in(n.allocatable) for n in free):
                return cluster
        if not fits:
            raise Transient(f"no UP SkyPilot cluster of {self.name} has a node for the request")
        return fits[0]

    async def _cancel(self, hits: list[Found]) -> None:
        """Cancel the unfinished jobs (one call per SkyPilot cluster); remember the finished
        ones as deleted."""
        by_cluster: dict[str, list[int]] = {}
        for cluster, job, _ in hits:
            if job.status not in FINISHED:
                by_cluster.setdefault(cluster, []).append(job.job_id)

        def cancel(cluster: str, ids: list[int]) -> None:
            self.client.cancel(cluster, ids, timeout=self.config.call_timeout)

        await asyncio.gather(*(asyncio.to_thread(cancel, c, ids)
                               for c, ids in by_cluster.items()))
        finished = {f"{c}:{j.job_id}" for c, j, _ in hits if j.status in FINISHED}
        if finished:
            self._tombstones.save(self._tombstones.load() | finished)

    async def _delete_where(self, match: Callable[[JobMeta], bool], sent: float,
                            names: set[str] | None = None) -> list[str]:
        hits = self._finished_in_listing(match, sent, names)
        if hits is None:
            hits = [f for f in await self._list() if match(f[2])]
        await self._cancel(hits)
        return sorted({m.name for _, _, m in hits})

    def _finished_in_listing(self, match: Callable[[JobMeta], bool], sent: float,
                             names: set[str] | None) -> list[Found] | None:
        """The last listing's jobs that ``match``, when they can stand for a `sky queue` of the
        delete's own (seconds, beside whatever else SkyPilot's API server runs): the listing was
        asked for under 15 s ago, after the last exec this process sent of them (``sent``),
        names every replica asked for (``names``), and each of its jobs had finished. A
        finished job stays finished, so deleting it is only remembering it; one still running
        must be cancelled, and one sent since may have landed: those list afresh. The usual
        case is a job's teardown once it ended, right after the round that saw it end."""
        asked = self._listed_from
        hits = [f for f in self._listed[1] if match(f[2])]
        if (time.monotonic() - asked >= _SUBMIT_REUSE or sent >= asked or not hits
                or any(job.status not in FINISHED for _, job, _ in hits)
                or (names is not None and not names <= {m.name for _, _, m in hits})):
            return None
        return hits


def _retrieved(task: asyncio.Task[Any]) -> None:
    """A listing's failure is its callers' to see; one whose callers all gave up is not logged
    as never retrieved."""
    if not task.cancelled():
        task.exception()


__all__ = ["FAILED", "SkyConfig", "SkyPilotManager"]
