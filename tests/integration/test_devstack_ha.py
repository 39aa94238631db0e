"""``skyshift up --ha``: the production topology on one machine, checked as a user would.

`up --ha` in a temporary home on free ports starts three etcd members (TLS with client
certificates), PostgreSQL, the Temporal server (built by scripts/build-temporal.sh) with an mTLS
frontend on it and the Temporal UI server, two API replicas behind HAProxy, two control workers
and two skylet managers; `skyshift status` lists each with its pid; a job submitted with skyctl
through HAProxy runs to Succeeded on the local cluster, the UI's API lists its workflow (the UI
server reached the mTLS frontend with its own certificate), and a second job succeeds after one
etcd member and one API replica are SIGKILLed; Temporal's databases are in PostgreSQL (psql finds
them and a job's workflow, with the password `up` made), and after PostgreSQL and the Temporal
server die `up --ha` starts both again and that workflow is still listed; etcd refuses a
plaintext client and one without a certificate; `down --purge` leaves no process and no data.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from skyshift.config import EtcdCredentials, EtcdTls
from skyshift.contract.names import job_workflow_id
from skyshift.devstack import postgres, procs
from skyshift.store import ObjectStore, Unavailable
from tests.fixtures.gobuild import built_binary
from tests.fixtures.ports import free_port_run, free_ports
from tests.fixtures.require import require
from tests.fixtures.stack import DevStack, require_stack_binaries, skyctl_argv

pytestmark = pytest.mark.integration

PROCESSES = ["etcd-1", "etcd-2", "etcd-3", "postgres", "temporal", "temporal-ui", "api-1", "api-2",
             "haproxy", "control-1", "control-2", "skylet-manager-1",
             "skylet-manager-2"]  # fmt: skip


def ha_stack(home: Path) -> DevStack:
    """Free ports for the HA layout: runs of 3 for etcd's client and peer ports and the API
    (HAProxy and two replicas), 9 for the Temporal server, 6 for metrics; one for PostgreSQL."""
    ui, pg = free_ports(2)
    ports = {"etcd": free_port_run(3), "etcd_peer": free_port_run(3),
             "temporal": free_port_run(9), "ui": ui, "api": free_port_run(3),
             "metrics": free_port_run(6), "postgres": pg}  # fmt: skip
    return DevStack(home=home, ports=ports, extra_env={"SKYSHIFT_POSTGRES_PORT": str(pg)})


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    require_stack_binaries()
    require(postgres.bin_dir() is not None, "PostgreSQL (apt-get install postgresql)")
    server = built_binary("build-temporal.sh", "temporal-server")
    stack = ha_stack(tmp_path_factory.mktemp("skyshift-ha"))
    stack.extra_env["SKYSHIFT_TEMPORAL_SERVER_BIN"] = server
    stack.extra_env["SKYSHIFT_TEMPORAL_UI_BIN"] = str(Path(server).parent / "temporal-ui-server")
    up = stack.run_skyshift("up", "--ha", timeout=900)
    try:
        assert up.returncode == 0, f"up --ha failed:\n{up.stdout}\n{up.stderr}"
        yield stack
    finally:
        stack.run_skyshift("down", "--purge")


def pids(stack: DevStack) -> dict[str, int]:
    """Component -> pid, from `skyshift status`'s table."""
    out = stack.run_skyshift("status").stdout
    found: dict[str, int] = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│") if c.strip()]
        if len(cells) >= 3 and cells[0] in PROCESSES and cells[2].isdigit():
            found[cells[0]] = int(cells[2])
    return found


