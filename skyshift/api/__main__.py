"""``python -m skyshift.api``: serve the API with uvicorn, configured from the environment.

Host and port come from ``SKYSHIFT_API_HOST`` / ``SKYSHIFT_API_PORT``, etcd from
``SKYSHIFT_ETCD``. Lifecycle hooks go to Temporal at ``SKYSHIFT_TEMPORAL_ADDRESS`` (connected
lazily, so the server starts before Temporal does); ``SKYSHIFT_LIFECYCLE=off`` disables them
(objects are stored and deleted without workflows, as benchmarks want). Stateless: run as many
replicas against one etcd as needed.

Authentication is always on (see :mod:`skyshift.api.auth`). TLS: set both
``SKYSHIFT_API_TLS_CERT`` and ``SKYSHIFT_API_TLS_KEY`` (PEM files) to serve HTTPS only.
uvicorn's own ``X-Forwarded-For`` handling (which trusts 127.0.0.1 by default) is off: the app
believes the header only from ``SKYSHIFT_TRUSTED_PROXIES`` (see :mod:`skyshift.api.clientaddr`).
With ``SKYSHIFT_METRICS_ADDRESS`` (``host:port``) request metrics are served for Prometheus on
that separate listener (see :mod:`skyshift.api.metrics`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import uvicorn

from skyshift.api.app import create_app
from skyshift.config import Settings
from skyshift.workers.metrics_http import MetricsServer, metrics_address


def lifecycle_enabled() -> bool:
    return os.environ.get("SKYSHIFT_LIFECYCLE", "on").strip().lower() not in (
        "off",
        "0",
        "false",
        "no",
        "disabled",
    )


def tls_files() -> tuple[str, str] | None:
    """``(cert, key)`` from the environment, None for plain HTTP; half a pair is an error."""
    cert = os.environ.get("SKYSHIFT_API_TLS_CERT", "").strip()
    key = os.environ.get("SKYSHIFT_API_TLS_KEY", "").strip()
    if not cert and not key:
        return None
    if not cert or not key:
        raise SystemExit("set both SKYSHIFT_API_TLS_CERT and SKYSHIFT_API_TLS_KEY, or neither")
    for path in (cert, key):
        if not os.path.isfile(path):
            raise SystemExit(f"TLS file {path} does not exist")
    return cert, key


def server_options(settings: Settings, tls: tuple[str, str] | None) -> dict[str, Any]:
    """Keyword arguments of ``uvicorn.run`` for this server."""
    return {
        "host": settings.api_host,
        "port": settings.api_port,
        "log_level": os.environ.get("SKYSHIFT_LOG_LEVEL", "info").lower(),
        "timeout_graceful_shutdown": 5,
        "ssl_certfile": tls[0] if tls else None,
        "ssl_keyfile": tls[1] if tls else None,
        # Client addresses come from ClientAddressMiddleware (SKYSHIFT_TRUSTED_PROXIES) only.
        "proxy_headers": False,
        "forwarded_allow_ips": "",
    }


def main() -> None:
    logging.basicConfig(
        level=os.environ.get("SKYSHIFT_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = Settings.from_env()
    tls = tls_files()
    app = create_app(settings, temporal=lifecycle_enabled())
    address = metrics_address()  # Prometheus on its own listener: scraped without a token
    metrics = MetricsServer(address).start() if address else None
    try:
        uvicorn.run(app, **server_options(settings, tls))
    finally:
        if metrics is not None:
            metrics.stop()


if __name__ == "__main__":
    main()
