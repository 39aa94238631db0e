"""The stack's firewall: which ports it finds, the rules it writes, and (as root, with nft) that
the rule refuses the replicas' group and nobody else, and that ``remove`` takes it away."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from skyshift.devstack import firewall, isolation, procs
from skyshift.devstack.components import Ports
from tests.fixtures.require import require


def test_listening_ports_finds_the_listeners_of_a_process_group(tmp_path: Path) -> None:
    code = ("import socket,sys,time\ns=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\n"
            "u=socket.socket(type=socket.SOCK_DGRAM); u.bind(('127.0.0.1',0))\n"
            "print(s.getsockname()[1], u.getsockname()[1], flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
    try:
        assert child.stdout is not None
        tcp, udp = map(int, child.stdout.readline().split())
        assert {tcp, udp} <= firewall.listening_ports({child.pid})
        assert tcp not in firewall.listening_ports({os.getpgid(0)})  # not ours
    finally:
        child.kill()
        child.wait()


def test_ruleset_replaces_the_table_and_names_every_port() -> None:
    script = firewall.ruleset("skyshift_abc", 995, [7233, 8233, 7233])
    assert script.splitlines()[:3] == ["table inet skyshift_abc", "delete table inet skyshift_abc",
                                       "table inet skyshift_abc {"]  # fmt: skip
    assert "meta skgid 995 fib daddr type local tcp dport { 7233, 8233 }" in script
    assert "reject with tcp reset" in script


def test_the_table_names_its_home_when_nft_can_quote_it(tmp_path: Path) -> None:
    assert f'  comment "{tmp_path}"' in firewall.ruleset("skyshift_abc", 995, [1], tmp_path)
    for odd in (tmp_path / 'a"b', tmp_path / ("x" * 130)):
        assert "comment" not in firewall.ruleset("skyshift_abc", 995, [1], odd)


def test_a_stack_runs_while_a_process_its_state_names_runs(tmp_path: Path) -> None:
    assert not isolation.stack_running(tmp_path)  # no stack.json: never started, or purged
    state = tmp_path / "stack.json"
    me = {"pid": os.getpid(), "start_ticks": procs.start_ticks(os.getpid())}
    state.write_text(json.dumps({"components": {"api": me}}))
    assert isolation.stack_running(tmp_path)
    state.write_text(json.dumps({"components": {"api": {**me, "start_ticks": 1}}}))
    assert not isolation.stack_running(tmp_path)  # the pid now belongs to another process
    state.write_text("{not json")
    assert isolation.stack_running(tmp_path)  # unreadable: keep its table


def test_up_removes_the_tables_of_dead_stacks_only(tmp_path: Path) -> None:
    """A stack killed without ``down`` left a table refusing ports that later stacks listen
    on (a tenant's Ray job then found the new stack's API refused); pruning removes it, keeps
    a live stack's table and the one being installed, and removes a table naming no home."""
    require(os.geteuid() == 0 and firewall.nft_binary() is not None, "root and nftables")
    dead, live, mine = tmp_path / "dead", tmp_path / "live", tmp_path / "mine"
    for home in (dead, live, mine):
        home.mkdir()
    (live / "stack.json").write_text(json.dumps({"components": {"api": {"pid": os.getpid()}}}))
    bare = firewall.TABLE_PREFIX + "t" + str(os.getpid())
    gid = 64000 + os.getpid() % 1000
    try:
        for home in (dead, live, mine):
            firewall.install(home, gid, [1])
        nft = firewall.nft_binary()
        assert nft is not None
        subprocess.run([nft, "add", "table", "inet", bare], check=True)
        homes = firewall.tables()
        assert homes[firewall.table_name(dead)] == dead and homes[bare] is None
        gone = firewall.prune(isolation.stack_running, keep=mine)
        assert {firewall.table_name(dead), bare} <= set(gone)  # and any other dead stack's
        assert firewall.table_name(live) not in gone and firewall.table_name(mine) not in gone
        assert firewall.current_ports(live) == {1} and firewall.current_ports(mine) == {1}
        assert firewall.current_ports(dead) is None
    finally:
        for home in (dead, live, mine):
            firewall.remove(home)
        subprocess.run(["nft", "delete", "table", "inet", bare], capture_output=True)


