"""The Temporal Web UI of ``skyshift up --ha``: Temporal's standalone UI server
(``github.com/temporalio/ui-server``, built by scripts/build-temporal.sh; the UI's pages are
embedded in the binary) on plain HTTP on loopback, talking to the mTLS frontend with a client
certificate of its own (``temporal-ui`` of the stack's PKI).

The server reads ``<root>/config/<env>.yaml``: ``$SKYSHIFT_HOME/temporal-ui/config/
development.yaml``, written by ``up``. Its browser API (``/api/v1/...``) is the frontend's HTTP
API proxied over that gRPC connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from skyshift.devstack.components import LOOPBACK, Component, HttpHealth, Ports
from skyshift.devstack.temporal_pki import SERVER_NAME, Pki

#: the common name of the UI server's client certificate (``Pki.leaf``)
UI_CLIENT = "temporal-ui"
ENVIRONMENT = "development"


def ui_config(frontend: str, port: int, pki: Pki, namespace: str = "default") -> dict[str, Any]:
    """The UI server's config: the frontend at ``frontend`` over mTLS (its certificate checked
    against the CA for ``localhost``), the UI on ``127.0.0.1:port``."""
    cert, key = pki.leaf(UI_CLIENT)
    return {
        "temporalGrpcAddress": frontend,
        "host": LOOPBACK,
        "port": port,
        "enableUi": True,
        "defaultNamespace": namespace,
        "disableNewsFetch": True,  # no calls out to temporal.io
        "notifyOnNewVersion": False,
        "tls": {
            "caFile": str(pki.ca),
            "certFile": str(cert),
            "keyFile": str(key),
            "serverName": SERVER_NAME,
            "enableHostVerification": True,
        },
        # plain HTTP: a Secure CSRF cookie would not come back from the browser
        "cors": {"cookieInsecure": True, "allowOrigins": [f"http://{LOOPBACK}:{port}"]},
    }


def ui_component(home: Path, ports: Ports, pki: Pki, binary: str | None) -> Component:
    """The UI server on ``ports.ui``; ``binary`` None when not resolving (``status``,
    ``down``), else its config is written for ``up``."""
    d = home / "temporal-ui"
    if binary is not None:
        (d / "config").mkdir(parents=True, exist_ok=True)
        config = ui_config(f"{LOOPBACK}:{ports.temporal}", ports.ui, pki)
        (d / "config" / f"{ENVIRONMENT}.yaml").write_text(yaml.safe_dump(config))
    url = f"http://{LOOPBACK}:{ports.ui}"
    argv = [binary or "temporal-ui-server", "--root", str(d), "--config", "config",
            "--env", ENVIRONMENT, "start"]  # fmt: skip
    # healthy once its page answers (the frontend is reached on the first API call)
    health = HttpHealth(f"{url}/")
    return Component("temporal-ui", "Temporal UI server", argv, {}, health, url,
                     {"Temporal UI": ports.ui}, home, data_dirs=[d])  # fmt: skip
