"""``python -m skyshift.api``: serve the API with uvicorn, configured from the environment.

Host and port come from ``SKYSHIFT_API_HOST`` / ``SKYSHIFT_API_PORT``, etcd from
``SKYSHIFT_ETCD``. Lifecycle hooks go to Temporal at ``SKYSHIFT_TEMPORAL_ADDRESS`` (connected
lazily, so the server starts before Temporal does); ``SKYSHIFT_LIFECYCLE=off`` disables them
(objects are stored and deleted without workflows, as benchmarks want). Stateless: run as many
replicas against one etcd as needed.
"""

from __future__ import annotations

import logging
import os

import uvicorn

from skyshift.api.app import create_app
from skyshift.config import Settings


def lifecycle_enabled() -> bool:
    return os.environ.get("SKYSHIFT_LIFECYCLE", "on").strip().lower() not in (
        "off",
        "0",
        "false",
        "no",
        "disabled",
    )


def main() -> None:
    logging.basicConfig(
        level=os.environ.get("SKYSHIFT_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = Settings.from_env()
    app = create_app(settings, temporal=lifecycle_enabled())
    uvicorn.run(
        app,
        host=settings.api_host,
        port=settings.api_port,
        log_level=os.environ.get("SKYSHIFT_LOG_LEVEL", "info").lower(),
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":
    main()
