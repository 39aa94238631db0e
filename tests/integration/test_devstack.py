"""`skyshift up/down/status` against real etcd and Temporal dev server processes."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import yaml
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

from skyshift.compat.local import proc as local_proc
from skyshift.devstack import procs
from skyshift.devstack import stack as stack_mod
from skyshift.devstack.components import (
    SEARCH_ATTRIBUTES,
    Component,
    Health,
    HttpHealth,
    ProcessHealth,
    StackError,
    module_installed,
)
from skyshift.devstack.local import attach_local_cluster
from skyshift.lifecycle.client import connect
from tests.fixtures.require import require
from tests.fixtures.stack import DevStack, free_ports, new_stack, require_stack_binaries

pytestmark = pytest.mark.integration


def pids(stack: DevStack) -> dict[str, int]:
    state = json.loads((stack.home / "stack.json").read_text())
    return {name: rec["pid"] for name, rec in state["components"].items() if "pid" in rec}


async def search_attributes(address: str) -> dict[str, int]:
    client = await connect(address)
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
    assert module_installed("skyshift.api")
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


# --- the generic machinery with stand-in components (no etcd/Temporal needed) ---------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def info(self, message: str) -> None:
        self.events.append(f"info {message}")

    def skipped(self, component: Component, why: str) -> None:
        self.events.append(f"skipped {component.name}")

    def begin(self, component: Component, pid: int, reused: bool) -> None:
        self.events.append(f"begin {component.name} reused={reused}")

    def progress(self, component: Component, elapsed: float, detail: str) -> None:
        pass

    def end(self, component: Component, ok: bool, elapsed: float, reused: bool) -> None:
        self.events.append(f"end {component.name} ok={ok}")


def fake(home: Path, name: str, code: str, health: Health, timeout: float = 10.0) -> Component:
    return Component(
        name=name,
        title=name,
        argv=[sys.executable, "-c", code],
        env={"SKYSHIFT_READY_FILE": str(home / "run" / f"{name}.ready")},
        health=health,
        address="-",
        listens={},
        home=home,
        timeout=timeout,
    )


def use_components(monkeypatch: pytest.MonkeyPatch, make) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(stack_mod, "build_components", lambda home, ports, resolve=True: make(home))


def test_generic_up_reuse_and_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (port,) = free_ports(1)
    web_code = (
        f"import http.server as h; h.ThreadingHTTPServer(('127.0.0.1', {port}), "
        "h.SimpleHTTPRequestHandler).serve_forever()"
    )
    ready_code = (
        "import os, pathlib, time; time.sleep(0.3); "
        "pathlib.Path(os.environ['SKYSHIFT_READY_FILE']).touch(); time.sleep(600)"
    )

    def make(home: Path) -> list[Component]:
        return [
            fake(home, "web", web_code, HttpHealth(f"http://127.0.0.1:{port}/")),
            fake(home, "worker", ready_code, ProcessHealth(home / "run" / "worker.ready")),
            fake(home, "sleeper", "import time; time.sleep(600)", ProcessHealth(settle=0.3)),
        ]

    use_components(monkeypatch, make)
    home = tmp_path / "home"
    rec = Recorder()
    first = stack_mod.up(home, {}, rec)
    assert first.started == ["web", "worker", "sleeper"]
    assert "end worker ok=True" in rec.events
    started = pids(DevStack(home=home, ports={}))
    assert stack_mod.all_healthy(stack_mod.status(home))

    again = stack_mod.up(home, {}, Recorder())
    assert again.reused == ["web", "worker", "sleeper"] and not again.started
    assert pids(DevStack(home=home, ports={})) == started

    stopped = stack_mod.down(home, grace=5)
    assert [s.name for s in stopped] == ["sleeper", "worker", "web"]
    assert {s.outcome for s in stopped} == {"stopped"}
    for pid in started.values():
        assert not procs.group_alive(pid)
    assert not (home / "run" / "worker.ready").exists()
    assert not stack_mod.all_healthy(stack_mod.status(home))


def test_generic_crash_and_timeout_report_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    crash = "print('boom: bad config', flush=True); raise SystemExit(3)"
    use_components(monkeypatch, lambda h: [fake(h, "crasher", crash, ProcessHealth(settle=5))])
    with pytest.raises(StackError) as err:
        stack_mod.up(home, {}, Recorder())
    assert "crasher exited with code 3 before becoming healthy" in str(err.value)
    assert "boom: bad config" in str(err.value)

    slow = "print('still thinking', flush=True); import time; time.sleep(600)"
    use_components(
        monkeypatch,
        lambda h: [fake(h, "slow", slow, ProcessHealth(h / "run" / "slow.ready"), timeout=1)],
    )
    with pytest.raises(StackError) as err:
        stack_mod.up(home, {}, Recorder())
    assert "slow was not healthy after 1s (waiting for slow.ready)" in str(err.value)
    assert "still thinking" in str(err.value)
    state = json.loads((home / "stack.json").read_text())
    assert "slow" not in state["components"]  # the timed-out process was stopped
    assert not (home / "run" / "slow.pid").exists()


def test_attach_local_cluster_is_idempotent(tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.path == "/clusters"
            self.send_response(409 if seen else 201)
            seen.append(body)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert attach_local_cluster(url, tmp_path) == "attached"
        assert attach_local_cluster(url, tmp_path) == "already attached"
    finally:
        server.shutdown()
    spec = seen[0]["spec"]
    assert seen[0]["metadata"] == {"name": "local"}
    assert isinstance(spec, dict) and spec["manager"] == "local" and spec["memory"] > 0
    assert spec["config"] == {"state_dir": str(tmp_path / "clusters" / "local")}


def test_generic_hook_runs_once_healthy_and_changed_env_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``on_healthy`` runs after every start or reuse (etcd's auth setup); a process started with
    other environment settings (e.g. before etcd had a password) is not silently reused."""
    calls: list[str] = []
    env_extra: dict[str, str] = {}

    def hook() -> str:
        calls.append("hook")
        return "hook ran"

    def make(home: Path) -> list[Component]:
        sleeper = fake(home, "sleeper", "import time; time.sleep(600)", ProcessHealth(settle=0.2))
        sleeper.env.update(env_extra)
        sleeper.on_healthy = hook
        return [sleeper]

    use_components(monkeypatch, make)
    home = tmp_path / "home"
    rec = Recorder()
    stack_mod.up(home, {}, rec)
    assert "info hook ran" in rec.events
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    stack_mod.up(home, {}, Recorder())
    assert calls == ["hook", "hook"]
    env_extra["SKYSHIFT_ETCD_USER"] = "root"
    try:
        with pytest.raises(StackError, match=r"running .* with other settings"):
            stack_mod.up(home, {}, Recorder())
    finally:
        stack_mod.down(home, grace=5)


