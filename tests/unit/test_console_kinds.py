"""GET /console/kinds: the console reads the kinds with a lifecycle from the one table of them
(skyshift/contract/lifecycles.py), so its workflow ids, the end of a job's log follow and the
names in its messages are the table's."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from skyshift.console.routes import config_router
from skyshift.contract.lifecycles import LIFECYCLES


async def test_the_console_gets_every_lifecycle_kind_from_the_table() -> None:
    app = FastAPI()
    app.include_router(config_router)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
        r = await client.get("/console/kinds")
    assert r.status_code == 200
    assert "script-src 'self'" in r.headers["content-security-policy"]
    kinds = {k["kind"]: k for k in r.json()["kinds"]}
    assert list(kinds) == [lc.kind for lc in LIFECYCLES]
    assert kinds["Job"] == {
        "kind": "Job",
        "plural": "jobs",
        "namespaced": True,
        "workflowIdPrefix": "job",
        "firstPhase": "Pending",
        "ended": ["Succeeded", "Failed"],
    }
    assert kinds["Cluster"]["namespaced"] is False and kinds["Cluster"]["plural"] == "clusters"
    assert kinds["Pipeline"]["ended"] == ["Succeeded", "Failed", "Cancelled"]
    assert kinds["Schedule"]["firstPhase"] is None
