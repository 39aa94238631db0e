"""The Temporal server's configuration: Temporal's ``development-*.yaml`` with given ports, stores
and a frontend serving mTLS that requires client certificates signed by the stack's CA.

One process runs all four services (frontend, history, matching, worker), each with a gRPC and a
membership port on loopback; their traffic between each other is plaintext. Used by
``skyshift up --ha`` and tests/integration/test_temporal_server.py, on PostgreSQL
(:mod:`skyshift.devstack.postgres`) or SQLite in a file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from skyshift.devstack.temporal_pki import SERVER_NAME, Pki

SERVICES = ("frontend", "history", "matching", "worker")
#: ports a server takes: a gRPC port per service, a membership port per service, the HTTP API
PORT_COUNT = 2 * len(SERVICES) + 1


def sqlite_store(path: Path) -> dict[str, Any]:
    """A datastore in the SQLite file ``path`` (WAL, created on the first start)."""
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


def _tls(pki: Pki) -> dict[str, Any]:
    tls_server = {
        "certFile": str(pki.server_cert),
        "keyFile": str(pki.server_key),
        "requireClientAuth": True,
        "clientCaFiles": [str(pki.ca)],
    }
    client = {"serverName": SERVER_NAME, "rootCaFiles": [str(pki.ca)]}
    # the server's own clients of the frontend (its system workers, the operator service's
    # namespace look-ups) present the server's certificate
    return {
        "frontend": {"server": tls_server, "client": client},
        "systemWorker": {
            "certFile": str(pki.server_cert),
            "keyFile": str(pki.server_key),
            "client": client,
        },
    }


def _cluster(frontend: str, http: int) -> dict[str, Any]:
    return {
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
                "httpAddress": f"localhost:{http}",
            }
        },
    }


def server_config(
    d: Path, pki: Pki, ports: list[int], stores: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The config for ``ports`` (PORT_COUNT of them: the four services' gRPC ports, frontend
    first, their membership ports, the frontend's HTTP port) and the datastores ``default`` and
    ``visibility`` of ``stores``; writes its dynamic config to ``d/dynamicconfig.yaml``."""
    grpc = dict(zip(SERVICES, ports[:4], strict=True))
    services = {
        name: {
            "rpc": {"grpcPort": grpc[name], "membershipPort": ports[4 + i], "bindOnLocalHost": True}
        }
        for i, name in enumerate(SERVICES)
    }
    services["frontend"]["rpc"]["httpPort"] = ports[8]
    dynamic = {"system.forceSearchAttributesCacheRefreshOnRead": [{"value": True}]}
    (d / "dynamicconfig.yaml").write_text(yaml.safe_dump(dynamic))
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
            "tls": _tls(pki),
        },
        "services": services,
        "clusterMetadata": _cluster(f"localhost:{grpc['frontend']}", ports[8]),
        "dcRedirectionPolicy": {"policy": "noop"},
        "dynamicConfigClient": {"filepath": str(d / "dynamicconfig.yaml"), "pollInterval": "10s"},
    }


def write_config(d: Path, pki: Pki, ports: list[int], stores: dict[str, dict[str, Any]],
                 name: str = "config.yaml") -> Path:  # fmt: skip
    """``d/name`` for :func:`server_config`, 0600 (a store's password is in it); the server
    starts with ``temporal-server --config-file <it> --allow-no-auth start``."""
    d.mkdir(parents=True, exist_ok=True)
    config = d / name
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(yaml.safe_dump(server_config(d, pki, ports, stores)))
    return config


def server_argv(binary: str, config: Path) -> list[str]:
    return [binary, "--config-file", str(config), "--allow-no-auth", "start"]
