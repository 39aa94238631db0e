"""Submit orders: how a job's replicas reach its cluster without an activity per submit.

A JobWorkflow of lifecycle revision ``SUBMIT_ORDERS`` does not schedule a ``submit_replicas``
activity on the skylet's task queue when its replicas are placed. It writes a
:class:`~skyshift.contract.jobs.SubmitOrder` to etcd with a local activity (one marker event in
its history, no task round trip through the server) under ``submitorders/<cluster>/<name>``;
the skylet of that cluster watches its orders and carries each out
(:mod:`skyshift.activities.order_runner`): the same checks and the same idempotent submit as
the activity, then it deletes the order. What a job learns of it comes the way every other
change does, in the sync loop's reports (a short job is told only that it ended); a cluster
that refuses an order for good tells the job with a ``rejected`` cluster event.

Per job, that is 6 history events and a workflow task fewer (the activity's scheduled,
started and completed, and the workflow task its result woke), and one activity task less
for the Temporal server to dispatch (bench/temporal_cost.py).

Before a workflow deletes replicas on a cluster (a lost cluster, a failure, a preemption, a
scale-down, the job's deletion) it withdraws its orders there, and the skylet carries out an
order and deletes replicas of the same job one at a time, re-reading the order first: an order
is never carried out after the delete that should have followed it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from temporalio import activity
from temporalio.converter import value_to_type

from skyshift.activities.trust import check_name, check_replica, check_uid, untrusted
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import SubmitInput, SubmitOrder, WithdrawOrders
from skyshift.contract.names import order_prefix
from skyshift.models.base import Obj
from skyshift.store import AlreadyExists, ObjectStore

ORDERS = "submitorders"  # the store's plural; the namespace is the cluster's name


def check_order(order: SubmitOrder) -> None:
    """What a skylet would refuse (a forged input is refused here already)."""
    sub = order.submit
    check_name(sub.cluster, "cluster name")
    check_name(order.name, "order name")
    if not order.name.startswith(order_prefix(sub.job.uid)):
        raise ValueError(f"order {order.name!r} is not named after job uid {sub.job.uid!r}")
    check_name(sub.job.name, "job name")
    for replica in sub.replicas:
        check_replica(replica)
        if replica.job_uid != sub.job.uid or replica.job_name != sub.job.name:
            raise ValueError(f"replica {replica.name!r} is not of job {sub.job.name!r}")


def order_object(order: SubmitOrder) -> Obj:
    return {
        "metadata": {"name": order.name, "namespace": order.submit.cluster},
        "spec": dataclasses.asdict(order.submit),
    }


def order_of(obj: Obj) -> SubmitOrder:
    """The order stored as ``obj`` (TypeError/ValueError when it is not one)."""
    meta: dict[str, Any] = obj.get("metadata") or {}
    submit = value_to_type(SubmitInput, obj.get("spec"), [])
    if not isinstance(submit, SubmitInput):
        raise TypeError("not a submit order")
    return SubmitOrder(str(meta.get("name") or ""), submit)


class OrderActivities:
    """The control worker's side: write and withdraw orders (local activities)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    @activity.defn(name=act.POST_SUBMIT_ORDER)
    async def post_submit_order(self, order: SubmitOrder) -> None:
        with untrusted(act.POST_SUBMIT_ORDER):
            check_order(order)
        # AlreadyExists: this local activity ran before in a workflow task that did not complete
        with contextlib.suppress(AlreadyExists):
            await self.store.create(ORDERS, order_object(order))

    @activity.defn(name=act.WITHDRAW_SUBMIT_ORDERS)
    async def withdraw_submit_orders(self, inp: WithdrawOrders) -> int:
        """Delete the job's orders on one cluster (one request); returns how many were still
        there (not carried out yet)."""
        with untrusted(act.WITHDRAW_SUBMIT_ORDERS):
            check_name(inp.cluster, "cluster name")
            check_uid(inp.job_uid, "job uid")
        return await self.store.delete_prefix(ORDERS, order_prefix(inp.job_uid), inp.cluster)
