"""Issue 26, attacked from inside: a non-admin user's job on ``skyshift up``'s local cluster tries
every path to the control plane and to another tenant, and reports what happened.

The stack is the real one (``skyshift up`` as root, metrics on), the users are
real (invited, registered, each with a role on one namespace), the jobs are submitted through
the API. The probe connects to each port the stack listens on (Temporal gRPC and UI, the dev
server's internal ports, etcd client and peer, the API's and workers' metrics listeners), to
HAProxy's runtime socket,
and reads another namespace's replica's environment, working file and process. Every verdict
comes from the probe's own output. The API must answer the same probe (positive control: a
probe that cannot connect anywhere would otherwise pass).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from skyshift.compat.local.lb import LocalBalancer
from skyshift.compat.local.lb_run import LB_USER
from skyshift.devstack import firewall
from skyshift.devstack.local import local_state_dir
from tests.fixtures.auth import admin_password
from tests.fixtures.require import require
from tests.fixtures.stack import DevStack, stack_up

pytestmark = pytest.mark.integration
PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    require(os.geteuid() == 0, "root (skyshift up isolates workloads only when run as root)")
    for tool in ("nft", "bash", "ss", "haproxy"):
        require(shutil.which(tool, path=f"{os.environ.get('PATH', '')}:/usr/sbin") is not None,
                f"`{tool}` (./dev install)")
    # metrics are on by default: the API, then the workers on the next two ports
    with stack_up(tmp_path_factory.mktemp("iso-home")) as devstack:
        assert firewall.current_ports(devstack.home), "up installed no firewall table"
        yield devstack
    assert firewall.current_ports(devstack.home) is None, "down left the firewall table"


@dataclass
class Tenants:
    http: httpx.Client
    tokens: dict[str, str]  # user -> token; alice may run jobs in iso-a, bob in iso-b


@pytest.fixture(scope="module")
def tenants(stack: DevStack) -> Iterator[Tenants]:
    http = httpx.Client(base_url=stack.api_url, timeout=30)
    got = http.post("/token", data={"username": "admin", "password": admin_password(stack.home)})
    admin = {"Authorization": f"Bearer {got.json()['access_token']}"}
    tokens = {}
    for user, ns in (("alice", "iso-a"), ("bob", "iso-b")):
        ok(http.post("/namespaces", json={"kind": "Namespace", "metadata": {"name": ns}},
                     headers=admin))  # fmt: skip
        role = {"kind": "Role", "metadata": {"name": f"{ns}-edit"}, "spec": {
            "rules": [{"resources": ["jobs", "services"], "actions": ["*"]}],
            "namespaces": [ns]}}  # fmt: skip
        ok(http.post("/roles", json=role, headers=admin))
        invite = ok(http.post("/invite", json={"roles": [f"{ns}-edit"]}, headers=admin))
        ok(http.post("/register_user", json={"username": user, "password": PASSWORD,
                                             "invite": invite["invite"]}))  # fmt: skip
        login = ok(http.post("/token", data={"username": user, "password": PASSWORD}))
        tokens[user] = login["access_token"]
    yield Tenants(http, tokens)
    http.close()


def ok(resp: httpx.Response) -> Any:
    where = f"{resp.request.method} {resp.request.url}"
    assert resp.is_success, f"{where}: {resp.status_code} {resp.text}"
    return resp.json()


def submit(t: Tenants, user: str, ns: str, run: str, **spec: Any) -> str:
    name = f"p-{uuid.uuid4().hex[:6]}"
    job = {"kind": "Job", "metadata": {"name": name, "labels": spec.pop("labels", {})},
           "spec": {"run": run, "resources": {"cpus": 0.1}, "restartPolicy": "Never", **spec}}
    ok(t.http.post(f"/{ns}/jobs", json=job, headers=bearer(t, user)))
    return name


def bearer(t: Tenants, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {t.tokens[user]}"}


def wait_phase(t: Tenants, user: str, ns: str, name: str, *phases: str) -> str:
    phase, end = "", time.monotonic() + 120
    while time.monotonic() < end:
        got = ok(t.http.get(f"/{ns}/jobs/{name}", headers=bearer(t, user)))
        phase = (got.get("status") or {}).get("phase", "")
        if phase in phases:
            return phase
        time.sleep(0.5)
    raise AssertionError(f"job {ns}/{name} is {phase!r}, not one of {phases}")


def logs(t: Tenants, user: str, ns: str, name: str) -> str:
    resp = t.http.get(f"/{ns}/jobs/{name}/logs", headers=bearer(t, user))
    body = resp.json() if resp.headers.get("content-type", "").startswith("application/json") \
        else resp.text
    return body.get("logs", "") if isinstance(body, dict) else str(body)


def replica_process(marker: str) -> int:
    """The pid of the job's own process (not its root supervisor) whose environment holds
    ``marker`` (root can read it)."""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        for entry in os.listdir("/proc"):
            try:
                env = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if (entry.isdigit() and marker.encode() in env.split(b"\0")
                    and Path(f"/proc/{entry}").stat().st_uid != 0):  # not its supervisor
                return int(entry)
        time.sleep(0.3)
    raise AssertionError(f"no process with {marker} in its environment")


def stack_ports(stack: DevStack) -> dict[str, int]:
    """Every port the control plane listens on, by its owner (from ss), without the API."""
    state = json.loads((stack.home / "stack.json").read_text())
    pids = {c["pid"]: name for name, c in state["components"].items() if "pid" in c}
    found: dict[str, int] = {}
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        port = int(line.split()[3].rsplit(":", 1)[1])
        for pid in map(int, re.findall(r"pid=(\d+)", line)):
            if pid in pids and port != stack.ports["api"]:
                found[f"{pids[pid]}-{port}"] = port
    for name in ("etcd", "etcd_peer", "temporal", "ui"):
        assert stack.ports[name] in found.values(), (name, found)
    assert len(found) > 4, found  # the dev server's internal ports too
    metrics = stack.ports["metrics"]
    assert {metrics, metrics + 1, metrics + 2} <= set(found.values()), found  # API and workers
    return found


def port_probe(ports: dict[str, int], api: int) -> list[str]:
    """Shell lines (``/bin/sh`` is enough: each connection is a ``bash -c``) printing
    ``uid=``, ``gid=``, ``groups=``, ``<name>=OPEN`` or the error for each of ``ports``, and
    ``api=`` the status line of the API's ``/readyz`` (the positive control)."""
    tcp = ('tcp() { out=$(bash -c "exec 3<>/dev/tcp/127.0.0.1/$2" 2>&1) '
           '&& echo "$1=OPEN" || echo "$1=${out##*: }"; }')  # fmt: skip
    return [
        tcp,
        'echo "uid=$(id -u)"',
        'echo "gid=$(id -g)"',
        'echo "groups=$(id -G)"',
        *(f"tcp {name} {port}" for name, port in ports.items()),
        f"api=$(bash -c 'exec 3<>/dev/tcp/127.0.0.1/{api}; printf \"GET /readyz HTTP/1.0\\r\\n"
        "\\r\\n\" >&3; head -1 <&3' 2>&1); echo \"api=$api\"",
    ]  # fmt: skip


