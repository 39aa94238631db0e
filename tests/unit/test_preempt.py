"""Victim choice for preemption (skyshift.scheduler.preempt): pure, no I/O."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from skyshift.activities.preemption import nominate, running_of
from skyshift.activities.store import apply_job_patch
from skyshift.cli.main import cli
from skyshift.contract.jobs import (
    UNPLACED,
    EnqueueRequest,
    JobState,
    JobStatusPatch,
    QueueEntry,
    ReplicaRecord,
)
from skyshift.models import parse_object
from skyshift.models.quantity import Resources
from skyshift.scheduler import schedule_batch
from skyshift.scheduler.preempt import Running, choose_victims
from skyshift.scheduler.quota import QuotaInfo
from skyshift.scheduler.types import Decision
from skyshift.workflows import jobstate as js
from tests.unit.test_scheduler_core import cluster, job


def running(
    name: str,
    priority: int = 0,
    cpus: float = 1,
    started: float = 0.0,
    namespace: str = "default",
    **placement: int,
) -> Running:
    return Running(
        f"{namespace}/{name}",
        f"uid-{name}",
        namespace,
        priority,
        started,
        Resources(cpus, 0, 0),
        dict(placement) or {"c1": 1},
    )


def names(victims: list[Running]) -> list[str]:
    return [v.key.split("/", 1)[1] for v in victims]


def test_evicts_the_fewest_lowest_priority_newest_jobs_that_make_room() -> None:
    full = [cluster("c1", 0)]  # nothing free: four 1-cpu jobs hold the node
    holders = [
        running("old", 1, started=1),
        running("new", 1, started=2),
        running("low", 0, started=0),
        running("mid", 5, started=3),
    ]
    assert names(choose_victims(job("hi", cpus=1, priority=10), holders, full)) == ["low"]
    assert names(choose_victims(job("hi", cpus=2, priority=10), holders, full)) == ["low", "new"]


def test_only_strictly_lower_priority_and_nothing_when_it_would_not_help() -> None:
    full = [cluster("c1", 0)]
    same = [running("peer", 10)]
    assert choose_victims(job("hi", priority=10), same, full) == []
    lower = [running("low", 0)]
    assert choose_victims(job("hi", cpus=2, priority=10), lower, full) == []  # 1 cpu is not 2


def test_never_does_not_preempt() -> None:
    hi = dataclasses.replace(job("hi", priority=10), preemption="Never")
    assert choose_victims(hi, [running("low", 0)], [cluster("c1", 0)]) == []


def test_a_gang_is_evicted_whole() -> None:
    gang = running("gang", 0, cpus=1, c1=3)
    victims = choose_victims(job("hi", cpus=1, priority=5), [gang], [cluster("c1", 0)])
    assert victims == [gang]  # the whole job goes, all 3 replicas, though 1 cpu would do


def test_victims_on_other_clusters_are_spared_again() -> None:
    clusters = [cluster("c1", 0), cluster("c2", 0)]
    holders = [running("a", 0, started=5, c2=1), running("b", 1, started=0, c1=1)]
    assert names(choose_victims(job("hi", priority=5, cpus=1), holders, clusters)) == ["a"]


def test_borrowed_capacity_is_reclaimed_first() -> None:
    lender = QuotaInfo("q", "lend", {"cpus": 2}, {"cpus": 0}, cohort="pool")
    borrower = QuotaInfo("q", "borrow", {"cpus": 2}, {"cpus": 4}, cohort="pool")
    holders = [
        running("mine", 0, cpus=2, started=9, namespace="lend"),
        running("b1", 3, cpus=2, started=1, namespace="borrow"),
        running("b2", 3, cpus=2, started=2, namespace="borrow"),
    ]
    hi = job("hi", cpus=2, priority=5, namespace="lend")
    victims = choose_victims(hi, holders, [cluster("c1", 0)], [], [lender, borrower])
    assert names(victims) == ["b2"]  # borrowed, and newest of the borrowers


def test_a_job_over_its_own_quota_evicts_only_its_own_namespace() -> None:
    own = QuotaInfo("q", "ml", {"cpus": 1}, {"cpus": 1})
    holders = [running("other", 0, namespace="web"), running("mine", 0, namespace="ml")]
    hi = job("hi", priority=5, namespace="ml")
    free = [cluster("c1", 4)]
    assert names(choose_victims(hi, holders, free, [], [own])) == ["mine"]


def test_preemption_policy_in_the_spec_and_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_obj = parse_object({"kind": "Job", "metadata": {"name": "j"}, "spec": {}})
    assert job_obj.spec.preemptionPolicy == "PreemptLowerPriority"
    with pytest.raises(ValidationError, match="preemptionPolicy"):
        parse_object(
            {"kind": "Job", "metadata": {"name": "j"}, "spec": {"preemptionPolicy": "Sometimes"}}
        )
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)
    ok = CliRunner().invoke(
        cli, ["create", "job", "j", "--preemption-policy", "never", "--dry-run"]
    )
    assert ok.exit_code == 0 and "preemptionPolicy: Never" in ok.stdout, ok.output
    bad = CliRunner().invoke(cli, ["create", "job", "j", "--preemption-policy", "x"])
    assert bad.exit_code == 2 and "--preemption-policy" in bad.stderr
    assert "Traceback" not in bad.output


def test_a_preempted_job_state_goes_back_to_the_queue() -> None:
    s = JobState(
        phase="Running",
        awaiting=0,
        replicas=[
            ReplicaRecord(0, "c1", 0, "Running", submitted=True),
            ReplicaRecord(1, "c1", 2, "Succeeded"),
        ],
    )
    assert js.evicted(s, "Preempted by default/hi: why") == 1
    first, done = s.replicas
    assert (first.cluster, first.state, first.attempt, first.submitted) == ("", UNPLACED, 1, False)
    assert done.state == "Succeeded"  # a finished replica is not run again
    assert (s.phase, s.message) == ("Pending", "Preempted by default/hi: why")


def test_the_preempted_condition_and_the_running_jobs_etcd_shows() -> None:
    obj: dict[str, Any] = {"metadata": {"uid": "u"}, "status": {"phase": "Running"}}
    patch = JobStatusPatch("default", "low", "u", phase="Pending", placement={}, preempted="why")
    out = apply_job_patch(obj, patch)
    assert out is not None
    (cond,) = out["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["message"]) == ("Preempted", "True", "why")
    jobs = [
        {
            "metadata": {"name": "a", "namespace": "ml", "uid": "1"},
            "spec": {"priority": 3, "resources": {"cpus": 2}},
            "status": {"phase": "Running", "placement": {"c1": 2}},
        },
        {
            "metadata": {"name": "b", "namespace": "ml", "uid": "2"},
            "spec": {},
            "status": {"phase": "Succeeded", "placement": {"c1": 1}},
        },
        {
            "metadata": {"name": "c", "namespace": "ml", "uid": "3"},
            "spec": {},
            "status": {"phase": "Running", "placement": {"c1": 1}},
        },
    ]
    (a,) = running_of(jobs, skip={"ml/c"})
    assert (a.key, a.priority, a.per_replica.cpus, a.placement) == ("ml/a", 3, 2.0, {"c1": 2})


def test_a_preemptor_goes_before_older_jobs_of_its_priority() -> None:
    older = job("older", cpus=2, priority=10, created=1)
    preemptor = dataclasses.replace(job("hi", cpus=2, priority=10, created=2), nominated=True)
    first, second = schedule_batch([older, preemptor], [cluster("c1", 2)], [])
    assert (first.placed, second.placed) == (False, True)


def test_a_lender_within_its_quota_reclaims_from_a_borrower_of_any_priority() -> None:
    lender = QuotaInfo("q", "lend", {"cpus": 2}, {"cpus": 0}, cohort="pool")
    borrower = QuotaInfo("q", "borrow", {"cpus": 2}, {"cpus": 4}, cohort="pool")
    holders = [
        running("b1", 9, cpus=2, started=1, namespace="borrow"),
        running("b2", 9, cpus=2, started=2, namespace="borrow"),
    ]
    mine = job("mine", cpus=2, priority=0, namespace="lend")
    victims = choose_victims(mine, holders, [cluster("c1", 0)], [], [lender, borrower])
    assert names(victims) == ["b2"]  # priority 9 > 0, but it runs on quota "lend" lent
    # over its own quota the lender borrows itself, and reclaims nothing
    greedy = job("greedy", cpus=3, priority=0, namespace="lend")
    assert choose_victims(greedy, holders, [cluster("c1", 0)], [], [lender, borrower]) == []


def test_a_job_that_would_borrow_spares_a_lender_within_its_quota() -> None:
    # "lend" runs within its 2 cpus; "borrow" (at its own 2) wants 2 more: evicting "lend"'s job
    # by priority would let it borrow what "lend" takes straight back
    lender = QuotaInfo("q", "lend", {"cpus": 2}, {"cpus": 2}, cohort="pool")
    borrower = QuotaInfo("q", "borrow", {"cpus": 2}, {"cpus": 2}, cohort="pool")
    holders = [
        running("l1", 0, cpus=2, started=5, namespace="lend"),  # newest: first by priority alone
        running("b1", 0, cpus=2, started=1, namespace="borrow"),
    ]
    hi = job("hi", cpus=2, priority=9, namespace="borrow")
    victims = choose_victims(hi, holders, [cluster("c1", 0)], [], [lender, borrower])
    assert names(victims) == ["b1"]  # its own namespace's job, not the lender's
    outside = job("hi", cpus=2, priority=9, namespace="web")  # no cohort: priority alone
    assert names(choose_victims(outside, holders[:1], [cluster("c1", 0)])) == ["l1"]


def test_what_the_victims_free_one_by_one_is_held_for_the_preemptor() -> None:
    """CI: of two 1-cpu victims on a 2-cpu cluster one was deleted first; the round then saw 1 cpu
    free, where the 2-cpu preemptor did not fit yet, and gave it back to that victim (queued
    again): the preemptor waited for the victim's whole run."""
    big = dataclasses.replace(job("big", cpus=2, priority=10, created=3), nominated=True,
                              waits_on=["pe-two"])
    low = job("low-1", cpus=1, priority=-5, created=1)
    polite = dataclasses.replace(job("polite", cpus=2, priority=5, created=2), preemption="Never")
    half = schedule_batch([low, polite, big], [cluster("pe-two", 1)], [])
    assert not any(d.placed for d in half)
    assert "its free capacity is held for default/big, which preempted jobs there" in (
        half[0].reasons["pe-two"])
    both = schedule_batch([low, polite, big], [cluster("pe-two", 2)], [])
    assert [d.placed for d in both] == [False, False, True]
    # held only where its victims ran, and only while it waits for them (nominated)
    elsewhere = schedule_batch([low, big], [cluster("other", 1), cluster("pe-two", 1)], [])
    assert elsewhere[0].assignments == {"other": 1}
    expired = dataclasses.replace(big, nominated=False)
    assert schedule_batch([low, expired], [cluster("pe-two", 1)], [])[0].placed


def test_a_nomination_names_the_clusters_its_victims_ran_on() -> None:
    req = job("big", cpus=2, priority=10)
    entry = QueueEntry(EnqueueRequest("job/default/big", 1, req))
    decision = Decision(req.key, req.uid, message="0/2 clusters fit")
    holders = [
        {"metadata": {"name": n, "namespace": "default", "uid": n},
         "spec": {"priority": -5, "resources": {"cpus": 1}},
         "status": {"phase": "Running", "placement": {c: 1}}}
        for n, c in (("low-1", "pe-two"), ("low-2", "pe-two"), ("far", "far"))
    ]
    nominate([entry], [decision], running_of(holders, set()),
             [cluster("far", 0), cluster("pe-two", 0)], [], [])
    assert decision.victims == ["default/low-1", "default/low-2"]
    assert decision.waits_on == ["pe-two"]
