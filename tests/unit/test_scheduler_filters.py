"""Filter and score plugins: placement filters, FilterPolicies, readiness, label expressions."""

import pytest

from skyshift.models.quantity import Resources
from skyshift.scheduler import (
    ClusterInfo,
    Decision,
    Expression,
    Filter,
    FilterPolicyInfo,
    JobRequest,
    NodeInfo,
    Preference,
    schedule_batch,
)
from skyshift.scheduler.labels import expression_mismatch, selector_mismatch
from skyshift.scheduler.plugins import applicable_policies, preference_score

CLUSTERS = [
    ClusterInfo("aws-us", {"cloud": "aws", "region": "us", "gpu": "a100"}, True,
                [NodeInfo("n", Resources(8, 32000))]),
    ClusterInfo("gcp-eu", {"cloud": "gcp", "region": "eu"}, True,
                [NodeInfo("n", Resources(8, 32000))]),
    ClusterInfo("onprem", {"region": "us", "gpu": "t4"}, True,
                [NodeInfo("n", Resources(8, 32000))], manager="slurm"),
]


def job(
    filters: list[Filter] | None = None,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    preferences: list[Preference] | None = None,
) -> JobRequest:
    return JobRequest("x/j", "u", namespace, labels or {}, 0, 0.0, 1, Resources(1, 100),
                      filters or [], preferences or [])


def allowed(j: JobRequest, policies: list[FilterPolicyInfo] | None = None,
            clusters: list[ClusterInfo] | None = None) -> set[str]:
    """Names of clusters the job may use (not rejected by any filter)."""
    pool = clusters or CLUSTERS
    [d] = schedule_batch([j], pool, policies or [])
    return {c.name for c in pool} - {
        name for name, why in d.reasons.items() if not why.startswith("not needed")
    }


def decide(j: JobRequest, policies: list[FilterPolicyInfo] | None = None) -> Decision:
    [d] = schedule_batch([j], CLUSTERS, policies or [])
    return d


# --- placement filters ----------------------------------------------------------------------

def test_no_filters_means_every_cluster_passes() -> None:
    assert allowed(job()) == {"aws-us", "gcp-eu", "onprem"}


def test_a_cluster_passes_if_it_matches_any_filter() -> None:
    filters = [Filter(match_labels={"cloud": "gcp"}), Filter(match_labels={"gpu": "t4"})]
    assert allowed(job(filters)) == {"gcp-eu", "onprem"}


def test_inside_one_filter_labels_and_expressions_must_all_hold() -> None:
    flt = Filter(match_labels={"region": "us"},
                 match_expressions=[Expression("gpu", "In", ["a100", "h100"])])
    assert allowed(job([flt])) == {"aws-us"}


def test_in_and_notin_expressions() -> None:
    in_eu = Filter(match_expressions=[Expression("region", "In", ["eu", "ap"])])
    assert allowed(job([in_eu])) == {"gcp-eu"}
    not_aws = Filter(match_expressions=[Expression("cloud", "NotIn", ["aws"])])
    # NotIn holds for clusters without the key at all (onprem has no "cloud" label).
    assert allowed(job([not_aws])) == {"gcp-eu", "onprem"}


def test_exists_and_does_not_exist_expressions() -> None:
    assert allowed(job([Filter(match_expressions=[Expression("gpu", "Exists")])])) == {
        "aws-us", "onprem"}
    assert allowed(job([Filter(match_expressions=[Expression("gpu", "DoesNotExist")])])) == {
        "gcp-eu"}


def test_operators_are_case_insensitive() -> None:
    flt = Filter(match_expressions=[Expression("region", "notin", ["us"])])
    assert allowed(job([flt])) == {"gcp-eu"}


def test_unknown_operator_never_matches_and_says_so() -> None:
    d = decide(job([Filter(match_expressions=[Expression("gpu", "Gt", ["1"])])]))
    assert d.assignments == {}
    assert d.reasons["aws-us"] == (
        "does not match placement filters: unknown operator 'Gt' on label gpu")


def test_filter_reasons_name_each_failing_filter() -> None:
    filters = [
        Filter(name="gpu", match_labels={"gpu": "h100"}),
        Filter(match_labels={"region": "ap", "cloud": "aws"},
               match_expressions=[Expression("zone", "In", ["1", "2"])]),
    ]
    d = decide(job(filters))
    assert d.assignments == {}
    assert d.reasons["aws-us"] == (
        "does not match placement filters: gpu: label gpu=a100, want h100; "
        "filter 2: label region=us, want ap, label zone missing (want In [1, 2])"
    )
    assert d.reasons["gcp-eu"].startswith(
        "does not match placement filters: gpu: label gpu missing (want gpu=h100); ")


def test_expression_mismatch_messages() -> None:
    labels = {"gpu": "t4"}
    assert expression_mismatch(Expression("gpu", "In", ["a100"]), labels) == (
        "label gpu=t4 not In [a100]")
    assert expression_mismatch(Expression("gpu", "NotIn", ["t4"]), labels) == (
        "label gpu=t4 is NotIn [t4]")
    assert expression_mismatch(Expression("gpu", "DoesNotExist"), labels) == (
        "label gpu=t4 present (want DoesNotExist)")
    assert expression_mismatch(Expression("x", "Exists"), labels) == (
        "label x missing (want Exists)")
    assert expression_mismatch(Expression("x", "NotIn", ["t4"]), labels) is None
    assert selector_mismatch({}, [], labels) == []


