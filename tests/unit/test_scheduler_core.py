"""schedule_batch: ordering, per-node capacity, gang placement, spreading, reasons, determinism."""

import dataclasses
import random

import pytest

from skyshift.models.quantity import Resources
from skyshift.scheduler import (
    ClusterInfo,
    Decision,
    Filter,
    FilterPolicyInfo,
    JobRequest,
    NodeInfo,
    Preference,
    schedule_batch,
)


def cluster(
    name: str,
    *node_cpus: float,
    memory: float = 64_000,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    gpus: int = 0,
) -> ClusterInfo:
    nodes = [NodeInfo(f"{name}-n{i}", Resources(c, memory, gpus)) for i, c in enumerate(node_cpus)]
    return ClusterInfo(name, labels or {}, ready, nodes)


def job(
    name: str,
    cpus: float = 1,
    replicas: int = 1,
    priority: int = 0,
    created: float = 0.0,
    memory: float = 0,
    gpus: int = 0,
    accelerators: dict[str, int] | None = None,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    filters: list[Filter] | None = None,
    preferences: list[Preference] | None = None,
) -> JobRequest:
    return JobRequest(
        key=f"{namespace}/{name}", uid=f"uid-{name}", namespace=namespace, labels=labels or {},
        priority=priority, created=created, replicas=replicas,
        per_replica=Resources(cpus, memory, gpus, accelerators or {}),
        filters=filters or [], preferences=preferences or [],
    )


def by_key(decisions: list[Decision]) -> dict[str, Decision]:
    return {d.key.split("/", 1)[1]: d for d in decisions}


def one(j: JobRequest, clusters: list[ClusterInfo],
        policies: list[FilterPolicyInfo] | None = None) -> Decision:
    [d] = schedule_batch([j], clusters, policies or [])
    return d


# --- ordering -------------------------------------------------------------------------------

def test_higher_priority_wins_scarce_capacity_regardless_of_input_order() -> None:
    clusters = [cluster("a", 4)]
    low = job("low", cpus=4, priority=0, created=1)
    high = job("high", cpus=4, priority=10, created=2)
    d = by_key(schedule_batch([low, high], clusters, []))
    assert d["high"].assignments == {"a": 1}
    assert d["low"].assignments == {}
    assert "reserved by jobs placed earlier in this batch" in d["low"].reasons["a"]


def test_fifo_within_a_priority() -> None:
    clusters = [cluster("a", 4)]
    late = job("late", cpus=4, created=200)
    early = job("early", cpus=4, created=100)
    d = by_key(schedule_batch([late, early], clusters, []))
    assert d["early"].placed and not d["late"].placed


def test_key_breaks_ties_of_priority_and_time() -> None:
    clusters = [cluster("a", 4)]
    d = by_key(schedule_batch([job("b", cpus=4), job("a", cpus=4)], clusters, []))
    assert d["a"].placed and not d["b"].placed


def test_decisions_come_back_in_input_order() -> None:
    jobs = [job("z", priority=0), job("y", priority=5), job("x", priority=1)]
    out = schedule_batch(jobs, [cluster("a", 8)], [])
    assert [d.key for d in out] == [j.key for j in jobs]
    assert [d.uid for d in out] == [j.uid for j in jobs]


def test_lower_priority_job_backfills_what_a_blocked_job_cannot_use() -> None:
    clusters = [cluster("a", 4)]
    big = job("big", cpus=8, priority=10)
    small = job("small", cpus=2, priority=0)
    d = by_key(schedule_batch([big, small], clusters, []))
    assert d["big"].assignments == {}
    assert d["small"].assignments == {"a": 1}


# --- capacity -------------------------------------------------------------------------------

def test_batch_never_overcommits_a_cluster() -> None:
    clusters = [cluster("a", 4, 4)]  # room for 8 one-cpu replicas
    jobs = [job(f"j{i}", cpus=1, created=i) for i in range(20)]
    out = schedule_batch(jobs, clusters, [])
    placed = [d for d in out if d.placed]
    assert sum(d.assignments["a"] for d in placed) == 8
    assert [d.key for d in placed] == [f"default/j{i}" for i in range(8)]
    for d in out[8:]:
        assert not d.placed
        assert "reserved by jobs placed earlier in this batch" in d.reasons["a"]


def test_overcommit_check_covers_memory_gpus_and_accelerators() -> None:
    c = ClusterInfo("a", {}, True, [NodeInfo("n", Resources(64, 4000, 2, {"A100": 2}))])
    jobs = [job(f"j{i}", cpus=1, memory=1500, gpus=1, accelerators={"A100": 1}, created=i)
            for i in range(4)]
    out = schedule_batch(jobs, [c], [])
    assert [d.placed for d in out] == [True, True, False, False]


