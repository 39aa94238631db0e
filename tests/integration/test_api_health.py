"""Probes and the server process: /healthz, /readyz (etcd or Temporal down is 503 naming the
part), the OpenAPI page, and ``python -m skyshift.api`` serving requests as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from skyshift.store import ObjectStore
from tests.fixtures.api import RecordingLifecycle, asgi_client, sample
from tests.fixtures.auth import admin_token
from tests.fixtures.etcd import free_port

# Until tests/conftest.py lists it: load the API fixtures for this module.
pytest_plugins = ["tests.fixtures.api"]
pytestmark = pytest.mark.integration


async def test_healthz_and_readyz(api_client: httpx.AsyncClient) -> None:
    r = await api_client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    r = await api_client.get("/readyz")
    assert r.status_code == 200, r.text
    assert set(r.json()["checks"]) == {"etcd", "temporal"}


async def test_readyz_names_etcd_when_down(make_api: Any) -> None:
    bogus = ObjectStore("127.0.0.1:1", prefix="/down", timeout=0.3)
    async with asgi_client(make_api(store_=bogus)) as c:
        assert (await c.get("/healthz")).status_code == 200  # alive, just not ready
        r = await c.get("/readyz")
        assert r.status_code == 503
        err = r.json()["error"]
        assert err["message"].startswith("not ready: etcd")
        assert [d["field"] for d in err["details"]] == ["etcd"]
    await bogus.close()


async def test_readyz_names_temporal_when_down(make_api: Any) -> None:
    async with asgi_client(make_api(lifecycle=RecordingLifecycle(healthy=False))) as c:
        r = await c.get("/readyz")
        assert r.status_code == 503
        assert [d["field"] for d in r.json()["error"]["details"]] == ["temporal"]
        # what a load balancer checks: every replica loses Temporal at once and still serves
        r = await c.get("/readyz", params={"exclude": "temporal"})
        assert r.status_code == 200
        assert "temporal" not in r.json()["checks"]
        r = await c.get("/readyz", params={"exclude": "etcd"})
        assert r.status_code == 422
        assert "exclude" in r.text


async def test_readyz_excluding_temporal_still_names_etcd(make_api: Any) -> None:
    bogus = ObjectStore("127.0.0.1:1", prefix="/down", timeout=0.3)
    async with asgi_client(make_api(store_=bogus)) as c:
        r = await c.get("/readyz", params={"exclude": "temporal"})
        assert r.status_code == 503
        assert [d["field"] for d in r.json()["error"]["details"]] == ["etcd"]
    await bogus.close()


async def test_openapi_page(api_client: httpx.AsyncClient) -> None:
    assert (await api_client.get("/docs")).status_code == 200
    spec = (await api_client.get("/openapi.json")).json()
    assert spec["info"]["title"] == "SkyShift API"
    paths = spec["paths"]
    for path in (
        "/clusters",
        "/clusters/{name}",
        "/{namespace}/jobs",
        "/{namespace}/jobs/{name}",
        "/jobs",
        "/{namespace}/jobs/{name}/logs",
        "/healthz",
        "/readyz",
    ):
        assert path in paths, path
    assert set(paths["/{namespace}/jobs/{name}"]) == {"get", "put", "patch", "delete"}


def test_python_m_skyshift_api(etcd_server: Any, tmp_path: Path) -> None:
    port = free_port()
    env = dict(
        os.environ,
        SKYSHIFT_ETCD=etcd_server.endpoint,
        SKYSHIFT_STORE_PREFIX=f"/proc-{port}",
        SKYSHIFT_API_PORT=str(port),
        SKYSHIFT_HOME=str(tmp_path),
        SKYSHIFT_LIFECYCLE="off",
    )
    log = (tmp_path / "api.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "skyshift.api"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (tmp_path / "api.log").read_text()
            assert time.monotonic() < deadline, "API server not ready"
            time.sleep(0.1)
        r = httpx.post(f"{url}/default/jobs", json=sample("jobs", "proc"))
        assert r.status_code == 401, r.text  # secure by default: no token, no access
        auth = {"Authorization": f"Bearer {admin_token(url, tmp_path)}"}
        r = httpx.post(f"{url}/default/jobs", json=sample("jobs", "proc"), headers=auth)
        assert r.status_code == 201, r.text
        r = httpx.delete(f"{url}/default/jobs/proc", headers=auth)
        assert r.status_code == 200  # SKYSHIFT_LIFECYCLE=off: removed at once
        assert "temporal" not in httpx.get(f"{url}/readyz").json()["checks"]
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()
