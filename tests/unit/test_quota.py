"""Quotas: the kind's validation, the CLI's --hard, and admission in schedule_batch."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from skyshift.activities.quotas import namespace_usage, replicas_held
from skyshift.cli.errors import UsageProblem
from skyshift.cli.quotas import parse_hard, used_over_hard
from skyshift.models import parse_object
from skyshift.models.quantity import Resources
from skyshift.scheduler import schedule_batch
from skyshift.scheduler.quota import QuotaInfo
from tests.unit.test_scheduler_core import cluster, job


def quota(ns: str = "ml", used: dict[str, float] | None = None, **hard: float) -> QuotaInfo:
    return QuotaInfo("team", ns, dict(hard), dict(used or {}))


def test_hard_limits_are_read_in_the_schedulers_units() -> None:
    obj = parse_object({"kind": "Quota", "metadata": {"name": "q", "namespace": "ml"},
                        "spec": {"hard": {"cpus": "1500m", "memory": "2Gi", "jobs": 3,
                                          "accelerator/A100": "4"}}})
    assert obj.spec.hard == {"cpus": 1.5, "memory": pytest.approx(2147.483648), "jobs": 3.0,
                             "accelerator/A100": 4.0}


@pytest.mark.parametrize(("hard", "field"), [
    ({"cpu": 1}, "unknown quota key 'cpu'"),
    ({"jobs": 1.5}, "jobs must be a whole number"),
    ({"gpus": -1}, "gpus must be between 0"),
    ({"accelerator/": 1}, "invalid accelerator type"),
    ({"memory": "lots"}, "invalid memory"),
])
def test_bad_limits_are_refused_naming_the_key(hard: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        parse_object({"kind": "Quota", "metadata": {"name": "q", "namespace": "ml"},
                      "spec": {"hard": hard}})


def test_cli_hard_flag() -> None:
    assert parse_hard("cpus=8, memory=32Gi,accelerator/A100=4") == {
        "cpus": "8", "memory": "32Gi", "accelerator/A100": "4"}
    with pytest.raises(UsageProblem, match="'cpus' is given twice"):
        parse_hard("cpus=1,cpus=2")
    with pytest.raises(UsageProblem, match="expected KEY=VALUE"):
        parse_hard("cpus")
    shown = used_over_hard({"spec": {"hard": {"cpus": 8, "memory": 4294.967296}},
                            "status": {"used": {"cpus": 2.5}}})
    assert shown == "cpus: 2.5/8, memory: 0MB/4Gi"


def test_a_job_over_quota_waits_naming_the_quota_and_what_is_short() -> None:
    jobs = [job("a", cpus=2, namespace="ml", created=1), job("b", cpus=2, namespace="ml",
                                                              created=2)]
    a, b = schedule_batch(jobs, [cluster("c1", 8)], [], [quota(cpus=3)])
    assert a.assignments == {"c1": 1}
    assert b.assignments == {}
    assert b.message == ("waiting for quota: over Quota ml/team: cpus 2 of 3 used, "
                         "needs 2 more")


def test_quota_counts_what_the_namespace_holds_and_spares_other_namespaces() -> None:
    jobs = [job("a", namespace="ml"), job("b", namespace="web")]
    a, b = schedule_batch(jobs, [cluster("c1", 8)], [], [quota(jobs=2, used={"jobs": 2})])
    assert not a.placed and "jobs 2 of 2 used, needs 1 more" in a.message
    assert b.placed


def test_scale_up_of_an_admitted_job_is_not_charged_a_job() -> None:
    more = dataclasses.replace(job("a", replicas=2, namespace="ml"), admitted=True)
    (d,) = schedule_batch([more], [cluster("c1", 8)], [], [quota(jobs=1, replicas=3,
                                                                 used={"jobs": 1, "replicas": 1})])
    assert d.assignments == {"c1": 2}


def test_a_job_that_does_not_fit_capacity_charges_no_quota() -> None:
    big, small = job("big", cpus=16, namespace="ml", priority=5), job("s", namespace="ml")
    a, b = schedule_batch([big, small], [cluster("c1", 4)], [], [quota(cpus=17)])
    assert not a.placed and "clusters fit" in a.message
    assert b.placed
    (c,) = schedule_batch([big], [cluster("c1", 32)], [], [quota(cpus=4)])
    assert c.message == ("waiting for quota: over Quota ml/team: cpus: the job alone needs 16, "
                         "over the hard limit 4 (raise the quota or shrink the job)")


def test_per_accelerator_limits() -> None:
    jobs = [job("a", namespace="ml", accelerators={"A100": 2}),
            job("b", namespace="ml", accelerators={"T4": 4})]
    gpus = cluster("g", 8)
    gpus.nodes[0].free = Resources(8, 64_000, 0, {"A100": 8, "T4": 8})
    acc = QuotaInfo("acc", "ml", {"accelerator/A100": 3}, {"accelerator/A100": 2})
    a, b = schedule_batch(jobs, [gpus], [], [acc])
    assert not a.placed and "accelerator/A100 2 of 3 used, needs 2 more" in a.message
    assert b.placed


def test_usage_counts_placed_jobs_until_they_end() -> None:
    def stored(name: str, phase: str, placement: dict[str, int]) -> dict[str, object]:
        return {"metadata": {"name": name, "namespace": "ml"},
                "spec": {"resources": {"cpus": 2, "memory": 100}},
                "status": {"phase": phase, "placement": placement}}

    jobs = [stored("run", "Running", {"c1": 2, "c2": 1}), stored("done", "Succeeded", {"c1": 4}),
            stored("wait", "Pending", {}), stored("b", "Running", {"c1": 1})]
    assert replicas_held(jobs[0]) == 3 and replicas_held(jobs[1]) == 0
    # "b" is in this round: its queue entry (3 held) counts, not its stored placement
    used = namespace_usage(jobs, {"ml/b": (Resources(1, 0), 3)})
    assert used == {"cpus": 9.0, "memory": 300.0, "gpus": 0.0, "replicas": 6.0, "jobs": 2.0}


def member(ns: str, cpus: float, used: float = 0, weight: float = 1.0,
           limit: float | None = None) -> QuotaInfo:
    return QuotaInfo(f"q-{ns}", ns, {"cpus": cpus}, {"cpus": used}, cohort="pool", weight=weight,
                     borrowing_limit={} if limit is None else {"cpus": limit})


def test_a_cohort_lends_what_its_members_leave_unused() -> None:
    quotas = [member("a", 4, used=4), member("b", 4, used=1)]
    jobs = [job(f"j{i}", cpus=1, namespace="a", created=i) for i in range(4)]
    decisions = schedule_batch(jobs, [cluster("c1", 32)], [], quotas)
    assert [d.placed for d in decisions] == [True, True, True, False]  # b leaves 3 unused
    assert decisions[3].message == ("waiting for quota: over Quota a/q-a: cpus 7 of 4 used, "
                                    "needs 1 more, and cohort pool has 0 unused")


def test_borrowing_limit_bounds_what_one_member_takes() -> None:
    quotas = [member("a", 4, used=4, limit=1), member("b", 4)]
    first, second = schedule_batch([job("x", namespace="a"), job("y", namespace="a", created=1)],
                                   [cluster("c1", 32)], [], quotas)
    assert first.placed and not second.placed
    assert "cpus 5 used of 4 plus at most 1 borrowed, needs 1 more" in second.message


def test_equal_priority_goes_to_the_namespace_furthest_below_its_weighted_share() -> None:
    # a holds 4 of the cohort's 16 cpus, b none: b's jobs go first until the shares meet
    quotas = [member("a", 8, used=4), member("b", 8)]
    jobs = [job(f"a{i}", namespace="a", created=i) for i in range(4)]
    jobs += [job(f"b{i}", namespace="b", created=10 + i) for i in range(8)]
    decisions = schedule_batch(jobs, [cluster("c1", 8)], [], quotas)  # room for 8 replicas
    placed = [d.key for d in decisions if d.placed]
    assert sorted(placed) == sorted([f"a/a{i}" for i in range(2)] + [f"b/b{i}" for i in range(6)])


def test_weights_scale_the_share_and_priority_still_comes_first() -> None:
    quotas = [member("a", 8), member("b", 8, weight=3)]
    jobs = [job(f"a{i}", namespace="a", created=i) for i in range(8)]
    jobs += [job(f"b{i}", namespace="b", created=10 + i) for i in range(8)]
    jobs.append(job("urgent", namespace="a", priority=9, created=99))
    decisions = schedule_batch(jobs, [cluster("c1", 9)], [], quotas)
    placed = {d.key for d in decisions if d.placed}
    assert "a/urgent" in placed
    assert len([k for k in placed if k.startswith("b/")]) == 6  # 3:1 of the 8 left
    assert len([k for k in placed if k.startswith("a/a")]) == 2
