"""The control worker: ``python -m skyshift.workers.control``.

Polls the ``skyshift-control`` task queue with the workflow of every kind with a lifecycle
(:mod:`skyshift.workflows.registry`), the scheduler's, replica operations' and schedule runs', and
the activities that touch etcd or need the Temporal client (status writes,
finalizer removal, enqueue and batch placement), and runs the reconciler. It holds no state of
its own, so any number of control workers can run side by side (each reconciler pass is
idempotent), woken by a health watch of Temporal as soon as Temporal is back after an outage.
Configured by :meth:`Settings.from_env` plus ``SKYSHIFT_RECONCILE_INTERVAL`` (seconds between
passes), ``SKYSHIFT_TEMPORAL_PROBE`` (seconds between health checks of Temporal; 0: no watch) and
``SKYSHIFT_WARM_PROVISIONER`` (default on: start SkyPilot's runner at start, where SkyPilot is
installed, so that the first provisioned Cluster does not wait for its import; 0: on the first
launch).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from skyshift.activities.links import LinkActivities
from skyshift.activities.orders import OrderActivities
from skyshift.activities.pipelines import PipelineActivities
from skyshift.activities.provisioning import ProvisioningActivities, warm_provisioner
from skyshift.activities.schedules import ScheduleActivities
from skyshift.activities.scheduling import SchedulingActivities
from skyshift.activities.service_store import ServiceStoreActivities
from skyshift.activities.store import StoreActivities
from skyshift.config import Settings
from skyshift.contract.names import CONTROL_QUEUE, QUERY_DEPTH, SCHEDULER_ID
from skyshift.lifecycle.starter import signal_scheduler
from skyshift.metrics import QUEUE_DEPTH
from skyshift.store import ObjectStore
from skyshift.workers import payload_hints
from skyshift.workers.common import (
    cancel_and_wait,
    clear_ready,
    connect_store,
    connect_temporal,
    env_flag,
    env_float,
    mark_ready,
    ready_path,
    setup_logging,
    stop_event,
)
from skyshift.workers.job_phases import JobPhases
from skyshift.workers.metrics_http import every, start_from_env
from skyshift.workers.quota_watch import QuotaWatch
from skyshift.workers.reconciler import Reconciler
from skyshift.workers.rules_watch import RulesWatch
from skyshift.workers.temporal_watch import TemporalWatch
from skyshift.workflows.registry import control_workflows

log = logging.getLogger(__name__)
#: each kind's lifecycle workflow (from the table in contract/lifecycles.py) and the helpers
WORKFLOWS = control_workflows()


QUEUE_POLL = 5.0  # seconds between queue-depth queries when metrics are on


async def queue_depth(client: Client) -> None:
    """Ask the scheduler workflow how many jobs wait (a query: no history event)."""
    handle = client.get_workflow_handle(SCHEDULER_ID)
    QUEUE_DEPTH.set(await handle.query(QUERY_DEPTH, result_type=int))


def control_worker(
    client: Client, store: ObjectStore, task_queue: str = CONTROL_QUEUE, *, sandbox: bool = False,
) -> Worker:
    """The control worker (not started): workflows plus control activities.

    Workflows run without the Temporal sandbox unless ``sandbox`` (``SKYSHIFT_WORKFLOW_SANDBOX=1``):
    the sandbox re-imports and compiles each workflow module for every workflow instance, which
    was about 30% of this worker's CPU during a burst of new jobs (bench/lifecycle.py, py-spy).
    What the sandbox guards against (non-deterministic calls in workflow code) is still checked:
    the workflow tests and the replay test run the same workflows inside it.
    """
    st = StoreActivities(store, client)
    sched = SchedulingActivities(store, client)
    svc = ServiceStoreActivities(store)
    pl = PipelineActivities(store, client)
    sc = ScheduleActivities(store, client)
    ln = LinkActivities(store)
    pv = ProvisioningActivities(store)  # SkyPilot is imported on the first launch, not here
    orders = OrderActivities(store)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[
            st.write_job_status, st.read_job, st.remove_object, st.write_cluster_status,
            st.notify_cluster_jobs, sched.enqueue_job, sched.dequeue_job, sched.place_batch,
            svc.read_service, svc.service_view, svc.write_service_status, svc.write_endpoints,
            pl.start_step, pl.read_step_jobs, pl.delete_owned, pl.write_pipeline_status,
            pl.read_pipeline, sc.sync_schedule, sc.drop_schedule, sc.start_run, sc.read_run,
            sc.stop_run, ln.view_link, ln.write_link_status, pv.provision_cluster,
            pv.unprovision_cluster, pv.cluster_usage, orders.post_submit_order,
            orders.withdraw_submit_orders,
        ],
        workflow_runner=SandboxedWorkflowRunner() if sandbox else UnsandboxedWorkflowRunner(),
        max_cached_workflows=4000,
        max_concurrent_workflow_task_polls=8,
        max_concurrent_activity_task_polls=4,
        graceful_shutdown_timeout=timedelta(seconds=5),
    )


async def serve(
    client: Client, store: ObjectStore, stop: asyncio.Event, *,
    reconcile_interval: float = 30.0, ready_file: Path | None = None, metrics: bool = False,
    temporal_probe: float = 1.0, warm: bool = False,
) -> None:
    """Run the worker and the reconciler until ``stop`` is set (and, with ``metrics``, poll the
    scheduler's queue depth for ``skyshift_scheduler_queue_depth`` and keep ``skyshift_jobs``
    current from a watch of the jobs). ``temporal_probe``: seconds
    between health checks of Temporal that wake the reconciler when it is back (0: none).
    ``warm``: get the provisioner ready beside the worker (:func:`warm_provisioner`)."""
    if warm:
        threading.Thread(target=warm_provisioner, name="warm-provisioner", daemon=True).start()
    worker = control_worker(client, store, sandbox=env_flag("SKYSHIFT_WORKFLOW_SANDBOX"))
    reconciler = Reconciler(store, client, reconcile_interval)
    rules = RulesWatch(store, lambda what: signal_scheduler(client, what))
    quotas = QuotaWatch(store, lambda what: signal_scheduler(client, what))
    async with worker:
        tasks = [asyncio.create_task(reconciler.run(stop)), asyncio.create_task(rules.run(stop)),
                 asyncio.create_task(quotas.run(stop))]
        if temporal_probe > 0:
            watch = TemporalWatch(client, reconciler.wake, every=temporal_probe)
            tasks.append(asyncio.create_task(watch.run(stop)))
        if metrics:
            tasks.append(asyncio.create_task(every(QUEUE_POLL, stop, lambda: queue_depth(client))))
            tasks.append(asyncio.create_task(JobPhases(store).run(stop)))
        if ready_file is not None:
            mark_ready(ready_file)
        log.info("control worker polling %s", CONTROL_QUEUE)
        try:
            await stop.wait()
        finally:
            await cancel_and_wait(tasks)
            if ready_file is not None:
                clear_ready(ready_file)


async def main() -> None:
    setup_logging()
    payload_hints.install()  # decode payloads without re-resolving type hints each time
    settings = Settings.from_env()
    stop = stop_event()
    runtime, metrics = start_from_env()
    try:
        client = await connect_temporal(settings, stop, runtime=runtime)
        store = await connect_store(settings, stop)
    except asyncio.CancelledError:
        return
    try:
        await serve(
            client, store, stop,
            reconcile_interval=env_float("SKYSHIFT_RECONCILE_INTERVAL", 30.0),
            temporal_probe=env_float("SKYSHIFT_TEMPORAL_PROBE", 1.0),
            ready_file=ready_path(settings, "control"), metrics=metrics is not None,
            warm=env_flag("SKYSHIFT_WARM_PROVISIONER", default=True),
        )
    finally:
        await store.close()
        if metrics is not None:
            metrics.stop()


if __name__ == "__main__":
    asyncio.run(main())