def test_tables_are_per_home(tmp_path: Path) -> None:
    a, b = firewall.table_name(tmp_path / "a"), firewall.table_name(tmp_path / "b")
    assert a != b and a.startswith(firewall.TABLE_PREFIX) and len(a) < 32


def test_not_root_says_each_thing_it_cannot_enforce(tmp_path: Path) -> None:
    lines = isolation.not_root(tmp_path, Ports(temporal=1, ui=2, etcd=3, etcd_peer=4))
    text = "\n".join(lines)
    for what in (str(tmp_path), "127.0.0.1:1", "2 UI", "3 client", "4 peer", "environ",
                 "HAProxy", "Ray", "as root"):
        assert what in text, what


def test_control_ports_leave_the_api_open() -> None:
    ports = Ports(etcd=1, etcd_peer=2, temporal=3, ui=4, api=5)
    assert isolation.control_ports(ports, {}) >= {1, 2, 3, 4}
    assert 5 not in isolation.control_ports(ports, {"api": {"pid": os.getpid()}})


def test_control_ports_hold_every_metrics_port_bound_or_not() -> None:
    # the API, the control worker and the skylet manager get port, +1, +2; a worker still
    # starting when `up` installs the table has not bound its own yet
    ports = Ports(etcd=1, etcd_peer=2, temporal=3, ui=4, api=5, metrics=40100)
    assert isolation.control_ports(ports, {}) >= {40100, 40101, 40102}
    assert isolation.control_ports(Ports(metrics=0), {}).isdisjoint({9464, 9465, 9466})


def test_the_rule_refuses_the_group_and_nobody_else(tmp_path: Path) -> None:
    require(os.geteuid() == 0 and firewall.nft_binary() is not None, "root and nftables")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    connect = (f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 2); "
               "print('open')\nexcept OSError as e: print(e.strerror)")
    gid = 64000 + os.getpid() % 1000  # a group no process on this host uses
    try:
        firewall.install(tmp_path, gid, [port])
        assert firewall.current_ports(tmp_path) == {port}
        refused = as_group(gid, connect)
        other = as_group(gid + 1, connect)
        assert firewall.remove(tmp_path)
        after = as_group(gid, connect)
    finally:
        firewall.remove(tmp_path)
        server.close()
    assert (refused, other, after) == ("Connection refused", "open", "open")
    assert firewall.current_ports(tmp_path) is None


def as_group(gid: int, code: str) -> str:
    argv = ["setpriv", "--reuid=65534", f"--regid={gid}", "--clear-groups", "--",
            "/usr/bin/python3", "-c", code]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()


def test_each_python_component_gets_its_own_metrics_port(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from skyshift.devstack.components import build_components

    # `up`'s own variable (one address) is never handed down: each process gets its own
    monkeypatch.setenv("SKYSHIFT_METRICS_ADDRESS", "127.0.0.1:1234")
    components = build_components(tmp_path, Ports(metrics=9464), resolve=False)
    got = {c.name: c.env.get("SKYSHIFT_METRICS_ADDRESS") for c in components}
    assert got == {"etcd": None, "temporal": None, "api": "127.0.0.1:9464",
                   "control": "127.0.0.1:9465", "skylet-manager": "127.0.0.1:9466"}
    for c in components[2:]:
        assert "SKYSHIFT_METRICS_ADDRESS" in c.env_drop and c.listens["metrics"], c.name
    off = build_components(tmp_path, Ports(metrics=0), resolve=False)
    assert all("SKYSHIFT_METRICS_ADDRESS" not in c.env and not c.metrics for c in off)


def test_workers_are_healthy_only_once_they_say_so(tmp_path: Path) -> None:
    # `up` reads the ports to refuse when it returns: a worker a second old may still be
    # importing, its metrics listeners not bound (they stayed open to jobs, issue 26)
    from skyshift.devstack.components import ProcessHealth, build_components

    for c in build_components(tmp_path, Ports(), resolve=False):
        if c.name in ("control", "skylet-manager"):
            assert c.health == ProcessHealth(ready_file=c.ready_file), c.name
            assert c.env["SKYSHIFT_READY_FILE"] == str(c.ready_file)