def test_purge_stops_local_replicas_before_deleting_their_state(tmp_path: Path) -> None:
    """``down`` leaves local replicas running (the next ``up`` adopts them); ``down --purge``
    deletes their directories, so it stops them first: nothing is left running that no
    cluster knows of."""
    home = tmp_path / "home"
    rdir = home / "clusters" / "local" / "replicas" / "job-a-0"
    rdir.mkdir(parents=True)
    local_proc.launch(rdir, ["sleep", "600"], {"PATH": "/usr/bin:/bin"})
    info = local_proc.read_pid(rdir)
    assert info is not None and local_proc.alive(info)
    try:
        kept = stack_mod.down(home)
        assert local_proc.alive(info) and rdir.exists()
        assert not any("replicas" in s.name for s in kept)

        purged = stack_mod.down(home, purge=True, grace=2.0)
    finally:
        local_proc.stop([info], 0)  # whatever happened above, no sleep outlives the test
    assert not local_proc.alive(info)
    assert info.group not in (local_proc.live_groups() or set())  # the sleep went with it
    assert not rdir.exists()
    assert [(s.name, s.outcome) for s in purged if "replicas" in s.name] == [
        ("1 local replicas", "stopped")]


def test_purge_stops_service_proxies_and_removes_work_roots_of_every_stack_cluster(
    tmp_path: Path,
) -> None:
    """Every local cluster under the home (not only ``local``) loses its HAProxy and its
    ``run_as`` working directories outside the home; a pid file whose process is not that
    cluster's HAProxy (the pid was reused) does not get anything killed."""
    from skyshift.compat.local.user import default_work_root

    home = tmp_path / "home"
    lb = home / "clusters" / "b" / "lb"
    lb.mkdir(parents=True)
    other = home / "clusters" / "c" / "lb"
    other.mkdir(parents=True)
    # stand-ins: a process whose command line is that of b's HAProxy, and an unrelated one
    proxy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "haproxy",
                              "-f", str(lb / "haproxy.cfg")])
    bystander = subprocess.Popen(["sleep", "600"])
    (lb / "haproxy.pid").write_text(f"{proxy.pid}\n")
    (other / "haproxy.pid").write_text(f"{bystander.pid}\n")
    work = default_work_root("b", home / "clusters" / "b")
    work.mkdir(parents=True, exist_ok=True)
    try:
        purged = stack_mod.down(home, purge=True, grace=1.0)
        assert proxy.wait(10) is not None
        assert bystander.poll() is None
    finally:
        for p in (proxy, bystander):
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    assert ("1 local service proxies", "stopped") in [(s.name, s.outcome) for s in purged]
    assert not work.exists() and not (home / "clusters").exists()


def test_purge_stops_a_proxy_whose_pid_file_is_in_its_root_runtime_dir(tmp_path: Path) -> None:
    """As root a local cluster's HAProxy keeps its pid file and config in
    /run/skyshift/lb/<cluster>-<hash of its lb dir> (lb_run.run_dir), not in the cluster's
    state: `down --purge` stops it there too and removes that directory (it used to look only in
    the state, so every service proxy of a root stack outlived the purge)."""
    from skyshift.compat.local.lb_run import run_dir

    require(os.geteuid() == 0, "root (the runtime directories under /run/skyshift/lb)")
    home = tmp_path / "home"
    lb = home / "clusters" / "b" / "lb"
    lb.mkdir(parents=True)
    runtime = run_dir("b", lb)
    runtime.mkdir(parents=True)
    proxy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "haproxy",
                              "-f", str(runtime / "haproxy.cfg")])  # fmt: skip
    (runtime / "haproxy.pid").write_text(f"{proxy.pid}\n")
    try:
        purged = stack_mod.down(home, purge=True, grace=1.0)
        assert proxy.wait(10) is not None
    finally:
        proxy.kill()
        proxy.wait()
        shutil.rmtree(runtime, ignore_errors=True)
    assert ("1 local service proxies", "stopped") in [(s.name, s.outcome) for s in purged]
    assert not runtime.exists()
