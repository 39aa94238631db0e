"""ReplicaOpWorkflow: logs of, or a command in, a job's replicas, on their clusters' queues.

Logs and exec must run where the replica is (its cluster's skylet), and only a workflow can
dispatch an activity to a task queue. A short workflow of its own, rather than an update on the
JobWorkflow, keeps these reads out of the job's history and works for finished jobs too (their
workflow may have ended). It tries the job's clusters in turn; "not here" is not an error until
every cluster has said so.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.jobs import ReplicaOpInput, ReplicaOpResult
    from skyshift.contract.names import WF_REPLICA_OP, skylet_queue

OP_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=300), maximum_attempts=3)


@workflow.defn(name=WF_REPLICA_OP)
class ReplicaOpWorkflow:
    @workflow.run
    async def run(self, inp: ReplicaOpInput) -> ReplicaOpResult:
        merged = ReplicaOpResult()
        errors: list[str] = []
        # logs: an attempt gets the op's timeout (the read is bounded); exec: the command's, plus
        # time to reach the replica
        limit = inp.timeout if inp.op == "logs" else inp.timeout + 30
        for cluster in inp.clusters:
            one = ReplicaOpInput(inp.op, [cluster], inp.names, inp.tail, inp.command, inp.timeout)
            try:
                res: ReplicaOpResult = await workflow.execute_activity(
                    act.REPLICA_OP, one, result_type=ReplicaOpResult,
                    task_queue=skylet_queue(cluster),
                    schedule_to_start_timeout=timedelta(seconds=10),
                    start_to_close_timeout=timedelta(seconds=limit),
                    retry_policy=OP_RETRY,
                )
            except ActivityError as err:
                errors.append(f"Transient: cluster {cluster}: {err.cause or err}")
                continue
            if inp.op == "exec":
                if res.exit_code is not None:
                    return res
                errors.append(res.error)
                continue
            merged.found.update(res.found)
            if res.error:  # a NotFound says why (not started yet) when no cluster has it
                errors.append(res.error)
        if not merged.found or inp.op == "exec":
            merged.error = next((e for e in errors if not e.startswith("NotFound")), "") or (
                errors[0] if errors else "NotFound: no such replica"
            )
        return merged
