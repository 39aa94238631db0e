"""The layout of ``skyshift up --ha`` without starting anything: its processes in order, ports,
the skylet managers' selectors, HAProxy's config, and the client certificate everywhere."""

from __future__ import annotations

import subprocess
from pathlib import Path
from unittest.mock import Mock

import pytest

from skyshift.devstack import ha_temporal, procs, stack
from skyshift.devstack.components import Ports, StackError
from skyshift.devstack.ha import MANAGER_LABEL, all_ports, build_ha_components, haproxy_config
from skyshift.lifecycle.client import tls_config
from skyshift.store import parse_selector


def test_processes_in_start_order_with_the_client_certificate(tmp_path: Path) -> None:
    components = build_ha_components(tmp_path, Ports(), resolve=False)
    assert [c.name for c in components] == [
        "etcd-1", "etcd-2", "etcd-3", "temporal", "api-1", "api-2", "haproxy",
        "control-1", "control-2", "skylet-manager-1", "skylet-manager-2",
    ]  # fmt: skip
    python = [c for c in components if c.module is not None]
    assert len(python) == 6
    for c in python:
        assert c.env["SKYSHIFT_TEMPORAL_TLS_CERT"] == str(tmp_path / "pki" / "client.pem")
        assert c.env["SKYSHIFT_ETCD"] == "127.0.0.1:23790,127.0.0.1:23791,127.0.0.1:23792"
    assert len(set(all_ports(Ports()))) == 3 + 3 + 9 + 3 + 6


def test_the_skylet_managers_split_the_clusters() -> None:
    first, second = (parse_selector(s) for s in (f"{MANAGER_LABEL}!=2", f"{MANAGER_LABEL}=2"))
    for labels in ({}, {MANAGER_LABEL: "1"}, {MANAGER_LABEL: "2"}):
        assert first.matches(labels) != second.matches(labels), labels


def test_haproxy_balances_the_two_replicas() -> None:
    cfg = haproxy_config(Ports(api=40000))
    assert "bind 127.0.0.1:40000" in cfg
    assert "server api-1 127.0.0.1:40001 check" in cfg
    assert "server api-2 127.0.0.1:40002 check" in cfg
    assert "option httpchk GET /readyz?exclude=temporal" in cfg


def test_overlapping_ports_are_refused_by_name() -> None:
    with pytest.raises(StackError, match="--ha ports overlap"):
        all_ports(Ports(etcd=30000, etcd_peer=30001))


def test_tls_from_a_given_environment_not_this_process(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    tls = tls_config({"SKYSHIFT_TEMPORAL_TLS_CA": str(ca)})
    assert tls is not None and tls.server_root_ca_cert == b"pem"
    assert tls_config({}) is None


def test_without_a_checkout_the_message_names_the_build_script(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ha_temporal.BIN_ENV, raising=False)
    monkeypatch.setattr(ha_temporal, "BUILD_SCRIPT", tmp_path / "missing.sh")
    with pytest.raises(
        StackError, match=r"scripts/build-temporal\.sh.*SKYSHIFT_TEMPORAL_SERVER_BIN"
    ):
        ha_temporal.server_binary(lambda _line: None)


def test_up_refuses_to_switch_kinds_while_the_other_runs(tmp_path: Path) -> None:
    """An HA stack runs (one of its processes, here a sleep): a plain `up` refuses by name."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        procs.write_pid(tmp_path / "run" / "etcd-1.pid", proc.pid)
        record = {"pid": proc.pid, "start_ticks": procs.start_ticks(proc.pid)}
        stack.StackState(tmp_path, Ports(), {"etcd-1": record}, mode="ha").save()
        with pytest.raises(StackError, match=r"an HA stack .*etcd-1.*skyshift down"):
            stack.up(tmp_path, {}, Mock(), ha=False)
    finally:
        proc.kill()
        proc.wait()
