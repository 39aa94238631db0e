"""SkyShift on the real Temporal server (not the dev server): built from go.temporal.io/server
(scripts/build-temporal.sh), its frontend serving mTLS that requires a client certificate, its
store SQLite in a file. The control worker and the skylet manager run as processes configured by
SKYSHIFT_TEMPORAL_TLS_* alone (docs/production.md) and run a job to Succeeded; a client without a
certificate is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client

from skyshift.lifecycle.client import TLS_ENV, connect
from tests.fixtures.gobuild import built_binary
from tests.fixtures.ports import free_ports
from tests.fixtures.postgres import Postgres, running_postgres
from tests.fixtures.procs import stop
from tests.fixtures.temporal import LifecycleStack, register_search_attributes

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

NAMESPACE = "default"
SERVICES = ("frontend", "history", "matching", "worker")


# ---- certificates -------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _issue(
    name: str, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None, server: bool
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer if issuer else (subject, key)
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] * server)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server:
        import ipaddress

        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def _write(
    cert: x509.Certificate, key: ec.EllipticCurvePrivateKey, cert_path: Path, key_path: Path
) -> None:
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)


def make_pki(d: Path) -> Pki:
    """A CA, the frontend's certificate (also its client certificate inside the server) and a
    client certificate for SkyShift."""
    d.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _issue("skyshift-test-ca", None, server=False)
    pki = Pki(
        d / "ca.pem", d / "server.pem", d / "server-key.pem", d / "client.pem", d / "client-key.pem"
    )
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write(*_issue("localhost", (ca.subject, ca_key), server=True), pki.server_cert, pki.server_key)
    _write(*_issue("skyshift", (ca.subject, ca_key), server=False), pki.client_cert, pki.client_key)
    return pki


# ---- the server ---------------------------------------------------------------------------


def _sqlite(path: Path) -> dict[str, Any]:
    return {
        "sql": {
            "pluginName": "sqlite",
            "databaseName": str(path),
            "connectAddr": "localhost",
            "connectProtocol": "tcp",
            "maxConns": 1,
            "maxIdleConns": 1,
            "maxConnLifetime": "1h",
            "connectAttributes": {
                "cache": "private",
                "setup": True,
                "journal_mode": "wal",
                "synchronous": 1,
            },
        }
    }


def server_config(
    d: Path, pki: Pki, ports: list[int], stores: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Temporal's development-*.yaml with free ports, the given default and visibility stores
    and an mTLS frontend that requires client certificates signed by the test CA."""
    grpc = dict(zip(SERVICES, ports[:4], strict=True))
    frontend = f"localhost:{grpc['frontend']}"
    tls_server = {
        "certFile": str(pki.server_cert),
        "keyFile": str(pki.server_key),
        "requireClientAuth": True,
        "clientCaFiles": [str(pki.ca)],
    }
    client = {"serverName": "localhost", "rootCaFiles": [str(pki.ca)]}
    services = {
        name: {
            "rpc": {"grpcPort": grpc[name], "membershipPort": ports[4 + i], "bindOnLocalHost": True}
        }
        for i, name in enumerate(SERVICES)
    }
    services["frontend"]["rpc"]["httpPort"] = ports[8]
    (d / "dynamicconfig.yaml").write_text(
        yaml.safe_dump(
            {
                "system.forceSearchAttributesCacheRefreshOnRead": [{"value": True}],
            }
        )
    )
    return {
        "log": {"stdout": True, "level": "warn"},
        "persistence": {
            "defaultStore": "default",
            "visibilityStore": "visibility",
            "numHistoryShards": 1,
            "datastores": stores,
        },
        "global": {
            "membership": {"maxJoinDuration": "30s", "broadcastAddress": "127.0.0.1"},
            # the server's own clients of the frontend (its system workers, the operator
            # service's namespace look-ups) present the server's certificate
            "tls": {
                "frontend": {"server": tls_server, "client": client},
                "systemWorker": {
                    "certFile": str(pki.server_cert),
                    "keyFile": str(pki.server_key),
                    "client": client,
                },
            },
        },
        "services": services,
        "clusterMetadata": {
            "enableGlobalNamespace": False,
            "failoverVersionIncrement": 10,
            "masterClusterName": "active",
            "currentClusterName": "active",
            "clusterInformation": {
                "active": {
                    "enabled": True,
                    "initialFailoverVersion": 1,
                    "rpcName": "frontend",
                    "rpcAddress": frontend,
                    "httpAddress": f"localhost:{ports[8]}",
                }
            },
        },
        "dcRedirectionPolicy": {"policy": "noop"},
        "dynamicConfigClient": {"filepath": str(d / "dynamicconfig.yaml"), "pollInterval": "10s"},
    }


@dataclass
class TemporalServer:
    address: str
    pki: Pki
    proc: subprocess.Popen[bytes]
    log: Path