# --- FilterPolicy ---------------------------------------------------------------------------

def test_policy_exclude_applies_to_jobs_of_its_namespace_only() -> None:
    policy = FilterPolicyInfo("no-aws", "team-a", exclude=["aws-us"])
    d = decide(job(namespace="team-a"), [policy])
    assert d.reasons["aws-us"] == "excluded by FilterPolicy no-aws"
    assert "aws-us" in allowed(job(namespace="team-b"), [policy])


def test_policy_include_limits_to_the_listed_clusters() -> None:
    policy = FilterPolicyInfo("only-onprem", "default", include=["onprem"])
    d = decide(job(), [policy])
    assert d.assignments == {"onprem": 1}
    assert d.reasons["aws-us"] == "not in the include list of FilterPolicy only-onprem"


def test_policy_label_selector_must_be_a_subset_of_job_labels() -> None:
    policy = FilterPolicyInfo("sovereign", "default", label_selector={"data": "eu"},
                              include=["gcp-eu"])
    assert allowed(job(labels={"data": "eu", "team": "x"}), [policy]) == {"gcp-eu"}
    assert allowed(job(labels={"data": "us"}), [policy]) == {"aws-us", "gcp-eu", "onprem"}
    assert allowed(job(), [policy]) == {"aws-us", "gcp-eu", "onprem"}


def test_policy_with_empty_selector_governs_the_whole_namespace() -> None:
    policy = FilterPolicyInfo("all", "default", exclude=["onprem"])
    assert allowed(job(labels={"anything": "1"}), [policy]) == {"aws-us", "gcp-eu"}


def test_every_applicable_policy_must_allow_the_cluster() -> None:
    policies = [
        FilterPolicyInfo("p2", "default", include=["aws-us", "gcp-eu"]),
        FilterPolicyInfo("p1", "default", exclude=["aws-us"]),
    ]
    d = decide(job(), policies)
    assert d.assignments == {"gcp-eu": 1}
    assert d.reasons["aws-us"] == "excluded by FilterPolicy p1"
    assert d.reasons["onprem"] == "not in the include list of FilterPolicy p2"


def test_applicable_policies_are_sorted_and_filtered() -> None:
    ps = [FilterPolicyInfo("b", "default"), FilterPolicyInfo("a", "default"),
          FilterPolicyInfo("c", "other"), FilterPolicyInfo("d", "default", {"k": "v"})]
    assert [p.name for p in applicable_policies(job(), ps)] == ["a", "b"]


def test_policies_and_filters_combine() -> None:
    policy = FilterPolicyInfo("no-aws", "default", exclude=["aws-us"])
    flt = Filter(match_labels={"region": "us"})
    assert allowed(job([flt]), [policy]) == {"onprem"}


# --- readiness ------------------------------------------------------------------------------

def test_not_ready_clusters_are_skipped_first() -> None:
    down = ClusterInfo("down", {"cloud": "gcp"}, False, [NodeInfo("n", Resources(64, 1e6))])
    policy = FilterPolicyInfo("p", "default", exclude=["down"])
    [d] = schedule_batch([job()], [down], [policy])
    assert d.reasons == {"down": "not Ready"}
    assert d.message == "0/1 clusters fit: down: not Ready"


# --- preferences ----------------------------------------------------------------------------

@pytest.mark.parametrize(("prefs", "score"), [
    ([], 0),
    ([Preference(match_labels={"cloud": "aws"}, weight=7)], 7),
    ([Preference(match_labels={"cloud": "gcp"}, weight=7)], 0),
    ([Preference(match_expressions=[Expression("gpu", "In", ["a100"])], weight=20),
      Preference(match_labels={"region": "us"}, weight=5)], 25),
])
def test_preference_score_sums_matching_weights(prefs: list[Preference], score: int) -> None:
    assert preference_score(job(preferences=prefs), CLUSTERS[0]) == score


def test_preferences_never_override_filters() -> None:
    prefs = [Preference(match_labels={"cloud": "aws"}, weight=100)]
    flt = [Filter(match_labels={"cloud": "gcp"})]
    assert decide(job(flt, preferences=prefs)).assignments == {"gcp-eu": 1}


def test_pending_message_names_included_clusters_that_do_not_exist() -> None:
    """A policy whose include list names only missing clusters blocks the whole namespace;
    `skyctl describe job` must say so instead of only 'not in the include list'."""
    policy = FilterPolicyInfo("typo", "default", include=["onprem-1", "gpu-b"])
    d = decide(job(), [policy])
    assert not d.assignments
    assert "FilterPolicy typo includes clusters that do not exist: gpu-b, onprem-1" in d.message
    # a policy whose clusters all exist adds nothing
    fine = FilterPolicyInfo("fine", "default", include=["onprem"])
    big = JobRequest("x/b", "u", "default", {}, 0, 0.0, 1000, Resources(1, 100), [], [])
    d = decide(big, [fine])
    assert not d.assignments and "do not exist" not in d.message
