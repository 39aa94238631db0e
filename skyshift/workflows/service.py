"""ServiceWorkflow (``service/<ns>/<name>``): a service on its primary cluster, plus Endpoints.

The design: "creates the service on its primary cluster and keeps cross-cluster endpoints".

* Primary cluster: ``spec.primaryCluster`` when set, else the cluster where most replicas of the
  jobs matching the selector are placed (read from the jobs' status; the service stays where it
  is while matching replicas remain there). No matching replicas yet: phase Pending with a
  message, looked at again on the next refresh.
* Apply: one ``apply_service`` activity on ``skylet-<cluster>`` (idempotent by name). A cluster
  whose manager has no services (Slurm, local) or refuses the spec answers with a non-retryable
  error: phase Failed with that message, and the same spec is never tried there again (a spec
  change or a move of the replicas tries again). A cluster that does not answer within
  ``apply_timeout`` is tried again on the next refresh; no hand-written retry loop.
* Linked clusters (patched ``service-on-linked-clusters``): the service also goes, as a
  selector-less ClusterIP copy, on every cluster a Ready direct Link joins with the primary
  (either direction, not transitive); each cluster fronts the replicas on itself and on the
  clusters of the span it is linked with. Copies go when the link does. ``status.reachable``
  says where the service is and at which address.
* Endpoints: an Endpoints object of the same name holds, per cluster, the number of running
  matching replicas, and the addresses on the clusters the service spans.
* Refresh: a timer every ``config.refresh`` seconds (or the ``refresh`` signal) runs ONE local
  activity that reads the matching jobs and the clusters from etcd; status and Endpoints are
  written only when they change. An idle service therefore costs one timer, one local activity
  and one workflow task per refresh, nothing on the clusters.
* Spec change (``spec_changed``): re-read, re-apply. Deletion (``delete`` or ``ensure`` with
  deletionTimestamp): delete the service on every cluster it was applied to, remove the
  Endpoints, then the Service object (finalizer semantics, as for jobs).
* State is one dataclass (:class:`ServiceState`), carried over continue-as-new.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from skyshift.compat.types import ServiceSpec
    from skyshift.contract import activity_names as act
    from skyshift.contract.names import (
        QUERY_STATE,
        SIG_REFRESH,
        WF_SERVICE,
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
        LinkedCopy,
        Reach,
        ReadServiceInput,
        ReadServiceResult,
        Refresh,
        ServiceInput,
        ServiceState,
        ServiceStatusPatch,
        ServiceTemplate,
        ServiceView,
        ServiceViewInput,
    )
    from skyshift.lifecycle.service_convert import (
        choose_primary,
        compat_spec,
        linked_clusters,
        linked_spec,
        merge_addresses,
        reached,
        target_ports,
    )
    from skyshift.workflows.common import (
        CLUSTER,
        HEARTBEAT_TIMEOUT,
        KIND,
        NAMESPACE,
        PHASE,
        SKYLET_RETRY,
        SKYLET_TIMEOUT,
        STORE_RETRY,
        STORE_TIMEOUT,
        current_keywords,
        history_full,
        permanent_cause,
        remove_object,
        upsert,
        wait,
    )
    from skyshift.workflows.lifecycle import StateLifecycle


BACKENDS_PATCH = "balance-over-linked-replicas"
MESH_PATCH = "service-on-linked-clusters"
ADDRESS_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=300), maximum_attempts=2)


def _selector_text(selector: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


@workflow.defn(name=WF_SERVICE)
class ServiceWorkflow(StateLifecycle[ServiceInput, ServiceState]):
    input_type = ServiceInput

    @workflow.init
    def __init__(self, inp: ServiceInput) -> None:
        self.inp = inp
        self.t: ServiceTemplate = inp.template or ServiceTemplate()
        self.s = inp.state or ServiceState(generation=inp.generation, deleting=inp.deleting)
        self.invalid = inp.invalid
        self.spec_dirty = False
        self.poked = False
        self.successor: ServiceInput | None = None
        self.written: ServiceStatusPatch | None = None
        self.endpoints_written: EndpointsWrite | None = None
        self.sa: dict[str, str] = {}

    # ---- signals and queries ----------------------------------------------------------------

    @workflow.signal(name=SIG_REFRESH)
    def refresh(self, _: Refresh) -> None:
        self.poked = True

    @workflow.query(name=QUERY_STATE)
    def state(self) -> ServiceState:
        return self.s

    # ---- main loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: ServiceInput) -> str:
        self.sa = current_keywords()
        upsert([(KIND, "Service"), (NAMESPACE, inp.namespace)], self.sa)
        while True:
            if self.spec_dirty and not self.s.deleting:
                await self._reload()
            if self.s.deleting:
                return await self._teardown()
            if self.invalid:
                self.s.phase, self.s.message = "Failed", self.invalid
                await self._write_status()
            else:
                await self._round()
            busy = self.spec_dirty or self.s.deleting
            if history_full(self.inp.config.history_limit) and not busy:
                await self._continue_as_new(self._carry())
            self.poked = False
            timeout = None if self.invalid else timedelta(seconds=inp.config.refresh)
            await wait(lambda: self.spec_dirty or self.s.deleting or self.poked, timeout)

    async def _round(self) -> None:
        view: ServiceView = await workflow.execute_local_activity(
            act.SERVICE_VIEW, ServiceViewInput(self.inp.namespace, dict(self.t.selector)),
            result_type=ServiceView, start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
        )
        s = self.s
        target = choose_primary(self.t, view, s.cluster)
        if not target:
            if not s.cluster:
                s.phase = "Pending"
                s.message = (
                    "spec.selector is empty: the service selects no jobs" if not self.t.selector
                    else f"no job in namespace {self.inp.namespace} with labels "
                    f"{_selector_text(self.t.selector)} has replicas placed yet; waiting"
                )
        elif target not in view.clusters:
            s.phase = "Pending" if s.phase != "Ready" else s.phase
            s.message = f"cluster {target} does not exist; waiting for it"
        elif workflow.patched(MESH_PATCH):
            await self._mesh(view, target)
        else:
            wanted = await self._backends(view, target)
            changed = wanted is not None and wanted != (s.backends, s.remote)
            if self._needs_apply(target) or changed:
                await self._apply(target, *(wanted or (None, None)))
        await self._write_endpoints(view)
        await self._write_status()

    async def _mesh(self, view: ServiceView, target: str) -> None:
        """The service on its primary ``target`` and a copy on every cluster linked with it;
        each one in front of the replicas on the clusters it reaches (itself and those a Ready
        direct Link joins with it). Copies go with the primary actually serving (the old one
        while a move has not happened yet); copies on clusters no longer linked are removed."""
        s = self.s
        span = [target, *linked_clusters(view, target)]
        if s.cluster and s.cluster != target:
            span += [c for c in (s.cluster, *linked_clusters(view, s.cluster)) if c not in span]
        await self._gather(view, span)
        found = s.port_addresses
        own = reached(view, target, span)
        backends = merge_addresses(found, own)
        remote = merge_addresses(found, [c for c in own if c != target])
        # a primary that selects its own replicas (Kubernetes) needs no apply when only they moved
        moved = remote != s.remote or (backends != s.backends
                                       and (s.needs_backends or s.cluster != target))
        if self._needs_apply(target) or moved:
            await self._apply(target, backends, remote, prune=False)
        home = s.cluster
        copies = linked_clusters(view, home) if home else []
        if copies and s.applied_generation == s.generation:
            around = [home, *copies]
            await asyncio.gather(*(self._apply_linked(c, merge_addresses(
                found, reached(view, c, around))) for c in copies))
        keep = {home, target, *copies}
        for cluster in [c for c in s.touched if c not in keep]:
            if await self._delete_on(cluster):
                s.touched.remove(cluster)
                s.linked.pop(cluster, None)
        for cluster in [c for c in s.linked if c not in keep or c == home]:
            s.linked.pop(cluster)

    async def _gather(self, view: ServiceView, span: list[str]) -> None:
        """Where the replicas serve on every cluster of ``span`` that runs some (in
        ``port_addresses``, and flat per cluster in ``addresses`` for the Endpoints)."""
        s = self.s
        clusters = [c for c in span if view.job_uids.get(c)]
        ports = target_ports(self.t)
        found = await asyncio.gather(*(self._addresses(c, view.job_uids[c], ports)
                                       for c in clusters))
        s.port_addresses = {c: got for c, got in zip(clusters, found, strict=True) if got}
        s.addresses = {c: sorted({a for v in got.values() for a in v})
                       for c, got in s.port_addresses.items()}

    async def _apply_linked(self, cluster: str, backends: dict[str, list[str]]) -> None:
        """The selector-less copy on a linked cluster, (re)applied when the spec or what it
        fronts changed; one the cluster refused for good is not tried again with this spec."""
        s = self.s
        copy = s.linked.setdefault(cluster, LinkedCopy())
        if copy.failed and copy.failed_generation == s.generation:
            return
        if copy.applied_generation == s.generation and copy.backends == backends:
            return
        if cluster not in s.touched:
            s.touched.append(cluster)
        try:
            res = await self._apply_on(cluster, linked_spec(self.inp, self.t, backends))
        except ActivityError as err:
            why = permanent_cause(err)
            if why is not None:
                if not copy.applied_generation:
                    s.touched.remove(cluster)  # nothing was made there
                copy.failed, copy.failed_generation = why, s.generation
            return  # not answering: tried again on the next refresh
        copy.cluster_ip, copy.applied_generation = res.cluster_ip, s.generation
        copy.backends, copy.failed, copy.failed_generation = dict(backends), "", 0

    def _needs_apply(self, target: str) -> bool:
        s = self.s
        if s.failed == f"{target}@{s.generation}":
            return False  # failed for good with this spec: wait for a change
        if target != s.cluster or s.applied_generation != s.generation:
            return True
        # a load balancer's address comes later: look again until there is one
        return s.phase == "Ready" and self.t.type == "LoadBalancer" and not s.external_ip

    # ---- activities -------------------------------------------------------------------------

    async def _backends(
        self, view: ServiceView, target: str,
    ) -> tuple[dict[str, list[str]], dict[str, list[str]]] | None:
        """(all, remote): where the replicas behind the service serve, on ``target`` and on the
        clusters it reaches through a Ready Link (remote: only those), per target port. For a
        primary that balances over addresses (local: HAProxy) or adds the linked clusters' to
        its own pods (Kubernetes: EndpointSlices). None when it wants neither, or before the
        patch that brought this in."""
        s = self.s
        if s.cluster == target and not (s.needs_backends or s.needs_remote):
            return None
        if not workflow.patched(BACKENDS_PATCH):
            return None
        own = s.cluster != target or s.needs_backends  # not known yet, or wanted
        linked = view.links.get(target, [])
        clusters = [c for c in ((target, *linked) if own else linked) if view.job_uids.get(c)]
        ports = target_ports(self.t)
        found = await asyncio.gather(*(self._addresses(c, view.job_uids[c], ports)
                                       for c in clusters))
        s.addresses = {c: sorted({a for v in got.values() for a in v})
                       for c, got in zip(clusters, found, strict=True) if got}
        every: dict[str, set[str]] = {}
        remote: dict[str, set[str]] = {}
        for cluster, got in zip(clusters, found, strict=True):
            for port, addresses in got.items():
                every.setdefault(port, set()).update(addresses)
                if cluster != target:
                    remote.setdefault(port, set()).update(addresses)
        return ({p: sorted(v) for p, v in sorted(every.items())},
                {p: sorted(v) for p, v in sorted(remote.items())})

    async def _addresses(self, cluster: str, uids: list[str],
                         ports: list[int]) -> dict[str, list[str]]:
        """One cluster's addresses; what it said last time when it does not answer now (the
        balancer's health checks drop the dead ones)."""
        try:
            got: AddressesResult = await workflow.execute_activity(
                act.REPLICA_ADDRESSES, AddressesInput(cluster, sorted(uids), ports),
                result_type=AddressesResult, task_queue=skylet_queue(cluster),
                schedule_to_start_timeout=timedelta(seconds=10),
                start_to_close_timeout=timedelta(seconds=30), retry_policy=ADDRESS_RETRY,
            )
            return got.addresses
        except ActivityError as err:
            workflow.logger.info("addresses on %s unknown: %s", cluster, err.cause or err)
            if cluster in self.s.port_addresses:  # kept per cluster since the mesh patch
                return dict(self.s.port_addresses[cluster])
            known = set(self.s.addresses.get(cluster, []))
            before: dict[str, set[str]] = {}
            for applied in (self.s.backends, self.s.remote):
                for port, addresses in applied.items():
                    before.setdefault(port, set()).update(a for a in addresses if a in known)
            return {p: sorted(v) for p, v in before.items() if v}

    async def _apply(self, target: str, backends: dict[str, list[str]] | None = None,
                     remote: dict[str, list[str]] | None = None, prune: bool = True) -> None:
        s = self.s
        spec = compat_spec(self.inp, self.t, backends, remote)
        if target not in s.touched:
            s.touched.append(target)  # an apply that times out may still have created it
        try:
            res = await self._apply_on(target, spec)
        except ActivityError as err:
            why = permanent_cause(err)
            if why is not None:
                copy = s.linked.get(target)
                if target != s.cluster and target in s.touched and not (
                        copy and copy.applied_generation):  # a copy there stays until removed
                    s.touched.remove(target)
                s.failed = f"{target}@{s.generation}"
                s.phase, s.message = "Failed", f"cannot create service on cluster {target}: {why}"
            else:
                s.message = f"cluster {target} did not answer ({err.cause or err}); trying again"
                if s.phase != "Ready":
                    s.phase = "Pending"
            return
        old = s.cluster
        s.cluster, s.applied_generation, s.failed = target, s.generation, ""
        s.cluster_ip, s.external_ip = res.cluster_ip, res.external_ip
        s.backends, s.needs_backends = dict(backends or {}), res.needs_backends
        s.remote, s.needs_remote = dict(remote or {}), res.needs_remote
        s.phase = "Ready"
        s.message = res.message or f"service on cluster {target}"
        s.linked.pop(target, None)  # a linked copy there is now the primary's service
        if prune and old and old != target and await self._delete_on(old) and old in s.touched:
            s.touched.remove(old)

    async def _apply_on(self, cluster: str, spec: ServiceSpec) -> ApplyServiceResult:
        """The ``apply_service`` activity on ``cluster``'s queue (failures raise)."""
        res: ApplyServiceResult = await workflow.execute_activity(
            act.APPLY_SERVICE, ApplyServiceInput(cluster, spec), result_type=ApplyServiceResult,
            task_queue=skylet_queue(cluster), start_to_close_timeout=SKYLET_TIMEOUT,
            schedule_to_close_timeout=timedelta(seconds=self.inp.config.apply_timeout),
            heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=SKYLET_RETRY,
        )
        return res

    async def _delete_on(self, cluster: str) -> bool:
        try:
            await workflow.execute_activity(
                act.DELETE_SERVICE, DeleteServiceInput(cluster, self.inp.namespace, self.inp.name),
                task_queue=skylet_queue(cluster), start_to_close_timeout=SKYLET_TIMEOUT,
                schedule_to_close_timeout=timedelta(seconds=self.inp.config.teardown_timeout),
                heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=SKYLET_RETRY,
            )
            return True
        except ActivityError as err:
            workflow.logger.warning("delete of service on %s failed: %s", cluster,
                                    err.cause or err)
            return False

    async def _write_endpoints(self, view: ServiceView) -> None:
        s = self.s
        s.endpoints = dict(view.running)
        for cluster in (s.cluster, *view.placed):
            if cluster:
                s.endpoints.setdefault(cluster, 0)
        w = EndpointsWrite(self.inp.namespace, self.inp.name, self.inp.uid,
                           dict(self.t.selector), s.cluster, dict(s.endpoints),
                           addresses={c: list(a) for c, a in s.addresses.items()
                                      if c in s.endpoints})
        if w != self.endpoints_written:
            await workflow.execute_local_activity(
                act.WRITE_ENDPOINTS, w, start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=STORE_RETRY,
            )
            self.endpoints_written = w

    async def _write_status(self) -> None:
        s = self.s
        patch = ServiceStatusPatch(
            self.inp.namespace, self.inp.name, self.inp.uid, phase=s.phase,
            message=s.message + "".join(
                f"; no copy on linked cluster {c}: {copy.failed}"
                for c, copy in sorted(s.linked.items()) if copy.failed),
            cluster=s.cluster, cluster_ip=s.cluster_ip, external_ip=s.external_ip,
            observed_generation=s.generation,
            workflow_id=service_workflow_id(self.inp.namespace, self.inp.name),
            reachable=self._reachable(),
        )
        if patch != self.written:
            await workflow.execute_local_activity(
                act.WRITE_SERVICE_STATUS, patch, start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=STORE_RETRY,
            )
            self.written = patch
        values = [(PHASE, s.phase)]
        if s.cluster:
            values.append((CLUSTER, s.cluster))
        upsert(values, self.sa)

    def _reachable(self) -> list[Reach]:
        s = self.s
        out = [Reach(s.cluster, s.cluster_ip, s.external_ip)] if s.cluster else []
        out += [Reach(c, copy.cluster_ip, role="linked") for c, copy in sorted(s.linked.items())
                if copy.applied_generation and c != s.cluster]
        return out

    async def _reload(self) -> None:
        got = await self._read_stored(
            act.READ_SERVICE, ReadServiceInput(self.inp.namespace, self.inp.name, self.inp.uid),
            ReadServiceResult,
        )
        if got is None:
            return
        self.invalid = got.invalid
        if got.template is not None:
            self.t = got.template
        self.s.generation = got.generation

    # ---- endings ----------------------------------------------------------------------------

    async def _teardown(self) -> str:
        """Delete the service on its cluster, remove the Endpoints, then the object."""
        s = self.s
        s.phase = "Deleting"
        upsert([(PHASE, "Deleting")], self.sa)
        for cluster in sorted({*s.touched, s.cluster} - {""}):
            await self._delete_on(cluster)
        await workflow.execute_local_activity(
            act.WRITE_ENDPOINTS,
            EndpointsWrite(self.inp.namespace, self.inp.name, self.inp.uid, remove=True),
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )
        await remove_object("services", self.inp.name, self.inp.uid, self.inp.namespace)
        return await self._deleted()

    # ---- continue-as-new --------------------------------------------------------------------

    def _carry(self) -> ServiceInput:
        inp = self.inp
        return ServiceInput(
            namespace=inp.namespace, name=inp.name, uid=inp.uid, generation=self.s.generation,
            template=self.t, invalid=self.invalid, state=self.s, config=inp.config,
        )
