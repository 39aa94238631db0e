"""The ``ray`` cluster manager: replicas are Ray jobs, driven through the Ray Jobs API.

A Ray cluster is attached by the address of its dashboard (which serves the Jobs API), e.g.
``skyctl create cluster r1 --manager ray --address http://127.0.0.1:8265``. Config
(``Cluster.spec.config``)::

    address           http(s)://host:port of the Ray dashboard (required)
    request_timeout   seconds before a Jobs API call counts as hung -> Transient [default 30]
    delete_wait       at most this many seconds a delete waits for a stopped job to end
                      before removing it [default 30]
    labels            labels the cluster reports for placement filters

How replicas map onto Ray: one Ray job per replica attempt, submitted with a deterministic
``submission_id``: the replica name (``<job>-<uid8>-<rank>``) for the first attempt,
``<name>.<attempt>`` for restarts (``map.submission_id``: Ray cannot safely take an id
again). A submit looks the cluster's SkyShift jobs up once per batch: a replica already
there with the same or a higher attempt is adopted, never submitted twice; a lower attempt is
stopped and removed first; two submits racing on one id meet Ray's "already exists" and the
loser adopts. A batch of first attempts that is not a retried activity (``compat.base.RESUBMIT``)
takes the last ``list_jobs`` of a sync round when it was asked for under 15 s before
(``_SUBMIT_REUSE``) instead of listing again: a first attempt's id is its name, so one that landed
since meets "already exists" and is adopted all the same; restarts always list afresh.
The entrypoint is ``run`` (Ray runs it with ``/bin/sh``); ``envs`` plus
``SKYSHIFT_JOB``/``_NAMESPACE``/``_RANK``/``_REPLICA`` go in ``runtime_env.env_vars``;
``resources`` become ``entrypoint_num_cpus``, ``entrypoint_memory``, ``entrypoint_num_gpus``
and ``entrypoint_resources`` (``map.entrypoint_resources``), which Ray reserves for the
entrypoint while it runs. The submission's ``metadata`` marks it as SkyShift's and carries the
replica's identity, attempt and reservation (``map.RayMeta``): jobs without it are never
listed or touched. ``image`` is ignored, as by the ``local`` manager: the entrypoint runs in the
Ray node's own environment (a Ray cluster's image is chosen when the cluster is built, not per
job).

Calls: ``replicas()`` is one ``list_jobs`` (the latest attempt of each replica); ``state()`` is
``list_nodes`` (Ray's state API, served by the dashboard) for each node's total resources and
liveness, plus ``list_jobs`` for what SkyShift's pending and running replicas reserve
(allocatable = total minus that; Ray work started by others is not counted). A sync round
calls ``replicas()`` then ``state()``: ``state()`` takes the round's ``list_jobs`` when it is
under half a second old and no delete ran since (``_ROUND_REUSE``; the same snapshot, so every
replica the round reports is accounted in the allocatable it writes), and the nodes listed
under a second before (``_NODES_REUSE``): a round of the 1 s interval lists the nodes again, a
quick round after a submit (every 0.2 s) is one ``list_jobs`` and nothing else. ``delete`` and
``delete_job`` list once, then per submission ``stop_job``, a bounded wait until it is
terminal, and ``delete_job``. Ray's job monitor may write a deleted job's final status back
after the delete (a record with entrypoint "Entrypoint not found." and no metadata); the next
``replicas()`` removes such records of jobs this adapter deleted, in the background. ``logs`` is
``get_job_logs`` of the latest attempt, without the job supervisor's own lines. There is no
``exec`` into a Ray job, and no services: both raise ``Unsupported``.

``JobSubmissionClient`` is synchronous (``requests``, no timeouts of its own): every call runs
in a thread and is abandoned as Transient after ``request_timeout``. ``ray`` is imported here
only, lazily, so SkyShift without Ray installed builds every other adapter; a ray cluster then
reports a Permanent error that says to install ``skyshift[ray]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from skyshift.compat.base import RESUBMIT
from skyshift.compat.common.fit import check_fits
from skyshift.compat.common.name_locks import NameLocks
from skyshift.compat.errors import NotFound, Permanent, Transient, Unsupported
from skyshift.compat.ray.map import (
    RayMeta,
    classify,
    current,
    custom_resources,
    entrypoint_resources,
    is_ghost,
    is_terminal,
    node_capacity,
    replica_env,
    reservation,
    status_of,
    submission_id,
    user_log,
    validate_spec,
)
from skyshift.compat.types import (
    PENDING,
    RUNNING,
    ClusterState,
    ExecResult,
    NodeState,
    ReplicaSpec,
    ReplicaStatus,
)
from skyshift.models.quantity import Resources

T = TypeVar("T")
_SUBMIT_REUSE = 15.0  # seconds a submit of first attempts takes the last listing as its own
_ROUND_REUSE = 0.5  # seconds: state() takes a listing of jobs this recent (its round's replicas())
_NODES_REUSE = 1.0  # seconds: state() takes a listing of nodes this recent (a dead node: seen late)
_GHOST_WINDOW = 300.0  # seconds after a delete during which its ghost record is looked for
INSTALL_HINT = "install Ray with `pip install 'skyshift[ray]'` (ray[default])"


@dataclass
class RayConfig:
    address: str
    request_timeout: float = 30.0
    delete_wait: float = 30.0
    labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, name: str, config: dict[str, Any]) -> RayConfig:
        address = config.get("address")
        if not isinstance(address, str) or not address.startswith(("http://", "https://")):
            raise Permanent(f"ray cluster {name}: address must be the dashboard's URL, "
                            f"like http://127.0.0.1:8265")
        if len(address) > 2048 or any(c.isspace() for c in address):
            raise Permanent(f"ray cluster {name}: address is not a URL")

        def number(key: str, default: float) -> float:
            value = config.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise Permanent(f"ray cluster {name}: {key} must be a number > 0")
            return float(value)

        labels = config.get("labels") or {}
        if not isinstance(labels, dict):
            raise Permanent(f"ray cluster {name}: labels must map strings to strings")
        return cls(address.rstrip("/"), number("request_timeout", 30.0),
                   number("delete_wait", 30.0), {str(k): str(v) for k, v in labels.items()})


def _dump(job: Any) -> dict[str, Any]:
    """A ``JobDetails``/``JobInfo`` (pydantic model or dataclass) as a plain dict."""
    if isinstance(job, dict):
        return job
    for attr in ("model_dump", "dict"):
        fn = getattr(job, attr, None)
        if callable(fn):
            out = fn()
            if isinstance(out, dict):
                return out
    return dict(vars(job))


class RayManager:
    """ClusterManager over the Ray Jobs API (see the module docstring)."""

    manager = "ray"
    #: the skylet lists again right after a submit, then every 0.2 s for 15 s (activities.sync):
    #: a listing is one HTTP request, a Ray job takes seconds to start (its supervisor actor)
    quick_poll = (0.2, 15.0)

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.config = RayConfig.parse(name, config)
        self._client: Any = None
        self._names = NameLocks()
        self._nodes_seen: list[NodeState] | None = None
        self._custom: set[str] = set()
        self._deleted: dict[str, float] = {}  # submission id -> when this adapter deleted it
        self._listed: tuple[float, list[dict[str, Any]]] = (0.0, [])  # last list_jobs, asked at
        self._nodes_listed: tuple[float, list[dict[str, Any]]] = (0.0, [])  # last list_nodes
        self._deleting_until = 0.0  # when this adapter's last delete ended: listings before, stale
        self._deleting = 0  # deletes under way (their jobs are still listed)
        self._background: set[asyncio.Task[None]] = set()

    # ---- ClusterManager -------------------------------------------------------------------

    async def connect(self) -> None:
        if self._client is not None:
            return
        try:
            from ray.job_submission import JobSubmissionClient
        except ImportError as exc:
            raise Permanent(f"ray cluster {self.name}: {INSTALL_HINT} ({exc})") from exc
        # the constructor asks the dashboard for its version: a network call
        self._client = await self._call(
            "connect", lambda: JobSubmissionClient(self.config.address,
                                                   create_cluster_if_needed=False))

    async def identity(self) -> str:
        """The head's session (``session_name`` of the dashboard's /api/version: new each
        time a Ray cluster starts), so two addresses of one head agree; else the address."""

        def version() -> dict[str, Any]:
            url = f"{self.config.address}/api/version"
            with urllib.request.urlopen(url, timeout=self.config.request_timeout) as resp:
                doc = json.loads(resp.read())
            return doc if isinstance(doc, dict) else {}

        session = (await self._call("version", version)).get("session_name")
        return f"ray:session={session}" if session else f"ray:address={self.config.address}"

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        self._client = None

    async def state(self) -> ClusterState:
        await self.connect()
        nodes_raw, jobs = await asyncio.gather(self._recent_nodes(),
                                                self._recent_jobs(_ROUND_REUSE))
        alive = [n for n in nodes_raw if str(n.get("state") or "").upper() == "ALIVE"]
        dead = len(nodes_raw) - len(alive)
        totals = [dict(n.get("resources_total") or {}) for n in alive]
        self._custom = set().union(*(custom_resources(t) for t in totals)) if totals else set()
        caps = {str(n.get("node_id")): node_capacity(t) for n, t in zip(alive, totals,
                                                                           strict=True)}
        used = {node_id: Resources() for node_id in caps}
        head = next((str(n.get("node_id")) for n in alive if n.get("is_head_node")),
                    next(iter(caps), ""))
        for job in jobs:
            got = status_of(job)
            if got is None or got[1].state not in (PENDING, RUNNING):
                continue  # finished (or stopped earlier attempts): they hold nothing
            node_id = str(job.get("driver_node_id") or "")
            node_id = node_id if node_id in used else head
            if node_id in used:
                used[node_id] = used[node_id] + reservation(got[0], self._custom)
        nodes = []
        for n in alive:
            node_id = str(n.get("node_id"))
            label = str(n.get("node_name") or n.get("node_ip") or "")
            nodes.append(NodeState(name=f"{label}-{node_id[:8]}" if label else node_id[:16],
                                   capacity=caps[node_id],
                                   allocatable=caps[node_id] - used[node_id]))
        self._nodes_seen = nodes
        message = f"{len(alive)} node(s) alive" + (f", {dead} dead" if dead else "")
        return ClusterState(healthy=bool(alive),
                            message=message if nodes_raw else "no nodes",
                            nodes=nodes, labels=dict(self.config.labels))

    async def submit(self, replicas: list[ReplicaSpec]) -> list[ReplicaStatus]:
        for spec in replicas:
            validate_spec(spec)
        await self.connect()
        if self._nodes_seen is None:
            await self.state()
        first: dict[str, ReplicaSpec] = {}
        for spec in replicas:  # the same name twice in one batch is submitted once
            first.setdefault(spec.name, spec)
        for spec in first.values():
            self._check_fits(spec)
        async with self._names.hold(list(first)):
            # one listing for the batch: what each name has already (any attempt)
            existing = current(await self._submit_listing(list(first.values())))
            results = await asyncio.gather(
                *(self._submit_one(s, existing.get(s.name)) for s in first.values()),
                return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        done = {s.name: r for s, r in zip(first.values(), results, strict=True)
                if isinstance(r, ReplicaStatus)}
        return [done[spec.name] for spec in replicas]

    async def replicas(self) -> list[ReplicaStatus]:
        await self.connect()
        jobs = await self._list_jobs()
        self._reap_ghosts(jobs)
        return [status for _, status, _ in sorted(current(jobs).values(),
                                                   key=lambda c: c[0].name)]

    async def delete(self, names: list[str]) -> None:
        await self.connect()
        wanted = set(names)
        await self._delete_where(lambda meta: meta.name in wanted)

    async def delete_job(self, job_uid: str) -> list[str]:
        await self.connect()
        return await self._delete_where(lambda meta: meta.job_uid == job_uid)

    async def logs(self, name: str, tail: int | None = None) -> str:
        await self.connect()
        found = current(await self._list_jobs()).get(name)
        if found is None:
            raise NotFound(f"replica {name} not found on cluster {self.name}")
        sid = found[2]
        text = await self._call("get_job_logs", lambda: self._client.get_job_logs(sid))
        return user_log(str(text), sid, tail)

    async def exec(self, name: str, command: list[str], timeout: float = 60) -> ExecResult:
        raise Unsupported(f"Ray jobs have no exec (cluster {self.name}); run the command as "
                          "part of the job, or read its output with logs")

    # ---- helpers --------------------------------------------------------------------------

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn`` in a thread, bounded by ``request_timeout``; errors become compat errors."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn), self.config.request_timeout)
        except TimeoutError as exc:
            raise Transient(f"{what} on Ray cluster {self.name} timed out after "
                            f"{self.config.request_timeout:g}s") from exc
        except Exception as exc:
            raise classify(what, exc, self.name) from exc

    async def _list_jobs(self) -> list[dict[str, Any]]:
        asked = time.monotonic()
        jobs = [_dump(j) for j in await self._call("list_jobs", lambda: self._client.list_jobs())]
        self._listed = (asked, jobs)
        return jobs

    async def _submit_listing(self, specs: list[ReplicaSpec]) -> list[dict[str, Any]]:
        """The jobs a submit of ``specs`` checks against: the last listing (a sync round's) when
        it is recent and every spec is a first attempt of a submit not retried, else a new one.
        A first attempt's submission id is its replica name, so a job of that name that landed
        after the listing (sent by this process, or by another attempt of the same replica)
        answers the submit with "already exists" and is adopted (``_submit_one``). A restart
        must see the earlier attempts to stop them, and a retried submit may be late behind a
        newer attempt: those list afresh, as does a submit after this adapter deleted a job
        (the listing would still show it, and a replica placed again would be adopted)."""
        first = not RESUBMIT.get() and all(s.attempt == 0 for s in specs)
        return await self._recent_jobs(_SUBMIT_REUSE, first)

    async def _recent_jobs(self, max_age: float, allowed: bool = True) -> list[dict[str, Any]]:
        """The last ``list_jobs`` when ``allowed``, under ``max_age`` seconds old and no delete
        ran or runs since it was asked (it would still show the deleted jobs), else a new
        one."""
        asked, jobs = self._listed
        if (allowed and time.monotonic() - asked < max_age and asked > self._deleting_until
                and not self._deleting):
            return jobs
        return await self._list_jobs()

    async def _recent_nodes(self) -> list[dict[str, Any]]:
        """The last ``list_nodes`` when it is under ``_NODES_REUSE`` old, else a new one."""
        asked, nodes = self._nodes_listed
        if nodes and time.monotonic() - asked < _NODES_REUSE:
            return nodes
        asked = time.monotonic()
        nodes = await self._list_nodes()
        self._nodes_listed = (asked, nodes)
        return nodes

    async def _list_nodes(self) -> list[dict[str, Any]]:
        from ray.util.state import list_nodes

        timeout = max(1, int(self.config.request_timeout))
        nodes = await self._call("list_nodes", lambda: list_nodes(
            address=self.config.address, timeout=timeout, raise_on_missing_output=False))
        return [_dump(n) for n in nodes]

    async def _info(self, name: str) -> dict[str, Any] | None:
        try:
            info = await self._call("get_job_info", lambda: self._client.get_job_info(name))
        except NotFound:
            return None
        return _dump(info)

    def _check_fits(self, spec: ReplicaSpec) -> None:
        check_fits(spec.name, reservation(RayMeta.of(spec), self._custom),
                   self._nodes_seen or [], f"Ray cluster {self.name}")

    async def _submit_one(self, spec: ReplicaSpec,
                          have: tuple[RayMeta, ReplicaStatus, str] | None) -> ReplicaStatus:
        if have is not None:
            if have[0].job_uid != spec.job_uid:
                raise Permanent(f"replica name {spec.name} is taken by job uid "
                                f"{have[0].job_uid}")
            if spec.attempt <= have[0].attempt:  # a retry (or a late one): adopt what is there
                return have[1]
        sid = submission_id(spec.name, spec.attempt)
        kwargs = dict(
            entrypoint=spec.run,
            submission_id=sid,
            runtime_env={"env_vars": replica_env(spec)},
            metadata=RayMeta.of(spec).to_metadata(),
            **entrypoint_resources(spec.resources, self._custom),
        )
        if have is not None:  # a restart: what is left of earlier attempts goes first
            name = spec.name
            await self._delete_where(lambda m: m.name == name and m.attempt < spec.attempt)
        try:
            await self._call("submit_job", lambda: self._client.submit_job(**kwargs))
        except Transient as exc:
            if "already exists" not in f"{exc} {exc.__cause__}":
                raise
            # a retried submit: the job is there, adopt it (or refuse a stranger's)
            info = await self._info(sid)
            got = status_of(info) if info is not None else None
            if got is None:
                raise Transient(f"submission id {sid} is taken on Ray cluster {self.name} by "
                                "a job that is not a SkyShift replica (or was just deleted); "
                                "will retry") from exc
            meta, status = got
            if meta.job_uid != spec.job_uid:
                raise Permanent(
                    f"replica name {spec.name} is taken by job uid {meta.job_uid}") from exc
            return status
        return ReplicaStatus(
            name=spec.name, job_uid=spec.job_uid, namespace=spec.namespace,
            job_name=spec.job_name, rank=spec.rank, state=PENDING,
            message=f"Ray job {sid}", attempt=spec.attempt,
        )

    async def _delete_where(self, match: Callable[[RayMeta], bool]) -> list[str]:
        """Stop and remove every submission of SkyShift's whose metadata ``match`` selects (all
        attempts); returns the replica names that were listed."""
        jobs = await self._list_jobs()
        hits: list[tuple[str, dict[str, Any]]] = []
        for job in jobs:
            got = status_of(job)
            if got is not None and match(got[0]):
                hits.append((str(job.get("submission_id") or ""), job))
        listed = sorted({n for n, (m, _, _) in current(jobs).items() if match(m)})
        self._deleting += 1
        try:
            await asyncio.gather(*(self._remove(sid, job) for sid, job in hits if sid))
        finally:
            self._deleting -= 1
            self._deleting_until = time.monotonic()
        return listed

    async def _remove(self, sid: str, info: dict[str, Any] | None = None) -> None:
        """stop_job, a bounded wait until the job is terminal, delete_job."""
        if info is None or not is_terminal(info):
            with contextlib.suppress(NotFound):
                await self._call("stop_job", lambda: self._client.stop_job(sid))
            deadline = time.monotonic() + self.config.delete_wait
            while True:
                info = await self._info(sid)
                if info is None:
                    return
                if is_terminal(info):
                    break
                if time.monotonic() > deadline:
                    raise Transient(f"Ray job {sid} on cluster {self.name} did not stop within "
                                    f"{self.config.delete_wait:g}s")
                await asyncio.sleep(0.1)
        with contextlib.suppress(NotFound):
            await self._call("delete_job", lambda: self._client.delete_job(sid))
        self._deleted[sid] = time.monotonic()

    def _reap_ghosts(self, jobs: list[dict[str, Any]]) -> None:
        """Remove, in the background, the records Ray re-created for jobs this adapter deleted
        (``map.GHOST_ENTRYPOINT``); they would otherwise stay in Ray's job table."""
        now = time.monotonic()
        self._deleted = {k: t for k, t in self._deleted.items() if now - t < _GHOST_WINDOW}
        for job in jobs:
            sid = str(job.get("submission_id") or "")
            if sid in self._deleted and is_ghost(job) and is_terminal(job):
                del self._deleted[sid]
                task = asyncio.create_task(self._forget(sid))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    async def _forget(self, sid: str) -> None:
        with contextlib.suppress(Exception):  # best effort: garbage in Ray's table at worst
            await self._call("delete_job", lambda: self._client.delete_job(sid))
