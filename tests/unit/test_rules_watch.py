"""Which cluster writes count as a change of placement rules (labels or phase, not capacity)."""

from __future__ import annotations

from typing import Any

from skyshift.store.watch import WatchEvent
from skyshift.workers.rules_watch import ClusterRules


def cluster(labels: dict[str, str], status_labels: dict[str, str], phase: str = "Ready",
            cpus: float = 4) -> dict[str, Any]:
    return {"metadata": {"name": "c1", "labels": labels},
            "status": {"labels": status_labels, "phase": phase, "allocatable": {"cpus": cpus}}}


def test_only_labels_and_phase_changes_count() -> None:
    rules = ClusterRules()
    rules.load([cluster({"a": "1"}, {})])
    assert not rules.changed(WatchEvent("MODIFIED", cluster({"a": "1"}, {}, cpus=2), 5))
    assert rules.changed(WatchEvent("MODIFIED", cluster({"a": "2"}, {}), 6))
    assert rules.changed(WatchEvent("MODIFIED", cluster({"a": "2"}, {"slurm/partition": "p"}), 7))
    assert rules.changed(WatchEvent("MODIFIED", cluster({"a": "2"}, {"slurm/partition": "p"},
                                                        phase="Error"), 8))
    assert rules.changed(WatchEvent("DELETED", cluster({}, {}), 9))
    assert not rules.changed(WatchEvent("DELETED", cluster({}, {}), 10))
    assert rules.changed(WatchEvent("ADDED", cluster({}, {}), 11))
