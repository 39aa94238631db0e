"""What every workflow shares: search attribute keys, retry policies and activity timeouts.

Kept in one place so the three lifecycles retry the same way: transient
errors are retried by Temporal with backoff, compat errors that retrying cannot fix arrive as
non-retryable ApplicationErrors, and no workflow loops on a failure by hand.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.jobs import RemoveObjectInput
    from skyshift.contract.names import CLUSTER as CLUSTER
    from skyshift.contract.names import KIND as KIND
    from skyshift.contract.names import NAMESPACE as NAMESPACE
    from skyshift.contract.names import PHASE as PHASE


NON_RETRYABLE = ["Permanent", "Unsupported", "NotFound", "InvalidArgument", "TooLarge"]

#: store reads/writes (local activities): etcd blips and CAS contention
STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5),
    non_retryable_error_types=NON_RETRYABLE,
)
STORE_TIMEOUT = timedelta(seconds=30)

#: calls on a cluster's task queue: unlimited retries of Transient, nothing else retried
SKYLET_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500), maximum_interval=timedelta(seconds=10),
    non_retryable_error_types=NON_RETRYABLE,
)
SKYLET_TIMEOUT = timedelta(seconds=300)
#: long calls heartbeat (activities.clusters.heartbeating): a killed worker is noticed this fast
HEARTBEAT_TIMEOUT = timedelta(seconds=10)


def permanent_cause(err: BaseException) -> str | None:
    """The message of a non-retryable failure inside ``err`` (None when it was transient)."""
    cause = err.cause if isinstance(err, ActivityError) else err
    if isinstance(cause, ApplicationError) and (
        cause.non_retryable or cause.type in NON_RETRYABLE
    ):
        return cause.message
    return None


async def wait(condition: Callable[[], bool], timeout: timedelta | None) -> None:
    """``workflow.wait_condition`` that simply returns when ``timeout`` passes."""
    with contextlib.suppress(TimeoutError):
        await workflow.wait_condition(condition, timeout=timeout)


def current_keywords() -> dict[str, str]:
    """The workflow's keyword search attributes as set at start (or carried over)."""
    return {
        p.key.name: p.value
        for p in workflow.info().typed_search_attributes
        if isinstance(p.value, str)
    }


def upsert(values: list[tuple[SearchAttributeKey[str], str]], current: dict[str, str]) -> None:
    """Upsert only the search attributes whose value changed (each upsert is an event)."""
    changed = [(k, v) for k, v in values if current.get(k.name) != v]
    if not changed:
        return
    workflow.upsert_search_attributes([k.value_set(v) for k, v in changed])
    current.update({k.name: v for k, v in changed})


def history_full(limit: int) -> bool:
    """Time to continue-as-new: the server suggests it or the history reached ``limit`` events."""
    info = workflow.info()
    return info.is_continue_as_new_suggested() or info.get_current_history_length() >= limit


async def remove_object(plural: str, name: str, uid: str, namespace: str | None = None) -> None:
    """The finalizer's last step: delete the object from etcd (only if its uid still matches)."""
    await workflow.execute_local_activity(
        act.REMOVE_OBJECT, RemoveObjectInput(plural, name, uid, namespace),
        start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
    )
