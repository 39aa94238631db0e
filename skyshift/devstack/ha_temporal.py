"""The Temporal server of ``skyshift up --ha``: the binary scripts/build-temporal.sh builds, its
config (an mTLS frontend; its store the stack's PostgreSQL, :mod:`skyshift.devstack.postgres`, or
SQLite in ``$SKYSHIFT_HOME/temporal-server``) and the namespace ``default`` with SkyShift's search
attributes, registered once the frontend answers.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from skyshift.devstack import health, postgres
from skyshift.devstack.components import (
    LOOPBACK,
    SEARCH_ATTRIBUTES,
    Component,
    StackError,
    TemporalHealth,
)
from skyshift.devstack.temporal_config import (
    PORT_COUNT,
    server_argv,
    sqlite_store,
    write_config,
)
from skyshift.devstack.temporal_pki import Pki

BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build-temporal.sh"
BIN_ENV = "SKYSHIFT_TEMPORAL_SERVER_BIN"
UI_BIN_ENV = "SKYSHIFT_TEMPORAL_UI_BIN"
NAMESPACE = "default"
RETENTION_SECONDS = 7 * 86400


@dataclass(frozen=True)
class Binaries:
    server: str  # temporal-server
    ui: str  # temporal-ui-server


def _given(variable: str) -> str | None:
    path = os.environ.get(variable)
    if path and not os.access(path, os.X_OK):
        raise StackError(f"{variable}={path} is not an executable file")
    return path or None


def server_binaries(info: Callable[[str], None]) -> Binaries:
    """``$SKYSHIFT_TEMPORAL_SERVER_BIN`` and ``$SKYSHIFT_TEMPORAL_UI_BIN``, else the binaries
    scripts/build-temporal.sh has cached (building them first when it has not: about 13 minutes
    on two cores; its lines go to ``info``)."""
    server, ui = _given(BIN_ENV), _given(UI_BIN_ENV)
    if server and ui:
        return Binaries(server, ui)
    built = _build(info)
    return Binaries(server or _built(built, "temporal-server"),
                    ui or _built(built, "temporal-ui-server"))  # fmt: skip


def _build(info: Callable[[str], None]) -> Path:
    """Run scripts/build-temporal.sh; the bin directory it prints last."""
    if not BUILD_SCRIPT.is_file():
        raise StackError(
            f"the Temporal server and UI are needed for --ha: build them with "
            f"scripts/build-temporal.sh (in a SkyShift checkout) and set {BIN_ENV} to its "
            f"temporal-server and {UI_BIN_ENV} to its temporal-ui-server"
        )
    info("temporal-server, temporal-ui-server: scripts/build-temporal.sh (builds them once if "
         "not cached)")  # fmt: skip
    proc = subprocess.Popen([str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:
        info(f"  {line.rstrip()}")
    out = proc.stdout.read()
    if proc.wait() != 0 or not out.strip():
        raise StackError(f"scripts/build-temporal.sh failed (exit {proc.returncode}); run it by "
                         f"hand to see why, or set {BIN_ENV} and {UI_BIN_ENV}")  # fmt: skip
    return Path(out.strip().splitlines()[-1])


def _built(bin_dir: Path, name: str) -> str:
    binary = bin_dir / name
    if not os.access(binary, os.X_OK):
        raise StackError(f"scripts/build-temporal.sh did not produce {binary}")
    return str(binary)


def server_ports(first: int) -> list[int]:
    """The server's ports from its frontend's on: gRPC x4, membership x4, HTTP."""
    return list(range(first, first + PORT_COUNT))


async def _register(address: str, tls_env: dict[str, str]) -> None:
    from google.protobuf.duration_pb2 import Duration
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
    from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest

    from skyshift.lifecycle.client import connect

    client = await connect(address, NAMESPACE, environ=tls_env)
    calls = (
        lambda: client.workflow_service.register_namespace(RegisterNamespaceRequest(
            namespace=NAMESPACE,
            workflow_execution_retention_period=Duration(seconds=RETENTION_SECONDS))),
        lambda: client.operator_service.add_search_attributes(AddSearchAttributesRequest(
            namespace=NAMESPACE,
            search_attributes={name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
                               for name in SEARCH_ATTRIBUTES})),
    )  # fmt: skip
    for call in calls:
        try:
            await call()
        except Exception as exc:
            if "already" not in str(exc).lower():
                raise


def ensure_namespace(address: str, tls_env: dict[str, str], timeout: float = 120.0) -> str:
    """Register ``default`` and the search attributes (idempotent) and wait until the frontend
    lists them; a line for the user."""
    wanted = TemporalHealth(address, NAMESPACE, tls_env=tuple(sorted(tls_env.items())))
    deadline = time.monotonic() + timeout
    detail = ""
    registered = False
    while time.monotonic() < deadline:
        if health.check_temporal(wanted).ok:
            return (
                f"temporal: registered namespace {NAMESPACE} and SkyShift's search attributes"
                if registered
                else ""
            )
        try:
            asyncio.run(asyncio.wait_for(_register(address, tls_env), 30))
            registered = True
        except Exception as exc:  # the server may still be starting its services
            detail = (str(exc) or type(exc).__name__).splitlines()[0][:200]
        time.sleep(1.0)
    raise StackError(f"temporal: could not register namespace {NAMESPACE}: {detail}")


def sqlite_file(home: Path) -> Path:
    """The server's SQLite database (``--temporal-db sqlite``)."""
    return home / "temporal-server" / "temporal.db"


def temporal_component(home: Path, first_port: int, pki: Pki, binary: str | None,
                       postgres_port: int = 0) -> Component:  # fmt: skip
    """The server on ``first_port`` (its frontend) and the eight ports after it, its store the
    PostgreSQL on ``postgres_port`` (0: SQLite in a file); ``binary`` None when not resolving
    (``status``, ``down``), else its config is written for ``up``."""
    d = home / "temporal-server"
    ports = server_ports(first_port)
    # one file per store: `up` with the other store refuses to reuse a running server
    config = d / ("config-postgres.yaml" if postgres_port else "config.yaml")
    if binary is not None:
        if postgres_port:
            server = postgres.Server(postgres_port, postgres.password(home))
            stores = postgres.temporal_stores(server)
        else:
            store = sqlite_store(sqlite_file(home))
            stores = {"default": store, "visibility": store}
        config = write_config(d, pki, ports, stores, config.name)
    address = f"{LOOPBACK}:{first_port}"
    tls_env = pki.client_env()
    listens = {"Temporal gRPC": first_port}
    listens.update({f"Temporal internal {i}": p for i, p in enumerate(ports[1:], 1)})
    return Component(
        name="temporal",
        title="Temporal server (mTLS frontend)",
        argv=server_argv(binary or "temporal-server", config),
        env={},
        # the system namespace answers before `default` exists; on_healthy makes that one
        health=TemporalHealth(address, "temporal-system", (), tuple(sorted(tls_env.items()))),
        address=f"{address} (mTLS)",
        listens=listens,
        timeout=180.0,
        data_dirs=[d, pki.ca.parent],  # --purge removes the certificates too
        home=home,
        on_healthy=lambda: ensure_namespace(address, tls_env),
    )
