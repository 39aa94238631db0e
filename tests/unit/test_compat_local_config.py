"""Local cluster configuration: validation and the even split of capacity into nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.local.config import LocalConfig
from skyshift.models.quantity import Resources


def test_capacity_split_evenly_with_remainders_first() -> None:
    config = LocalConfig.parse("c", {
        "state_dir": "/tmp/x", "cpus": 3, "memory": "3G", "gpus": 5,
        "accelerators": "T4:3", "nodes": 2,
    })
    assert config.node_names("c") == ["c-0", "c-1"]
    assert config.node_capacity() == [
        Resources(1.5, 1500, 3, {"T4": 2}),
        Resources(1.5, 1500, 2, {"T4": 1}),
    ]


@pytest.mark.parametrize("bad, field", [
    ({"state_dir": 5}, "state_dir"),
    ({"state_dir": "/x", "cpus": "lots"}, "cpus"),
    ({"state_dir": "/x", "memory": -1}, "memory"),
    ({"state_dir": "/x", "gpus": 1.5}, "gpus"),
    ({"state_dir": "/x", "nodes": 0}, "nodes"),
    ({"state_dir": "/x", "labels": {"a": 1}}, "labels"),
    ({"state_dir": "/x", "grace_period": -1}, "grace_period"),
])
def test_bad_config_is_permanent_and_names_the_field(bad: dict[str, object], field: str) -> None:
    with pytest.raises(Permanent, match=field):
        LocalConfig.parse("c", bad)


def test_state_dir_defaults_to_the_clusters_directory_of_skyshift_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`skyctl create cluster b --manager local` names no state_dir: it goes where the
    embedded stack keeps its clusters (and `skyshift down --purge` removes them)."""
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path))
    assert LocalConfig.parse("b", {"cpus": 2}).state_dir == tmp_path / "clusters" / "b"
    assert LocalConfig.parse("b", {"state_dir": "/srv/b"}).state_dir == Path("/srv/b")


def test_capacity_left_out_is_this_hosts() -> None:
    """`skyctl create cluster b --manager local` declares no capacity: the cluster offers this
    host's CPUs and memory rather than nothing (jobs would wait forever)."""
    import os

    config = LocalConfig.parse("b", {"state_dir": "/x", "cpus": 0, "memory": None})
    pages = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert config.capacity.cpus == float(os.cpu_count() or 1) >= 1
    assert config.capacity.memory == pytest.approx(pages / 1e6)
    assert LocalConfig.parse("b", {"state_dir": "/x", "cpus": 0.5}).capacity.cpus == 0.5
