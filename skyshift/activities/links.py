"""Activities of the Link lifecycle: read a link and its clusters, probe its gateway, write its
status.

``view_link`` and ``write_link_status`` are control-queue activities on etcd (run as local
activities). ``probe_tcp`` runs on the *source* cluster's task queue (``skylet-<cluster>``), so
the gateway is tried from where SkyShift reaches that cluster, not from the control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from temporalio import activity

from skyshift.activities.store import uid_of, update_status
from skyshift.activities.trust import check_host, check_port, check_ref, untrusted
from skyshift.contract import activity_names as act
from skyshift.contract.links import LinkRef, LinkStatusPatch, LinkView, ProbeInput, ProbeResult
from skyshift.models.base import Obj
from skyshift.models.meta import now_iso
from skyshift.store import NotFound, ObjectStore


def cluster_problem(role: str, name: str, cluster: Obj | None) -> str:
    if cluster is None:
        return f"{role} cluster {name} does not exist"
    meta, status = cluster.get("metadata") or {}, cluster.get("status") or {}
    if meta.get("deletionTimestamp"):
        return f"{role} cluster {name} is being deleted"
    phase = str(status.get("phase") or "Init")
    if phase != "Ready":
        why = str(status.get("message") or "")
        return f"{role} cluster {name} is {phase}" + (f": {why}" if why else "")
    return ""


async def probe(address: str, port: int, timeout: float) -> ProbeResult:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), timeout)
    except TimeoutError:
        return ProbeResult(False, f"no answer within {timeout:g} s")
    except OSError as err:  # asyncio's message hides the reason: say it ("Connection refused")
        return ProbeResult(False, os.strerror(err.errno) if err.errno else str(err))
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return ProbeResult(True)


class LinkActivities:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    async def _get(self, plural: str, name: str) -> Obj | None:
        try:
            return await self.store.get(plural, name)
        except NotFound:
            return None

    @activity.defn(name=act.VIEW_LINK)
    async def view_link(self, ref: LinkRef) -> LinkView:
        with untrusted(act.VIEW_LINK):
            check_ref(ref.name, None, ref.uid, 'link name')
        link = await self._get("links", ref.name)
        if link is None or uid_of(link) != ref.uid:
            return LinkView(found=False)
        meta, spec = link.get("metadata") or {}, link.get("spec") or {}
        gateway = spec.get("gateway") or {}
        view = LinkView(
            found=True, deleting=bool(meta.get("deletionTimestamp")),
            generation=int(meta.get("generation") or 0),
            source=str(spec.get("source_cluster") or ""),
            target=str(spec.get("target_cluster") or ""),
            gateway_address=str(gateway.get("address") or ""),
            gateway_port=int(gateway.get("port") or 0),
        )
        for role, name in (("source", view.source), ("target", view.target)):
            if problem := cluster_problem(role, name, await self._get("clusters", name)):
                view.problem = problem
                break
        return view

    @activity.defn(name=act.WRITE_LINK_STATUS)
    async def write_link_status(self, patch: LinkStatusPatch) -> bool:
        with untrusted(act.WRITE_LINK_STATUS):
            check_ref(patch.name, None, patch.uid, 'link name')
        def mutate(obj: Obj) -> Obj | None:
            if uid_of(obj) != patch.uid:
                return None
            status = obj.setdefault("status", {})
            deleting = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
            new = {"phase": status.get("phase") if deleting else patch.phase,
                   "message": patch.message, "observedGeneration": patch.generation,
                   "workflowId": patch.workflow_id}
            if all(status.get(k) == v for k, v in new.items()):
                return None
            status.update(new, since=now_iso())
            return obj

        return await update_status(self.store, "links", patch.name, None, mutate)


class ProbeActivities:
    """On every cluster's task queue: can this side open a TCP connection to there?"""

    @activity.defn(name=act.PROBE_TCP)
    async def probe_tcp(self, inp: ProbeInput) -> ProbeResult:
        with untrusted(act.PROBE_TCP):
            check_host(inp.address, 'gateway address')
            check_port(inp.port, 'gateway port')
        return await probe(inp.address, inp.port, inp.timeout)