def test_fit_is_per_node_not_per_cluster_total() -> None:
    clusters = [cluster("a", 2, 2)]  # 4 cpus free, but as two 2-cpu nodes
    d = one(job("j", cpus=3), clusters)
    assert d.assignments == {}
    assert d.reasons["a"] == "insufficient resources: cpus: need 3, largest free node has 2"


def test_replicas_of_one_job_share_nodes_correctly() -> None:
    # Two 3-cpu nodes hold two 1.5-cpu replicas each: 4 in total, not 6 / 1.5.
    clusters = [cluster("a", 3, 3)]
    assert one(job("j", cpus=1.5, replicas=4), clusters).assignments == {"a": 4}
    assert one(job("j", cpus=2, replicas=3), clusters).assignments == {}


def test_fractional_cpus_do_not_lose_replicas_to_float_noise() -> None:
    clusters = [cluster("a", 0.3)]
    assert one(job("j", cpus=0.1, replicas=3), clusters).assignments == {"a": 3}


def test_best_fit_keeps_the_big_node_for_the_big_replica() -> None:
    clusters = [cluster("a", 8, 2)]
    small = job("small", cpus=2, created=1)
    big = job("big", cpus=8, created=2)
    d = by_key(schedule_batch([small, big], clusters, []))
    assert d["small"].placed and d["big"].placed


def test_resources_on_different_nodes_do_not_add_up() -> None:
    c = ClusterInfo("a", {}, True, [
        NodeInfo("cpu-node", Resources(8, 1000)),
        NodeInfo("mem-node", Resources(1, 16000)),
    ])
    d = one(job("j", cpus=4, memory=8000), [c])
    assert d.assignments == {}
    assert d.reasons["a"].startswith(
        "insufficient resources: no single node has cpus 4, memory 8000MB free at once")
    assert "memory: need 8000MB" in d.reasons["a"] or "cpus: need 4" in d.reasons["a"]


def test_zero_request_job_needs_a_node() -> None:
    d = one(job("j", cpus=0, replicas=3), [ClusterInfo("empty", {}, True, [])])
    assert d.assignments == {}
    assert d.reasons["empty"] == "insufficient resources: cluster reports no nodes"
    assert one(job("j", cpus=0, replicas=3), [cluster("a", 0)]).assignments == {"a": 3}


def test_zero_replicas_is_nothing_to_place() -> None:
    d = one(job("j", replicas=0), [cluster("a", 4)])
    assert d.assignments == {} and "nothing to place" in d.message


# --- gang placement and spreading ------------------------------------------------------------

def test_all_or_nothing_reserves_nothing_when_the_job_does_not_fit() -> None:
    clusters = [cluster("a", 4), cluster("b", 4)]
    gang = job("gang", cpus=1, replicas=9, priority=10)
    after = job("after", cpus=4, replicas=2, priority=0)
    d = by_key(schedule_batch([gang, after], clusters, []))
    assert d["gang"].assignments == {}
    assert d["gang"].message.startswith("0/2 clusters fit 9 replicas (room for 8 in total): ")
    assert d["gang"].reasons == {
        "a": "insufficient resources: room for 4 of 9 replicas",
        "b": "insufficient resources: room for 4 of 9 replicas",
    }
    # The blocked gang held nothing, so the later job gets both whole clusters.
    assert d["after"].assignments == {"a": 1, "b": 1}


def test_twelve_replicas_over_three_clusters_of_four_spread_four_four_four() -> None:
    clusters = [cluster(n, 2, 2) for n in ("c", "a", "b")]
    d = one(job("j", cpus=1, replicas=12), clusters)
    assert d.assignments == {"a": 4, "b": 4, "c": 4}
    assert list(d.assignments) == ["a", "b", "c"]
    assert d.message == "placed 12 replicas: a=4, b=4, c=4"
    # c took exactly what was left, so only a and b "could not take all".
    assert d.reasons == {n: "room for only 4 of 12 replicas" for n in "ab"}


def test_job_that_fits_in_the_best_cluster_stays_there() -> None:
    clusters = [cluster("a", 4), cluster("b", 16), cluster("c", 8)]
    d = one(job("j", cpus=1, replicas=6), clusters)
    assert d.assignments == {"b": 6}
    assert d.reasons["a"].startswith("not needed: higher-ranked b took all 6")
    assert d.reasons["c"].startswith("not needed")


def test_spill_fills_the_top_cluster_first() -> None:
    clusters = [cluster("a", 4), cluster("b", 6), cluster("c", 2)]
    d = one(job("j", cpus=1, replicas=9), clusters)
    assert d.assignments == {"b": 6, "a": 3}
    assert list(d.assignments) == ["b", "a"]
    assert d.reasons["b"] == "room for only 6 of 9 replicas"
    assert "a" not in d.reasons  # a took the whole remainder
    assert d.reasons["c"].startswith("not needed")


