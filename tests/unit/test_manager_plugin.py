"""Adding a cluster manager is one descriptor and one ``add_manager`` call: a toy manager defined
here is then accepted by Cluster validation, listed by the CLI, has its config filled from a
stored Cluster and is built by ``create_manager``, with nothing else in SkyShift naming it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from skyshift.cli.main import cli
from skyshift.cli.manifests import cluster_manifest
from skyshift.compat import ManagerKind, add_manager, base, create_manager, kind, known_managers
from skyshift.compat.services import unsupported
from skyshift.lifecycle.convert import manager_config
from skyshift.models import managers, parse_object
from skyshift.models.managers import ManagerNames


class ToyManager:
    """The toy's adapter: only what building it needs (the contract suite covers the rest)."""

    manager = "toy"

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name, self.config = name, config


def _fill(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {"boxes": spec.get("cpus"), "pier": (spec.get("access_config") or {}).get("host")}


def _check(config: dict[str, Any]) -> str:
    return "config.colour: a toy cluster is red or blue" if config.get("colour") == "green" else ""


TOY = ManagerKind(
    names=ManagerNames("toy", aliases=("toybox",), label="toy (toybox)", check=_check),
    adapter=f"{__name__}:ToyManager",
    fill=_fill,
    no_services="toy clusters have no services",
)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ManagerKind]:
    """The toy, registered for one test only (the registries are restored afterwards)."""
    monkeypatch.setattr(kind, "_KINDS", dict(kind._KINDS))
    monkeypatch.setattr(managers, "_DECLARED", dict(managers._DECLARED))
    monkeypatch.setattr(managers, "_ALIASES", dict(managers._ALIASES))
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    add_manager(TOY)
    yield TOY


def cluster(spec: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Cluster", "metadata": {"name": "t1"}, "spec": spec}


def test_cluster_validation_accepts_the_toy_by_name_and_alias(toy: ManagerKind) -> None:
    assert parse_object(cluster({"manager": "ToyBox"})).spec.manager == "toy"
    with pytest.raises(ValueError, match="red or blue"):
        parse_object(cluster({"manager": "toy", "config": {"colour": "green"}}))
    with pytest.raises(ValueError, match=r"expected .*, skypilot or toy \(toybox\)"):
        parse_object(cluster({"manager": "toys"}))


def test_cli_lists_and_builds_the_toy(toy: ManagerKind) -> None:
    result = CliRunner().invoke(cli, ["create", "cluster", "--help"])
    assert result.exit_code == 0
    assert "toy (toybox)" in " ".join(result.output.split())
    manifest = cluster_manifest("t1", manager="toybox", cpus="3", host="pier-1")
    assert parse_object(manifest).spec.manager == "toy"  # validated as the CLI sends it


def test_spec_to_config_and_the_adapter_factory(toy: ManagerKind) -> None:
    obj = cluster({"manager": "toy", "cpus": 3, "access_config": {"host": "pier-1"},
                   "config": {"boxes": 5}})
    name, config = manager_config(obj)
    assert (name, config) == ("toy", {"boxes": 5, "pier": "pier-1"})  # spec.config wins
    adapter = create_manager("t1", name, config)
    assert isinstance(adapter, ToyManager) and adapter.config == config
    assert "toy" in known_managers()
    assert str(unsupported("toy")).startswith("toy clusters have no services")


def test_the_toy_is_gone_after_its_test() -> None:
    with pytest.raises(ValueError, match="unknown manager"):
        parse_object(cluster({"manager": "toy"}))
    assert "toy" not in known_managers()