def probe_output(text: str) -> dict[str, str]:
    """The probe's ``key=value`` lines; the rest of a job's log is ignored. A manager may echo
    the script first (Ray does): the probe's own lines come after it, and the last one wins."""
    found = (re.fullmatch(r"([\w.-]+)=(.*)", ln) for ln in text.splitlines())
    return {m[1]: m[2] for m in found if m}


def probe_script(ports: dict[str, int], api: int, victim: int, workfile: Path,
                 sock: Path) -> str:
    unix = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect(sys.argv[1]);"
            " print('haproxy=OPEN')\nexcept OSError as e: print('haproxy='+e.strerror)")
    return "\n".join([
        *port_probe(ports, api),
        f"cat /proc/{victim}/environ >/dev/null 2>&1 && echo environ=READ || echo environ=denied",
        f"cat {workfile} >/dev/null 2>&1 && echo workfile=READ || echo workfile=denied",
        f'test -e /proc/{victim} && echo victim=visible || echo victim=hidden',
        'echo "procs=$(ls /proc | grep -c "^[0-9]")"',
        f"/usr/bin/python3 -c \"{unix}\" {sock}",
    ])  # fmt: skip


def test_a_tenants_job_reaches_neither_the_control_plane_nor_another_tenant(
    stack: DevStack, tenants: Tenants
) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    victim_job = submit(tenants, "bob", "iso-b", f"echo {token} >secret; exec sleep 600",
                        envs={"VICTIM_TOKEN": token}, ports=[8080], labels={"app": "victim"})
    service = f"victim-{token[4:10]}"  # its address comes from its name: one per run
    svc = {"kind": "Service", "metadata": {"name": service},
           "spec": {"selector": {"app": "victim"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    ok(tenants.http.post("/iso-b/services", json=svc, headers=bearer(tenants, "bob")))
    try:
        attack(stack, tenants, token, victim_job)
    finally:  # `skyshift down` leaves services' HAProxy running: delete it now
        tenants.http.delete(f"/iso-b/services/{service}", headers=bearer(tenants, "bob"))
        tenants.http.delete(f"/iso-b/jobs/{victim_job}", headers=bearer(tenants, "bob"))
        end = time.monotonic() + 30
        while (tenants.http.get(f"/iso-b/services/{service}", headers=bearer(tenants, "bob"))
               .status_code != 404 and time.monotonic() < end):
            time.sleep(0.5)


def attack(stack: DevStack, tenants: Tenants, token: str, victim_job: str) -> None:
    wait_phase(tenants, "bob", "iso-b", victim_job, "Running")
    victim = replica_process(f"VICTIM_TOKEN={token}")
    workfile = Path(os.readlink(f"/proc/{victim}/cwd")) / "secret"
    sock = LocalBalancer("local", local_state_dir(stack.home), "127.0.0.1").sock
    pidfile, end = sock.parent / "haproxy.pid", time.monotonic() + 60
    while not (sock.exists() and pidfile.exists()) and time.monotonic() < end:
        time.sleep(0.5)
    assert sock.exists() and pidfile.exists(), "HAProxy did not start for the service"
    lb_pid = int(pidfile.read_text())
    assert Path(f"/proc/{lb_pid}").stat().st_uid == pwd.getpwnam(LB_USER).pw_uid  # not root
    assert token in workfile.read_text()  # control: the file is there for whoever may read it
    ports = stack_ports(stack)

    name = submit(tenants, "alice", "iso-a",
                  probe_script(ports, stack.ports["api"], victim, workfile, sock))
    phase = wait_phase(tenants, "alice", "iso-a", name, "Succeeded", "Failed")
    seen = probe_output(logs(tenants, "alice", "iso-a", name))
    assert phase == "Succeeded", seen
    assert seen["api"].startswith("HTTP/1.1 200"), seen  # the probe can connect: the API answers
    refused = {k: seen[k] for k in ports}
    assert set(refused.values()) == {"Connection refused"}, refused
    assert seen["haproxy"] == "Permission denied", seen
    assert (seen["environ"], seen["workfile"], seen["victim"]) == ("denied", "denied", "hidden")
    assert 0 < int(seen["procs"]) < 10, seen  # only the probe's own processes
    victim_uid = Path(f"/proc/{victim}/status").read_text().split("Uid:")[1].split()[0]
    assert seen["uid"] not in (victim_uid, "0"), seen
    assert token not in json.dumps(seen)