def test_preferences_outrank_headroom_and_spill_follows_rank() -> None:
    clusters = [
        cluster("big", 16, labels={"zone": "b"}),
        cluster("pref", 2, labels={"zone": "a"}),
    ]
    pref = [Preference(match_labels={"zone": "a"}, weight=50)]
    d = one(job("j", cpus=1, replicas=5, preferences=pref), clusters)
    assert list(d.assignments.items()) == [("pref", 2), ("big", 3)]


def test_heavier_preference_wins() -> None:
    clusters = [
        cluster("a", 8, labels={"cloud": "aws", "tier": "spot"}),
        cluster("b", 8, labels={"cloud": "gcp", "tier": "ondemand"}),
    ]
    prefs = [
        Preference(name="aws", match_labels={"cloud": "aws"}, weight=10),
        Preference(name="ondemand", match_labels={"tier": "ondemand"}, weight=90),
    ]
    assert one(job("j", preferences=prefs), clusters).assignments == {"b": 1}
    prefs[0].weight = 100
    assert one(job("j", preferences=prefs), clusters).assignments == {"a": 1}


def test_matching_preferences_add_up() -> None:
    clusters = [
        cluster("a", 8, labels={"x": "1", "y": "1"}),
        cluster("b", 8, labels={"z": "1"}),
    ]
    prefs = [
        Preference(match_labels={"x": "1"}, weight=30),
        Preference(match_labels={"y": "1"}, weight=30),
        Preference(match_labels={"z": "1"}, weight=50),
    ]
    assert one(job("j", preferences=prefs), clusters).assignments == {"a": 1}


def test_headroom_breaks_ties_then_name() -> None:
    assert one(job("j"), [cluster("a", 4), cluster("b", 8)]).assignments == {"b": 1}
    assert one(job("j"), [cluster("b", 4), cluster("a", 4)]).assignments == {"a": 1}


def test_consecutive_jobs_spread_by_headroom() -> None:
    clusters = [cluster("a", 4), cluster("b", 4)]
    out = schedule_batch([job(f"j{i}", cpus=1, created=i) for i in range(4)], clusters, [])
    assert [next(iter(d.assignments)) for d in out] == ["a", "b", "a", "b"]


# --- reasons --------------------------------------------------------------------------------

def test_every_cluster_gets_a_precise_reason_when_nothing_fits() -> None:
    clusters = [
        cluster("down", 64, ready=False),
        cluster("banned", 64),
        cluster("wrong-zone", 64, labels={"zone": "eu"}),
        cluster("small", 2, 2),
    ]
    policy = FilterPolicyInfo("p1", "default", exclude=["banned"])
    flt = [Filter(match_labels={"zone": "eu"})]
    small_only_fits_zone = job("j", cpus=4, filters=flt)
    clusters[3].labels["zone"] = "eu"
    clusters[2].labels["zone"] = "us"
    d = one(small_only_fits_zone, clusters, [policy])
    assert d.assignments == {}
    assert d.reasons == {
        "banned": "excluded by FilterPolicy p1",
        "down": "not Ready",
        "small": "insufficient resources: cpus: need 4, largest free node has 2",
        "wrong-zone": "does not match placement filters: label zone=us, want eu",
    }
    assert d.message == (
        "0/4 clusters fit: banned: excluded by FilterPolicy p1 | down: not Ready | "
        "small: insufficient resources: cpus: need 4, largest free node has 2 | "
        "wrong-zone: does not match placement filters: label zone=us, want eu"
    )


def test_resource_reason_lists_every_short_resource() -> None:
    c = ClusterInfo("a", {}, True, [
        NodeInfo("n1", Resources(2, 1024, 0, {"T4": 1})),
        NodeInfo("n2", Resources(1, 2048.5, 1)),
    ])
    d = one(job("j", cpus=4, memory=4096, gpus=2, accelerators={"A100": 1}), [c])
    assert d.reasons["a"] == (
        "insufficient resources: cpus: need 4, largest free node has 2; "
        "memory: need 4096MB, largest free node has 2048.5MB; "
        "gpus: need 2, largest free node has 1; A100: need 1, largest free node has 0"
    )


def test_message_groups_clusters_with_the_same_reason() -> None:
    clusters = [cluster(f"c{i}", 4, ready=False) for i in range(8)] + [cluster("z", 1)]
    d = one(job("j", cpus=2), clusters)
    assert d.message == (
        "0/9 clusters fit: c0, c1, c2, c3, c4 and 3 more: not Ready | "
        "z: insufficient resources: cpus: need 2, largest free node has 1"
    )


