"""Compat payload types, errors and the manager factory."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.converter import DataConverter

from skyshift.compat import (
    ClusterManager,
    ClusterState,
    NodeState,
    Permanent,
    ReplicaSpec,
    ReplicaStatus,
    Transient,
    base,
    create_manager,
    known_managers,
    register_manager,
)
from skyshift.compat.errors import CompatError, NotFound, Unsupported
from skyshift.compat.local.adapter import LocalManager
from skyshift.models.quantity import Resources


def _spec() -> ReplicaSpec:
    return ReplicaSpec(
        name="train-1234abcd-0", job_name="train", namespace="ns", job_uid="1234abcd-ff",
        rank=0, run="python train.py", envs={"A": "1"}, ports=[8080],
        resources=Resources(cpus=2, memory=512, gpus=1, accelerators={"A100": 1}),
        labels={"team": "x"}, attempt=2,
    )


def test_spec_round_trips_through_json_dict() -> None:
    spec = _spec()
    assert ReplicaSpec.from_dict(spec.to_dict()) == spec
    assert ReplicaSpec.from_dict({**spec.to_dict(), "future_field": 1}) == spec


async def test_types_are_temporal_payloads() -> None:
    converter = DataConverter.default
    values = [
        _spec(),
        ReplicaStatus(name="a", job_uid="u", namespace="n", job_name="j", rank=0,
                      state="Failed", exit_code=3, started_at=1.5, finished_at=2.5),
        ClusterState(healthy=True, nodes=[NodeState("n0", Resources(4, 100), Resources(2, 50))],
                     labels={"region": "r"}),
    ]
    for value in values:
        payloads = await converter.encode([value])
        [decoded] = await converter.decode(payloads, [type(value)])
        assert decoded == value


def test_cluster_state_totals() -> None:
    state = ClusterState(healthy=True, nodes=[
        NodeState("a", Resources(2, 100), Resources(1, 40)),
        NodeState("b", Resources(2, 100), Resources(2, 100)),
    ])
    assert state.capacity() == Resources(4, 200)
    assert state.allocatable() == Resources(3, 140)


def test_error_hierarchy() -> None:
    assert Transient.retryable and not Permanent.retryable and not NotFound.retryable
    assert issubclass(Unsupported, Permanent)
    assert all(issubclass(e, CompatError) for e in (Transient, Permanent, NotFound))


def test_create_manager_builds_local(tmp_path: Path) -> None:
    manager = create_manager("c1", "local", {"cpus": 2, "memory": "1Gi", "state_dir": tmp_path})
    assert isinstance(manager, LocalManager) and isinstance(manager, ClusterManager)
    assert (manager.name, manager.manager) == ("c1", "local")
    assert "local" in known_managers()


def test_unknown_manager_is_permanent() -> None:
    with pytest.raises(Permanent, match="unknown cluster manager 'nomad'"):
        create_manager("c1", "nomad", {})


def test_register_manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    register_manager("fake-for-test", lambda name, cfg: LocalManager(name, cfg))
    manager = create_manager("c2", "fake-for-test", {"state_dir": str(tmp_path)})
    assert manager.name == "c2"