def _postgres(pg: Postgres, database: str) -> dict[str, Any]:
    return {
        "sql": {
            "pluginName": "postgres12",
            "databaseName": database,
            "connectAddr": f"{pg.host}:{pg.port}",
            "connectProtocol": "tcp",
            "user": pg.user,
            "password": "",
            "maxConns": 10,
            "maxIdleConns": 10,
            "maxConnLifetime": "1h",
        }
    }


def setup_postgres_schema(bin_dir: Path, pg: Postgres) -> dict[str, dict[str, Any]]:
    """Create Temporal's two databases and migrate them with temporal-sql-tool, as an operator
    does; returns the datastores of the server's config."""
    schema = bin_dir.parent / "schema" / "postgresql" / "v12"
    for database, kind in (("temporal", "temporal"), ("temporal_visibility", "visibility")):
        tool = [
            str(bin_dir / "temporal-sql-tool"),
            "--plugin",
            "postgres12",
            "--ep",
            pg.host,
            "-p",
            str(pg.port),
            "-u",
            pg.user,
            "--db",
            database,
        ]
        for step in (
            ["create-database"],
            ["setup-schema", "-v", "0.0"],
            ["update-schema", "-d", str(schema / kind / "versioned")],
        ):
            done = subprocess.run([*tool, *step], capture_output=True, text=True, check=False)
            assert done.returncode == 0, f"temporal-sql-tool {step[0]}: {done.stderr[-2000:]}"
    return {
        "default": _postgres(pg, "temporal"),
        "visibility": _postgres(pg, "temporal_visibility"),
    }


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def temporal_mtls(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TemporalServer]:
    """One server per store for the module's tests."""
    binary = Path(built_binary("build-temporal.sh", "temporal-server"))
    d = tmp_path_factory.mktemp(f"temporal-{request.param}")
    pki = make_pki(d / "pki")
    ports = free_ports(9)
    with contextlib.ExitStack() as cleanup:
        if request.param == "postgresql":
            pg = cleanup.enter_context(running_postgres())
            stores = setup_postgres_schema(binary.parent, pg)
        else:
            stores = {
                "default": _sqlite(d / "temporal.db"),
                "visibility": _sqlite(d / "temporal.db"),
            }
        yield from _serve(binary, d, pki, ports, stores)


def _serve(
    binary: Path, d: Path, pki: Pki, ports: list[int], stores: dict[str, dict[str, Any]]
) -> Iterator[TemporalServer]:
    config = d / "config.yaml"
    config.write_text(yaml.safe_dump(server_config(d, pki, ports, stores)))
    log = d / "server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(binary), "--config-file", str(config), "--allow-no-auth", "start"],
            cwd=d,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        yield TemporalServer(f"127.0.0.1:{ports[0]}", pki, proc, log)
    finally:
        stop(proc)


def client_env(server: TemporalServer) -> dict[str, str]:
    return {
        TLS_ENV["cert"]: str(server.pki.client_cert),
        TLS_ENV["key"]: str(server.pki.client_key),
        TLS_ENV["ca"]: str(server.pki.ca),
        TLS_ENV["server_name"]: "localhost",
    }


async def _unless_registered(call: Awaitable[Any]) -> None:
    """Run a registration; one made by an earlier attempt (or an earlier test) is fine."""
    try:
        await call
    except Exception as exc:
        if "already" not in str(exc).lower():
            raise


async def _register(client: Client) -> None:
    retention = Duration(seconds=86400)
    await _unless_registered(
        client.workflow_service.register_namespace(
            RegisterNamespaceRequest(
                namespace=NAMESPACE, workflow_execution_retention_period=retention
            )
        )
    )
    await _unless_registered(register_search_attributes(client))


async def ready_client(server: TemporalServer, timeout: float = 180.0) -> Client:
    """A client over mTLS once the server answers, with the namespace and search attributes."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        assert server.proc.poll() is None, server.log.read_text()[-3000:]
        try:
            client = await connect(server.address, NAMESPACE)
            await _register(client)
            return client
        except Exception:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(1)


@pytest_asyncio.fixture
async def mtls_stack(
    temporal_mtls: TemporalServer,
    store: Any,
    etcd_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[LifecycleStack]:
    for name, value in client_env(temporal_mtls).items():
        monkeypatch.setenv(name, value)  # this process and the workers it starts
    client = await ready_client(temporal_mtls)
    stack = LifecycleStack(store, client, tmp_path, etcd_server.endpoint, temporal_mtls.address)
    try:
        yield stack
    finally:
        await stack.close()


async def test_a_job_runs_on_the_temporal_server_over_mtls(mtls_stack: LifecycleStack) -> None:
    s = mtls_stack
    await s.start_process("control")
    await s.start_process("skylet_manager")
    await s.add_cluster("mtls-local")
    await s.cluster_phase("mtls-local", "Ready", timeout=120)
    await s.submit("mtls-job", "echo hello over mtls")
    await s.job_phase("mtls-job", "Succeeded", timeout=120)
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