def test_no_clusters_at_all() -> None:
    d = one(job("j"), [])
    assert d.assignments == {} and d.reasons == {}
    assert d.message == "0/0 clusters fit: no clusters are known"


def test_placed_job_explains_filtered_clusters_too() -> None:
    d = one(job("j"), [cluster("a", 4), cluster("b", 4, ready=False)])
    assert d.assignments == {"a": 1}
    assert d.reasons == {"b": "not Ready"}


# --- determinism ----------------------------------------------------------------------------

def _random_batch(seed: int) -> tuple[list[JobRequest], list[ClusterInfo]]:
    rng = random.Random(seed)
    clusters = [
        cluster(f"c{i}", *[rng.choice([2, 4, 8]) for _ in range(5)],
                labels={"zone": rng.choice(["a", "b"])}, ready=rng.random() > 0.1)
        for i in range(4)
    ]
    jobs = [
        job(f"j{i}", cpus=rng.choice([0.5, 1, 2, 3]), replicas=rng.randint(1, 6),
            priority=rng.randint(0, 2), created=rng.randint(0, 5),
            preferences=[Preference(match_labels={"zone": "a"}, weight=rng.randint(1, 100))])
        for i in range(60)
    ]
    return jobs, clusters


@pytest.mark.parametrize("seed", range(5))
def test_same_input_same_output_and_input_order_does_not_matter(seed: int) -> None:
    jobs, clusters = _random_batch(seed)
    first = schedule_batch(jobs, clusters, [])
    again = schedule_batch(*_random_batch(seed), [])
    assert first == again
    shuffled_jobs, shuffled_clusters = list(jobs), list(clusters)
    random.Random(seed + 100).shuffle(shuffled_jobs)
    random.Random(seed + 200).shuffle(shuffled_clusters)
    shuffled = by_key(schedule_batch(shuffled_jobs, shuffled_clusters, []))
    assert by_key(first) == shuffled


@pytest.mark.parametrize("seed", range(5))
def test_random_batches_never_overcommit_any_node_resource(seed: int) -> None:
    jobs, clusters = _random_batch(seed)
    out = schedule_batch(jobs, clusters, [])
    req = {j.key: j for j in jobs}
    for c in clusters:
        used = sum(req[d.key].per_replica.cpus * d.assignments.get(c.name, 0) for d in out)
        assert used <= sum(n.free.cpus for n in c.nodes) + 1e-9
    for d in out:
        assert not d.placed or sum(d.assignments.values()) == req[d.key].replicas


def test_inputs_are_not_mutated() -> None:
    jobs, clusters = _random_batch(7)
    before = repr((jobs, clusters))
    schedule_batch(jobs, clusters, [])
    assert repr((jobs, clusters)) == before


def test_overcommitted_node_counts_as_full_not_negative() -> None:
    c = ClusterInfo("a", {}, True, [NodeInfo("over", Resources(-2, -100)),
                                    NodeInfo("ok", Resources(2, 1000))])
    assert one(job("j", cpus=1, memory=10, replicas=2), [c]).assignments == {"a": 2}
    d = one(job("j", cpus=4), [c])
    assert d.reasons["a"] == "insufficient resources: cpus: need 4, largest free node has 2"
    d = one(job("j", cpus=4), [ClusterInfo("b", {}, True, [NodeInfo("over", Resources(-2))])])
    assert d.reasons["b"] == "insufficient resources: cpus: need 4, largest free node has 0"


def test_cpu_less_replicas_are_counted_against_the_cluster() -> None:
    """Issue 26: 50 replicas of ``cpus: 0`` were placed on a 2-CPU cluster. A job's replicas
    are counted for at least MIN_CPUS each (what its template, and so the scheduler and the
    cluster's used capacity, see), so a 2-CPU cluster holds 20 of them, not any number."""
    from skyshift.lifecycle.convert import template_from_job
    from skyshift.models.job import MIN_CPUS, Job

    manifest = {"kind": "Job", "metadata": {"name": "free", "namespace": "default"},
                "spec": {"resources": {"cpus": 0}, "replicas": 50}}
    template = template_from_job(Job.model_validate(manifest))
    assert template.resources.cpus == MIN_CPUS == 0.1
    small = JobRequest(key="default/free", uid="uid-free", namespace="default", labels={},
                       priority=0, created=0.0, replicas=50, per_replica=template.resources)
    d = one(small, [cluster("two", 2)])
    assert d.assignments == {} and "room for 20 of 50 replicas" in d.message + str(d.reasons)
    assert one(dataclasses.replace(small, replicas=20), [cluster("two", 2)]).assignments == {
        "two": 20}
    # what the user wrote is kept
    assert Job.model_validate(manifest).spec.resources.cpus == 0
