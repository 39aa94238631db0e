"""The layout of ``skyshift up --ha`` without starting anything: its processes in order, ports,
the skylet managers' selectors, HAProxy's config, and the client certificate everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    assert "option httpchk GET /readyz" in cfg


def test_overlapping_ports_are_refused_by_name() -> None:
    with pytest.raises(StackError, match="--ha ports overlap"):
        all_ports(Ports(etcd=30000, etcd_peer=30001))


def test_tls_from_a_given_environment_not_this_process(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    tls = tls_config({"SKYSHIFT_TEMPORAL_TLS_CA": str(ca)})
    assert tls is not None and tls.server_root_ca_cert == b"pem"
    assert tls_config({}) is None