def skyctl(stack: DevStack, *args: str, timeout: float = 60) -> str:
    env = {**os.environ, **stack.env}
    done = subprocess.run([*skyctl_argv(), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip
    assert done.returncode == 0, f"skyctl {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


def job_succeeds(stack: DevStack) -> str:
    """A job submitted through HAProxy (the CLI's server) runs to Succeeded and prints; its
    name."""
    name = f"ha-{uuid.uuid4().hex[:6]}"
    skyctl(stack, "create", "job", name, "--run", f"echo hello {name}", "--cpus", "0.1",
           "--restart_policy", "Never")  # fmt: skip
    skyctl(stack, "wait", "job", name, "--for", "phase=Succeeded", "--timeout", "240",
           timeout=300)  # fmt: skip
    assert f"hello {name}" in skyctl(stack, "logs", name)
    return name


def test_status_lists_every_process_with_its_pid(ha: DevStack) -> None:
    done = ha.run_skyshift("status")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all healthy" in done.stdout
    assert sorted(pids(ha)) == sorted(PROCESSES)
    state = json.loads((ha.home / "stack.json").read_text())
    assert (state["mode"], state["temporal_db"]) == ("ha", "postgres")


def test_the_cli_talks_to_haproxy(ha: DevStack) -> None:
    config = (ha.home / "config.yaml").read_text()
    assert f"http://127.0.0.1:{ha.ports['api']}" in config
    assert ha.env["SKYSHIFT_SERVER"] == f"http://127.0.0.1:{ha.ports['api']}"


def ui_lists(stack: DevStack, workflow_id: str) -> bool:
    """Whether the Temporal UI's API finds the workflow (visibility trails its start a
    little)."""
    url = f"{stack.temporal_ui_url}/api/v1/namespaces/default/workflows"
    for _ in range(30):
        answer = httpx.get(url, params={"query": f"WorkflowId = '{workflow_id}'"}, timeout=10)
        assert answer.status_code == 200, answer.text
        if workflow_id in [e["execution"]["workflowId"]
                           for e in answer.json().get("executions", [])]:  # fmt: skip
            return True
        time.sleep(1)
    return False


def psql(stack: DevStack, database: str, query: str) -> list[str]:
    """``query``'s rows through psql, logged in as `up` set PostgreSQL up: the user temporal
    with the password of auth/postgres-password, over TCP."""
    bins = postgres.bin_dir()
    assert bins is not None
    password = (stack.home / "auth" / "postgres-password").read_text().strip()
    port = str(stack.ports["postgres"])
    done = subprocess.run([str(bins / "psql"), "-h", "127.0.0.1", "-p", port, "-U", "temporal",
                           "-d", database, "-At", "-c", query],
                          env={**os.environ, "PGPASSWORD": password}, capture_output=True,
                          text=True, timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_job_runs_through_haproxy_and_the_ui_lists_its_workflow(ha: DevStack) -> None:
    name = job_succeeds(ha)
    page = httpx.get(f"{ha.temporal_ui_url}/", timeout=10)
    assert page.status_code == 200 and "<html" in page.text.lower()
    # the UI server's API is the frontend's, over its own mTLS connection
    assert ui_lists(ha, job_workflow_id("default", name))
    up = json.loads((ha.home / "stack.json").read_text())
    assert up["urls"]["temporal_ui"] == ha.temporal_ui_url


def test_temporals_data_is_in_postgresql_and_outlives_both_servers(ha: DevStack) -> None:
    """psql (the password of auth/, not trust) finds Temporal's databases and a job's workflow
    in them; PostgreSQL and the Temporal server killed, `up --ha` starts both again on the same
    data: the workflow is still listed and a new job runs."""
    password_file = ha.home / "auth" / "postgres-password"
    assert password_file.stat().st_mode & 0o777 == 0o600
    databases = psql(ha, "postgres", "SELECT datname FROM pg_database")
    assert {"temporal", "temporal_visibility"} <= set(databases)
    wanted = job_workflow_id("default", job_succeeds(ha))
    rows = psql(ha, "temporal_visibility",
                f"SELECT workflow_id FROM executions_visibility WHERE workflow_id = '{wanted}'")
    assert rows == [wanted]
    before = pids(ha)
    for name in ("temporal", "postgres"):
        os.killpg(before[name], signal.SIGKILL)  # the server and every child of it
    up = ha.run_skyshift("up", "--ha", timeout=600)
    assert up.returncode == 0, f"{up.stdout}\n{up.stderr}"
    assert "Temporal store" in up.stdout and "PostgreSQL" in up.stdout, up.stdout
    after = pids(ha)
    assert after["postgres"] != before["postgres"] and after["temporal"] != before["temporal"]
    assert after["etcd-3"] == before["etcd-3"]  # the rest was reused
    assert ui_lists(ha, wanted)
    job_succeeds(ha)


def test_etcd_refuses_plaintext_and_clients_without_a_certificate(ha: DevStack) -> None:
    endpoint = f"127.0.0.1:{ha.ports['etcd'] + 2}"  # etcd-3: the member no test kills
    password = (ha.home / "auth" / "etcd-password").read_text().strip()
    login = EtcdCredentials("root", password)
    pki = ha.home / "pki" / "etcd"
    tls = EtcdTls(pki / "ca.pem", pki / "client.pem", pki / "client-key.pem")

    async def revision(tls: EtcdTls | None) -> int:
        async with ObjectStore(endpoint, timeout=3.0, credentials=login, tls=tls) as store:
            return await store.revision()

    assert asyncio.run(revision(tls)) > 0  # the password and the client certificate
    with pytest.raises(Unavailable):
        asyncio.run(revision(None))  # the password over plaintext
    with pytest.raises(httpx.HTTPError):  # TLS, but no client certificate
        httpx.get(f"https://{endpoint}/health", timeout=5,
                  verify=ssl.create_default_context(cafile=str(tls.ca)))  # fmt: skip


def test_a_job_runs_after_losing_an_etcd_member_and_an_api_replica(ha: DevStack) -> None:
    before = pids(ha)
    for name in ("etcd-1", "api-1"):
        os.kill(before[name], signal.SIGKILL)
    job_succeeds(ha)
    after = pids(ha)
    assert "etcd-1" not in after and "api-1" not in after
    assert after["haproxy"] == before["haproxy"]


def test_down_leaves_no_process(ha: DevStack) -> None:
    running = pids(ha)
    done = ha.run_skyshift("down", "--purge")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [name for name, pid in running.items() if procs.alive(pid)] == []
    assert pids(ha) == {}
    assert not (ha.home / "postgres").exists()
    assert not postgres.real_data_dir(ha.home).exists()  # outside the home as root
