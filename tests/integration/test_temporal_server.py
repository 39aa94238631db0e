"""SkyShift on the real Temporal server (not the dev server): built from go.temporal.io/server
(scripts/build-temporal.sh), its frontend serving mTLS that requires a client certificate, its
store SQLite in a file or PostgreSQL (its databases made and migrated with temporal-sql-tool as
`skyshift up --ha` does). The control worker and the skylet manager run as processes configured by
SKYSHIFT_TEMPORAL_TLS_* alone (docs/production.md) and run a job to Succeeded; a client without a
certificate is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from temporalio.client import Client

from skyshift.devstack.ha_temporal import ensure_namespace
from skyshift.devstack.postgres import setup_schema
from skyshift.devstack.temporal_config import PORT_COUNT, server_argv, sqlite_store, write_config
from skyshift.devstack.temporal_pki import Pki, make_pki
from skyshift.lifecycle.client import TLS_ENV, connect
from tests.fixtures.gobuild import built_binary
from tests.fixtures.ports import free_ports
from tests.fixtures.postgres import running_postgres
from tests.fixtures.procs import stop
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

NAMESPACE = "default"


# ---- the server ---------------------------------------------------------------------------


@dataclass
class TemporalServer:
    address: str
    pki: Pki
    proc: subprocess.Popen[bytes]
    log: Path


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def temporal_mtls(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TemporalServer]:
    """One server per store for the module's tests."""
    binary = Path(built_binary("build-temporal.sh", "temporal-server"))
    d = tmp_path_factory.mktemp(f"temporal-{request.param}")
    pki = make_pki(d / "pki")
    ports = free_ports(PORT_COUNT)
    with contextlib.ExitStack() as cleanup:
        if request.param == "postgresql":
            pg = cleanup.enter_context(running_postgres())
            stores = setup_schema(binary.parent, pg)
        else:
            stores = {
                "default": sqlite_store(d / "temporal.db"),
                "visibility": sqlite_store(d / "temporal.db"),
            }
        yield from _serve(binary, d, pki, ports, stores)


def _serve(
    binary: Path, d: Path, pki: Pki, ports: list[int], stores: dict[str, dict[str, Any]]
) -> Iterator[TemporalServer]:
    config = write_config(d, pki, ports, stores)
    log = d / "server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            server_argv(str(binary), config),
            cwd=d,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        yield TemporalServer(f"127.0.0.1:{ports[0]}", pki, proc, log)
    finally:
        stop(proc)


async def ready_client(server: TemporalServer, timeout: float = 180.0) -> Client:
    """A client over mTLS once the server answers, with the namespace and search attributes
    registered as `skyshift up --ha` registers them."""
    assert server.proc.poll() is None, server.log.read_text()[-3000:]
    env = server.pki.client_env()
    await asyncio.to_thread(ensure_namespace, server.address, env, timeout)
    return await connect(server.address, NAMESPACE)


@pytest_asyncio.fixture
async def mtls_stack(
    temporal_mtls: TemporalServer,
    store: Any,
    etcd_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[LifecycleStack]:
    for name, value in temporal_mtls.pki.client_env().items():
        monkeypatch.setenv(name, value)  # this process and the workers it starts
    client = await ready_client(temporal_mtls)
    stack = LifecycleStack(store, client, tmp_path, etcd_server.endpoint, temporal_mtls.address)
    try:
        yield stack
    finally:
        await stack.close()


async def run_job_to_succeeded(s: LifecycleStack, cluster: str, job: str, command: str) -> None:
    """The control worker and the skylet manager as processes, a local cluster Ready, and one
    job on it to Succeeded."""
    await s.start_process("control")
    await s.start_process("skylet_manager")
    await s.add_cluster(cluster)
    await s.cluster_phase(cluster, "Ready", timeout=120)
    await s.submit(job, command)
    await s.job_phase(job, "Succeeded", timeout=120)


async def test_a_job_runs_on_the_temporal_server_over_mtls(mtls_stack: LifecycleStack) -> None:
    s = mtls_stack
    await run_job_to_succeeded(s, "mtls-local", "mtls-job", "echo hello over mtls")
    [rdir] = s.replica_dirs("mtls-local")
    log = (s.state_dirs["mtls-local"] / "replicas" / rdir / "log").read_text()
    assert "hello over mtls" in log


async def test_a_client_without_a_certificate_is_refused(
    mtls_stack: LifecycleStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TLS_ENV["cert"])
    monkeypatch.delenv(TLS_ENV["key"])
    with pytest.raises(RuntimeError, match=r"(?i)connect"):
        await connect(mtls_stack.temporal, NAMESPACE)  # not lazy: the handshake happens here


async def test_the_api_server_reaches_temporal_over_mtls(
    mtls_stack: LifecycleStack, tmp_path: Path
) -> None:
    """The API's /readyz checks Temporal (its lifecycle hooks): ready means the handshake with
    the client certificate from SKYSHIFT_TEMPORAL_TLS_* worked."""
    port = free_ports(1)[0]
    env = {**mtls_stack.env(), "SKYSHIFT_API_HOST": "127.0.0.1", "SKYSHIFT_API_PORT": str(port)}
    log = tmp_path / "api.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "skyshift.api"],
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            body: dict[str, Any] = {}
            for _ in range(240):
                assert proc.poll() is None, log.read_text()[-3000:]
                with contextlib.suppress(httpx.TransportError):
                    resp = await http.get("/readyz")
                    body = resp.json()
                    if resp.status_code == 200:
                        break
                await asyncio.sleep(0.5)
        assert body.get("checks", {}).get("temporal") == "ok", body
    finally:
        proc.terminate()
        proc.wait(20)
