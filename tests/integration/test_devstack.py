"""`skyshift up/down/status` against real etcd and Temporal dev server processes."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

from skyshift.devstack import procs
from skyshift.devstack.components import SEARCH_ATTRIBUTES, module_installed
from tests.fixtures.stack import DevStack, new_stack, require_stack_binaries

pytestmark = pytest.mark.integration


def pids(stack: DevStack) -> dict[str, int]:
    state = json.loads((stack.home / "stack.json").read_text())
    return {name: rec["pid"] for name, rec in state["components"].items() if "pid" in rec}


async def search_attributes(address: str) -> dict[str, int]:
    client = await Client.connect(address)
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace="default")
    )
    return dict(resp.custom_attributes)


# --- the shared session stack ---------------------------------------------------------------


def test_etcd_is_healthy(devstack: DevStack) -> None:
    resp = httpx.get(f"{devstack.etcd_url}/health", timeout=5)
    assert resp.status_code == 200
    assert resp.json()["health"] == "true"


async def test_temporal_has_skyshift_search_attributes(devstack: DevStack) -> None:
    attrs = await search_attributes(devstack.temporal_address)
    for name in SEARCH_ATTRIBUTES:
        assert attrs.get(name) == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD, attrs


def test_temporal_sqlite_is_in_wal_mode(devstack: DevStack) -> None:
    db = devstack.home / "temporal" / "temporal.db"
    assert db.exists()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    finally:
        conn.close()
    assert mode == "wal"
    assert db.with_name("temporal.db-wal").exists()


def test_up_twice_reuses_running_processes(devstack: DevStack) -> None:
    before = pids(devstack)
    assert {"etcd", "temporal"} <= set(before)
    again = devstack.run_skyshift("up")
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stdout
    assert pids(devstack) == before


def test_status_is_zero_when_healthy(devstack: DevStack) -> None:
    out = devstack.run_skyshift("status")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "etcd" in out.stdout and "temporal" in out.stdout
    assert "all healthy" in out.stdout


def test_stack_json_and_cli_context(devstack: DevStack) -> None:
    state = json.loads((devstack.home / "stack.json").read_text())
    assert state["ports"] == devstack.ports
    assert state["urls"]["temporal"] == devstack.temporal_address
    assert state["urls"]["docs"] == f"{devstack.api_url}/docs"
    cfg = yaml.safe_load((devstack.home / "config.yaml").read_text())
    assert cfg["current-context"] == "local"
    (local,) = [c for c in cfg["contexts"] if c["name"] == "local"]
    assert local["server"] == devstack.api_url
    assert local["namespace"] == "default"


def test_api_ready_and_local_cluster_attached(devstack: DevStack) -> None:
    if not module_installed("skyshift.api"):
        pytest.skip("skyshift.api is not written yet: `up` skips the API server")
    assert httpx.get(f"{devstack.api_url}/readyz", timeout=5).status_code == 200
    again = devstack.run_skyshift("up")
    assert again.returncode == 0, again.stderr
    assert "cluster local: already attached" in again.stdout


# --- stacks of their own ---------------------------------------------------------------------


async def test_stale_pid_restart_on_existing_db_and_down(tmp_path: Path) -> None:
    require_stack_binaries()
    stack = new_stack(tmp_path / "home")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (stack.home / "run").mkdir(parents=True)
    (stack.home / "run" / "etcd.pid").write_text(f"{dead.pid}\n")
    try:
        first = stack.run_skyshift("up")
        assert first.returncode == 0, first.stdout + first.stderr
        assert "etcd: removed stale pid file" in first.stdout
        started = pids(stack)
        assert started["etcd"] != dead.pid

        down = stack.run_skyshift("down")
        assert down.returncode == 0, down.stderr
        assert "temporal: stopped" in down.stdout and "etcd: stopped" in down.stdout
        assert down.stdout.index("temporal") < down.stdout.index("etcd")  # reverse order
        for pid in started.values():
            assert not procs.alive(pid)
            assert not procs.group_alive(pid)
        assert not list((stack.home / "run").glob("*.pid"))
        status = stack.run_skyshift("status")
        assert status.returncode == 1
        assert "stopped" in status.stdout

        # Restart on the existing Temporal db: the --search-attribute flags must not break it.
        second = stack.run_skyshift("up")
        assert second.returncode == 0, second.stdout + second.stderr
        assert (stack.home / "temporal" / "temporal.db").exists()
        attrs = await search_attributes(stack.temporal_address)
        assert set(SEARCH_ATTRIBUTES) <= set(attrs)
        assert stack.run_skyshift("status").returncode == 0
    finally:
        purge = stack.run_skyshift("down", "--purge")
    assert purge.returncode == 0, purge.stderr
    assert not (stack.home / "temporal").exists()
    assert not (stack.home / "etcd").exists()


def test_status_is_one_when_nothing_runs(tmp_path: Path) -> None:
    stack = new_stack(tmp_path / "home")
    out = stack.run_skyshift("status")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr


def test_missing_etcd_is_one_clear_line(tmp_path: Path) -> None:
    stack = new_stack(tmp_path / "home")
    out = stack.run_skyshift("up", env={"SKYSHIFT_ETCD_BIN": "/nonexistent/etcd"})
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error:") and "apt-get install etcd-server" in lines[0]
    assert not (stack.home / "run" / "etcd.pid").exists()


def test_etcd_not_on_path_is_one_clear_line(tmp_path: Path) -> None:
    stack = new_stack(tmp_path / "home")
    empty = tmp_path / "bin"
    empty.mkdir()
    out = stack.run_skyshift("up", env={"PATH": str(empty), "SKYSHIFT_ETCD_BIN": ""})
    assert out.returncode != 0
    assert out.stderr.count("\n") == 1 and "etcd is not on PATH" in out.stderr
    assert "SKYSHIFT_ETCD_BIN" in out.stderr


def test_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    require_stack_binaries()
    stack = new_stack(tmp_path / "home")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", stack.ports["etcd"]))
        busy.listen()
        out = stack.run_skyshift("up")
    assert out.returncode != 0
    assert f"port {stack.ports['etcd']} (etcd client) is already in use" in out.stderr
    assert "--etcd-port" in out.stderr and "Traceback" not in out.stderr
    stack.run_skyshift("down")


@pytest.mark.parametrize("command", [[], ["up"], ["down"], ["status"]])
def test_help_on_every_command(tmp_path: Path, command: list[str]) -> None:
    out = new_stack(tmp_path).run_skyshift(*command, "--help")
    assert out.returncode == 0
    assert "Usage:" in out.stdout and len(out.stdout.splitlines()) > 4
