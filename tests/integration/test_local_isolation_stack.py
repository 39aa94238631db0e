"""What a job on ``skyshift up``'s local cluster can reach, checked the way a user would: a job
submitted with ``skyctl`` prints ``id -u`` and tries the control plane's secrets and etcd.

Run as root, ``up`` runs the local cluster's replicas as a system user per namespace in the
group ``skyshift-run``; the stack's home (admin password, signing key, etcd password) is 0700,
etcd wants a password and the firewall refuses its port to jobs.
"""

from __future__ import annotations

import http.server
import json
import os
import pwd
import shutil
import stat
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from skyshift.compat.local.tenants import user_name
from skyshift.config import admin_password_file, etcd_password_file, jwt_key_file
from skyshift.devstack.local import RUN_USER, attach_local_cluster
from tests.fixtures.stack import DevStack

pytestmark = pytest.mark.integration


def skyctl(stack: DevStack, *args: str) -> subprocess.CompletedProcess[str]:
    path = shutil.which("skyctl")
    assert path, "the skyctl console script is not installed (pip install -e .)"
    env = {**os.environ, **stack.env}
    return subprocess.run([path, *args], env=env, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip


def run_job(stack: DevStack, script: str, deadline: float = 120) -> tuple[str, str]:
    """(phase, logs) of a one-replica job running ``script`` on the local cluster."""
    name = f"iso-{uuid.uuid4().hex[:6]}"
    made = skyctl(stack, "create", "job", name, "--run", script, "--cpus", "0.1",
                  "--restart_policy", "Never")  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    phase, end = "", time.monotonic() + deadline
    while time.monotonic() < end:
        got = skyctl(stack, "get", "job", name, "-o", "json")
        assert got.returncode == 0, got.stdout + got.stderr
        phase = (json.loads(got.stdout).get("status") or {}).get("phase", "")
        if phase in ("Succeeded", "Failed"):
            break
        time.sleep(0.5)
    logs = skyctl(stack, "logs", name)
    skyctl(stack, "delete", "job", name)
    return phase, logs.stdout


def lines(logs: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in logs.splitlines() if "=" in ln)


@pytest.fixture(scope="module")
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("skyshift up isolates local replicas only when run as root")


def test_home_and_secrets_are_private(devstack: DevStack, as_root: None) -> None:
    for path in (devstack.home, devstack.home / "auth"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for path in (admin_password_file(devstack.home), etcd_password_file(devstack.home)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_job_cannot_reach_the_control_planes_secrets(devstack: DevStack, as_root: None) -> None:
    secrets = {
        "admin": admin_password_file(devstack.home),
        "jwt": jwt_key_file(devstack.home),
        "etcdpw": etcd_password_file(devstack.home),
    }
    checks = [f'if cat {path} >/dev/null 2>&1; then echo {key}=READ; else echo {key}=denied; fi'
              for key, path in secrets.items()]  # fmt: skip
    script = "; ".join([
        'echo "uid=$(id -u)"',
        'echo "user=$(id -un)"',
        *checks,
        f'if ls {devstack.home} >/dev/null 2>&1; then echo home=listed; else echo home=denied; fi',
        'echo hi > mine && echo workdir=writable',
    ])  # fmt: skip
    phase, logs = run_job(devstack, script)
    seen = lines(logs)
    assert phase == "Succeeded", logs
    user = pwd.getpwuid(int(seen["uid"]))  # the default namespace's user, in RUN_USER's group
    assert seen["uid"] != "0" and user.pw_gid == pwd.getpwnam(RUN_USER).pw_gid, logs
    assert seen["user"] == user.pw_name == user_name(RUN_USER, "default")
    assert (seen["admin"], seen["jwt"], seen["etcdpw"]) == ("denied", "denied", "denied"), logs
    assert seen["home"] == "denied"
    assert seen["workdir"] == "writable"
    for path in secrets.values():
        assert path.read_text().strip() not in logs


def test_a_job_cannot_read_etcd_without_the_password(devstack: DevStack, as_root: None) -> None:
    if not shutil.which("curl"):
        pytest.skip("curl is not installed (the job talks to etcd's HTTP gateway with it)")
    # what `etcdctl get / --prefix` does, without credentials, from inside a job
    request = (f"curl -sS -X POST http://{devstack.etcd_endpoint}/v3/kv/range "
               """-d '{"key": "Lw==", "range_end": "MA=="}'""")  # fmt: skip
    phase, logs = run_job(devstack, f'echo "etcd=$({request} 2>&1)"')
    assert phase == "Succeeded", logs
    answer = lines(logs)["etcd"]
    # the firewall refuses the connection (test_workload_isolation.py); without it, etcd would
    # answer and refuse for want of a password
    assert "Failed to connect" in answer, answer
    assert '"kvs"' not in answer


def test_a_local_cluster_attached_without_run_as_is_updated(tmp_path: Path) -> None:
    """A stack started before run_as existed: `up` gives its cluster run_as, keeping the rest."""
    cluster: dict[str, Any] = {
        "kind": "Cluster", "metadata": {"name": "local", "resourceVersion": "7"},
        "spec": {"manager": "local", "cpus": 2, "config": {"state_dir": "/old", "nodes": 2}},
        "status": {"phase": "Ready"},
    }  # fmt: skip
    puts: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _reply(self, code: int, body: dict[str, Any] | None = None) -> None:
            data = json.dumps(body or {}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self._reply(409)

        def do_GET(self) -> None:
            assert self.path == "/clusters/local"
            self._reply(200, puts[-1] if puts else cluster)

        def do_PUT(self) -> None:
            puts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self._reply(200, puts[-1])

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert attach_local_cluster(url, tmp_path, run_as=RUN_USER) == (
            f"updated to run replicas as {RUN_USER} (a user per namespace)"
        )
        assert attach_local_cluster(url, tmp_path, run_as=RUN_USER) == "already attached"
        assert attach_local_cluster(url, tmp_path) == "already attached"
    finally:
        server.shutdown()
    [put] = puts
    assert put["spec"]["config"] == {"state_dir": "/old", "nodes": 2, "run_as": RUN_USER,
                                     "namespace_users": True}
    assert put["metadata"]["resourceVersion"] == "7" and "status" not in put
