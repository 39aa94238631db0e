"""The warning a FilterPolicy naming missing clusters gets says what the policy then does
(the old one said "ignores it until it does" while every job it selected waited)."""

from __future__ import annotations

from typing import Any

from skyshift.api.references import cluster_refs, filter_warnings


def policy(include: list[str], exclude: list[str] = []) -> dict[str, Any]:  # noqa: B006
    return {"kind": "FilterPolicy", "spec": {"clusterFilter": {"include": include,
                                                               "exclude": exclude}}}


def warnings(obj: dict[str, Any], missing: set[str]) -> list[str]:
    dangling = [(f, n) for f, n in cluster_refs("FilterPolicy", obj) if n in missing]
    return filter_warnings(obj, dangling)


def test_only_missing_included_clusters_means_every_job_waits() -> None:
    assert warnings(policy(["nosuch"]), {"nosuch"}) == [
        "spec.clusterFilter.include[0]: cluster 'nosuch' does not exist (yet); no cluster this "
        "policy includes exists, so every job it selects stays Pending until one is created"]


def test_a_missing_cluster_beside_existing_ones_narrows_placement() -> None:
    [text] = warnings(policy(["real", "nosuch"]), {"nosuch"})
    assert text.endswith("jobs this policy selects go only to the included clusters that exist "
                         "until it does")
    assert "ignores" not in text


def test_missing_excluded_cluster_has_no_effect() -> None:
    [text] = warnings(policy([], ["gone"]), {"gone"})
    assert text == ("spec.clusterFilter.exclude[0]: cluster 'gone' does not exist (yet); "
                    "excluding it has no effect until it does")
