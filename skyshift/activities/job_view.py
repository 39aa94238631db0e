"""What a job's workflow believes about its replicas on one cluster, asked by a skylet.

etcd's ``status.placement`` is a copy the workflow and the scheduler write; the workflow's state
is where a job's replicas are. A skylet that finds replicas of a job whose stored placement does
not name its cluster must not remove them on the strength of that copy alone (a placement round
retried after a Temporal restart once overwrote it, and the sweep then killed the job's only
replica while the job stayed Running). It asks the workflow (a query) and removes them only when
the workflow does not hold them there; when it does, the workflow is told (``ClusterEvent``
"drift"), so it writes its placement back and etcd agrees again.
"""

from __future__ import annotations

import logging

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from skyshift.contract.jobs import DRIFT, ClusterEvent, JobState
from skyshift.contract.names import QUERY_STATE, SIG_CLUSTER, job_workflow_id

log = logging.getLogger(__name__)


async def workflow_holds(client: Client, namespace: str, job: str, cluster: str) -> bool | None:
    """True: the job's workflow has replicas on ``cluster``; False: it has none there, or the
    job has no workflow; None: Temporal did not answer (decide nothing this round)."""
    handle = client.get_workflow_handle(job_workflow_id(namespace, job))
    try:
        state = await handle.query(QUERY_STATE, result_type=JobState)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        log.warning("cannot ask the workflow of %s/%s about %s: %s", namespace, job, cluster, exc)
        return None
    except Exception as exc:  # a query the worker failed (e.g. no worker yet): ask again later
        log.warning("cannot ask the workflow of %s/%s about %s: %s", namespace, job, cluster, exc)
        return None
    return any(r.cluster == cluster for r in state.replicas)


async def tell_drift(client: Client, namespace: str, job: str, cluster: str) -> None:
    """Tell the workflow that etcd's placement misses its replicas on ``cluster``."""
    handle = client.get_workflow_handle(job_workflow_id(namespace, job))
    try:
        await handle.signal(SIG_CLUSTER, ClusterEvent(
            cluster, DRIFT, "the stored placement does not name this cluster"))
    except RPCError as exc:  # a finished job: its replicas stay for their logs, nothing to fix
        log.info("placement of %s/%s not repaired: %s", namespace, job, exc)
