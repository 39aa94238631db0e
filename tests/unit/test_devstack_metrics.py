"""How `skyshift up` chooses the metrics ports and writes the Prometheus targets (no processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skyshift.devstack.components import Ports, StackError, build_components
from skyshift.devstack.metrics_targets import targets_path, write
from skyshift.devstack.stack import resolve_ports


@pytest.fixture(autouse=True)
def no_stack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SKYSHIFT_ETCD", "SKYSHIFT_TEMPORAL_ADDRESS", "SKYSHIFT_TEMPORAL_UI",
                 "SKYSHIFT_API_PORT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def test_metrics_are_on_by_default_and_remembered_off() -> None:
    assert resolve_ports({}, None).metrics_ports() == {
        "api": 9464,
        "control": 9465,
        "skylet-manager": 9466,
    }
    off = resolve_ports({"metrics": 0}, None)
    assert off.metrics_ports() == {}
    assert resolve_ports({}, off).metrics == 0  # a later `up` keeps them off
    assert resolve_ports({"metrics": 20000}, off).metrics_ports()["api"] == 20000


def test_a_metrics_port_taken_by_another_part_is_refused() -> None:
    # the skylet manager's would be the API's port
    with pytest.raises(StackError, match="ports must all differ"):
        resolve_ports({"api": 30002, "metrics": 30000}, None)


def test_metrics_over_postgres_default_are_fine_on_one_node() -> None:
    # CI: a test's random --metrics-port 25431 took 25432, PostgreSQL's default, which only
    # `up --ha` listens on; the single-node `up` refused with "ports must all differ"
    ports = resolve_ports({"metrics": 25431}, None)
    assert ports.metrics_ports()["control"] == ports.postgres == 25432


def test_the_targets_file_lists_each_process_with_its_component(tmp_path: Path) -> None:
    urls = write(tmp_path, build_components(tmp_path, Ports(metrics=30000), resolve=False))
    assert urls == {"api": "http://127.0.0.1:30000/metrics",
                    "control": "http://127.0.0.1:30001/metrics",
                    "skylet-manager": "http://127.0.0.1:30002/metrics"}  # fmt: skip
    groups = json.loads(targets_path(tmp_path).read_text())
    assert [(g["targets"], g["labels"]["component"]) for g in groups] == [
        (["127.0.0.1:30000"], "api"),
        (["127.0.0.1:30001"], "control"),
        (["127.0.0.1:30002"], "skylet-manager"),
    ]
    write(tmp_path, build_components(tmp_path, Ports(metrics=0), resolve=False))
    assert json.loads(targets_path(tmp_path).read_text()) == []  # --no-metrics: no targets
