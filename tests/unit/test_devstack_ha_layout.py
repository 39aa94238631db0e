"""The layout of ``skyshift up --ha`` without starting anything: its processes in order, ports,
the skylet managers' selectors, HAProxy's config, the client certificates everywhere, etcd's
TLS, the Temporal UI's own certificate and Temporal's store (PostgreSQL, or SQLite)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from unittest.mock import Mock

import pytest
import yaml

from skyshift.devstack import ha_temporal, postgres, procs, stack
from skyshift.devstack.components import HttpHealth, Ports, StackError
from skyshift.devstack.ha import MANAGER_LABEL, all_ports, build_ha_components, haproxy_config
from skyshift.devstack.ha_temporal import temporal_component
from skyshift.devstack.temporal_pki import make_pki
from skyshift.devstack.temporal_ui import UI_CLIENT, ui_component
from skyshift.lifecycle.client import tls_config
from skyshift.store import parse_selector


def test_processes_in_start_order_with_the_client_certificate(tmp_path: Path) -> None:
    components = build_ha_components(tmp_path, Ports(), resolve=False)
    assert [c.name for c in components] == [
        "etcd-1", "etcd-2", "etcd-3", "postgres", "temporal", "temporal-ui", "api-1", "api-2",
        "haproxy",
        "control-1", "control-2", "skylet-manager-1", "skylet-manager-2",
    ]  # fmt: skip
    python = [c for c in components if c.module is not None]
    assert len(python) == 6
    for c in python:
        assert c.env["SKYSHIFT_TEMPORAL_TLS_CERT"] == str(tmp_path / "pki" / "client.pem")
        assert c.env["SKYSHIFT_ETCD"] == "127.0.0.1:23790,127.0.0.1:23791,127.0.0.1:23792"
        assert c.env["SKYSHIFT_ETCD_TLS_CERT"] == str(tmp_path / "pki" / "etcd" / "client.pem")
        assert c.env["SKYSHIFT_ETCD_TLS_CA"] == str(tmp_path / "pki" / "etcd" / "ca.pem")
    assert len(set(all_ports(Ports()))) == 3 + 3 + 1 + 9 + 1 + 3 + 6
    assert 5432 not in all_ports(Ports())  # the system's PostgreSQL
    assert len(all_ports(Ports(), "sqlite")) == 3 + 3 + 9 + 1 + 3 + 6


def test_etcd_members_serve_tls_to_clients_and_peers(tmp_path: Path) -> None:
    members = build_ha_components(tmp_path, Ports(), resolve=False)[:3]
    etcd = tmp_path / "pki" / "etcd"
    for member in members:
        argv = member.argv
        assert argv[argv.index("--listen-client-urls") + 1].startswith("https://127.0.0.1:")
        assert argv[argv.index("--trusted-ca-file") + 1] == str(etcd / "ca.pem")
        assert argv[argv.index("--peer-cert-file") + 1] == str(etcd / "server.pem")
        assert "--client-cert-auth" in argv and "--peer-client-cert-auth" in argv
        cluster = argv[argv.index("--initial-cluster") + 1]
        assert cluster.count("=https://") == 3
    health = members[-1].health
    assert isinstance(health, HttpHealth) and health.url.startswith("https://")
    assert health.tls is not None and health.tls.cert == etcd / "client.pem"


def test_the_ui_reaches_the_frontend_with_its_own_certificate(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", clients=(UI_CLIENT,))
    ui = ui_component(tmp_path, Ports(temporal=41000, ui=41100), pki, "/bin/ui-server")
    config = yaml.safe_load((tmp_path / "temporal-ui" / "config" / "development.yaml").read_text())
    assert config["temporalGrpcAddress"] == "127.0.0.1:41000"
    assert (config["host"], config["port"]) == ("127.0.0.1", 41100)
    assert config["tls"]["certFile"] == str(tmp_path / "pki" / "temporal-ui.pem")
    assert config["tls"]["caFile"] == str(pki.ca)
    assert config["tls"]["enableHostVerification"] is True
    assert ui.argv[0] == "/bin/ui-server" and ui.argv[-1] == "start"
    assert ui.listens == {"Temporal UI": 41100}


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
    monkeypatch.delenv(ha_temporal.UI_BIN_ENV, raising=False)
    monkeypatch.setattr(ha_temporal, "BUILD_SCRIPT", tmp_path / "missing.sh")
    with pytest.raises(
        StackError,
        match=r"scripts/build-temporal\.sh.*SKYSHIFT_TEMPORAL_SERVER_BIN.*SKYSHIFT_TEMPORAL_UI_BIN",
    ):
        ha_temporal.server_binaries(lambda _line: None)


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


def test_temporal_stores_in_postgres_with_a_password(tmp_path: Path) -> None:
    """The default store: the stack's PostgreSQL, started before Temporal on --postgres-port,
    scram-sha-256 for the user temporal with the password of auth/ (0600), in Temporal's config
    (0600 too)."""
    ports = Ports(postgres=41500)
    components = build_ha_components(tmp_path, ports, resolve=False)
    pg = next(c for c in components if c.name == "postgres")
    assert pg.listens == {"PostgreSQL": 41500}
    assert "listen_addresses=127.0.0.1" in pg.argv and "41500" in pg.argv
    assert (tmp_path / "postgres") in pg.data_dirs
    secret = postgres.password(tmp_path)
    assert (tmp_path / "auth" / "postgres-password").stat().st_mode & 0o777 == 0o600
    pki = make_pki(tmp_path / "pki")
    temporal = temporal_component(tmp_path, 41000, pki, "/bin/temporal-server", 41500)
    config_file = Path(temporal.argv[temporal.argv.index("--config-file") + 1])
    assert config_file.stat().st_mode & 0o777 == 0o600
    stores = yaml.safe_load(config_file.read_text())["persistence"]["datastores"]
    assert {n: s["sql"]["databaseName"] for n, s in stores.items()} == {
        "default": "temporal", "visibility": "temporal_visibility"}  # fmt: skip
    for store in stores.values():
        sql = store["sql"]
        assert (sql["pluginName"], sql["connectAddr"]) == ("postgres12", "127.0.0.1:41500")
        assert (sql["user"], sql["password"]) == ("temporal", secret)


def test_temporal_db_sqlite_runs_no_postgres(tmp_path: Path) -> None:
    components = build_ha_components(tmp_path, Ports(), resolve=False, temporal_db="sqlite")
    assert "postgres" not in [c.name for c in components]
    pki = make_pki(tmp_path / "pki")
    temporal = temporal_component(tmp_path, 41000, pki, "/bin/temporal-server")
    config = yaml.safe_load(Path(temporal.argv[temporal.argv.index("--config-file") + 1])
                            .read_text())  # fmt: skip
    assert config["persistence"]["datastores"]["default"]["sql"]["pluginName"] == "sqlite"


def test_the_store_is_remembered_and_older_homes_stay_on_sqlite(tmp_path: Path) -> None:
    stack.StackState(tmp_path, Ports(postgres=41600), mode="ha", temporal_db="postgres").save()
    state = stack.StackState.load(tmp_path)
    assert state is not None and (state.temporal_db, state.ports.postgres) == ("postgres", 41600)
    raw = json.loads((tmp_path / "stack.json").read_text())
    del raw["temporal_db"]  # a stack.json written before --temporal-db
    (tmp_path / "stack.json").write_text(json.dumps(raw))
    state = stack.StackState.load(tmp_path)
    assert state is not None and state.temporal_db == "sqlite"


def test_without_postgresql_up_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(postgres, "bin_dir", lambda: None)
    with pytest.raises(StackError, match=r"apt-get install postgresql.*--temporal-db sqlite"):
        postgres.postgres_component(tmp_path, 41500, tmp_path)


def test_the_postgres_port_is_checked_free_with_its_flag(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        pg = build_ha_components(tmp_path, Ports(postgres=port), resolve=False)[3]
        with pytest.raises(StackError, match=rf"port {port} \(PostgreSQL\).*--postgres-port"):
            stack._check_ports_free(pg)


def test_a_dead_servers_lock_file_is_removed_a_running_ones_kept(tmp_path: Path) -> None:
    """After a crash whose zombie is not reaped yet PostgreSQL would refuse to start."""
    lock = tmp_path / "postmaster.pid"
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock.write_text(f"{dead.pid}\n{tmp_path}\n")
    postgres._remove_stale_lock(tmp_path)
    assert not lock.exists()
    lock.write_text(f"{os.getpid()}\n{tmp_path}\n")
    postgres._remove_stale_lock(tmp_path)
    assert lock.exists()
