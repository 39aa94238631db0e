"""What the API says when a logs read fails on the way: a read that ran out of time is a 504
naming the clusters (it was a 502 "Workflow execution failed" after 120 s), a cluster's own
error keeps its words, and only an unreachable Temporal is "lifecycle plane unavailable"."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, TimeoutError, TimeoutType

from skyshift.api.actions import backend_error as _backend_error
from skyshift.compat.errors import NotFound, Transient
from skyshift.contract.jobs import ReplicaOpInput
from skyshift.lifecycle.starter import LOGS_BUDGET, OpTimeout, _op_failure

INP = ReplicaOpInput("logs", ["sky1"], ["pair-0"])


def test_a_timed_out_read_is_a_504_naming_the_cluster() -> None:
    err = WorkflowFailureError(
        cause=TimeoutError(
            "Workflow timed out", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[]
        )
    )
    failure = _op_failure(err, INP, timedelta(seconds=LOGS_BUDGET))
    assert isinstance(failure, OpTimeout)
    api = _backend_error(failure, "logs of job default/pair")
    assert api.code == 504
    assert f"sky1 did not answer within {LOGS_BUDGET:g}s" in api.message


def test_other_failures_keep_their_words() -> None:
    err = WorkflowFailureError(cause=ApplicationError("boom", type="Broken"))
    api = _backend_error(_op_failure(err, INP, timedelta(seconds=5)), "logs of job default/p")
    assert api.code == 503 and "boom" in api.message and "sky1" in api.message
    assert "lifecycle plane" not in api.message
    cluster = _backend_error(Transient("cluster sky1: activity timed out"), "logs")
    assert cluster.code == 503 and "lifecycle plane" not in cluster.message


def test_not_started_is_a_404_that_says_so() -> None:
    api = _backend_error(
        NotFound("replica pair-0 has not started yet (SkyPilot job 3 on sky1-0 is PENDING)"),
        "logs of job default/pair",
    )
    assert api.code == 404 and "has not started yet" in api.message


def test_a_replica_not_listed_yet_of_a_job_not_started_is_not_started() -> None:
    """Right after the POST the job is placed on sky1 while its submit is still under way:
    the cluster does not list the replica yet, which must not read as a lost replica."""
    from skyshift.lifecycle.starter import not_started

    err = "NotFound: replica hello-0 not found on cluster sky1"
    for phase in ("Pending", "Scheduled"):
        job = {"metadata": {"name": "hello"}, "status": {"phase": phase}}
        said = not_started(job, ["sky1"], err)
        assert said is not None and said.startswith("NotFound: ")
        api = _backend_error(NotFound(said.partition(": ")[2]), "logs of job default/hello")
        assert api.code == 404 and "has not started yet" in api.message
        assert "sky1" in api.message and "hello-0 not found" in api.message
    running = {"metadata": {"name": "hello"}, "status": {"phase": "Running"}}
    assert not_started(running, ["sky1"], err) is None  # a running job's missing replica
    pending = {"metadata": {"name": "hello"}, "status": {"phase": "Pending"}}
    assert not_started(pending, ["sky1"], "Transient: cluster sky1: timed out") is None
