"""References to clusters: a Link or Endpoints naming a missing cluster is refused (400 naming
the field, store unchanged) on every write route; a FilterPolicy is accepted with a Warning."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from skyshift.store import ObjectStore
from tests.fixtures.api import sample

pytestmark = pytest.mark.integration

KINDS = ("clusters", "links", "endpoints", "filterpolicies")
MERGE = {"Content-Type": "application/merge-patch+json"}


async def snapshot(store: ObjectStore) -> dict[str, Any]:
    return {p: (await store.list(p)).items for p in KINDS}


async def refused(
    c: httpx.AsyncClient, store: ObjectStore, field: str, method: str, path: str, **kw: Any
) -> None:
    before = await snapshot(store)
    r = await c.request(method, path, **kw)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["field"] == field and "does not exist" in err["message"], err
    assert await snapshot(store) == before


def link(name: str, source: str, target: str) -> dict[str, Any]:
    return {"kind": "Link", "metadata": {"name": name},
            "spec": {"source_cluster": source, "target_cluster": target}}


def endpoints(name: str, primary: str, *clusters: str) -> dict[str, Any]:
    return {"kind": "Endpoints", "metadata": {"name": name},
            "spec": {"selector": {"app": "web"}, "primary_cluster": primary,
                     "endpoints": {c: {"num_endpoints": 1} for c in clusters}}}


async def test_links_and_endpoints_need_their_clusters(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client_nolc
    for name in ("c1", "c2"):
        assert (await c.post("/clusters", json=sample("clusters", name))).status_code == 201
    await refused(c, store, "spec.target_cluster", "POST", "/links", json=link("l", "c1", "zz"))
    await refused(c, store, "spec.source_cluster", "PUT", "/links", json=link("l", "yy", "c2"))
    assert (await c.post("/links", json=link("l", "c1", "c2"))).status_code == 201
    await refused(c, store, "spec.target_cluster", "PUT", "/links/l", json=link("l", "c1", "zz"))
    await refused(c, store, "spec.source_cluster", "PATCH", "/links/l",
                  json={"spec": {"source_cluster": "yy"}}, headers=MERGE)
    await refused(c, store, "spec.target_cluster", "PATCH", "/links/l",
                  json=[{"op": "replace", "path": "/spec/target_cluster", "value": "zz"}],
                  headers={"Content-Type": "application/json-patch+json"})

    ns = "/default/endpoints"
    await refused(c, store, "spec.primary_cluster", "POST", ns, json=endpoints("e", "zz"))
    await refused(c, store, "spec.endpoints.zz", "POST", ns, json=endpoints("e", "c1", "c1", "zz"))
    await refused(c, store, "spec.endpoints.zz", "PUT", ns, json=endpoints("e", "", "zz"))
    assert (await c.post(ns, json=endpoints("e", "c1", "c1", "c2"))).status_code == 201
    assert (await c.post(ns, json=endpoints("auto", ""))).status_code == 201  # "": no cluster
    await refused(c, store, "spec.primary_cluster", "PATCH", f"{ns}/e",
                  json={"spec": {"primary_cluster": "zz"}}, headers=MERGE)

    # a cluster that goes away does not freeze what names it: other changes still apply
    assert (await c.delete("/clusters/c2")).status_code == 200
    r = await c.patch("/links/l", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    assert r.status_code == 200, r.text
    r = await c.patch(f"{ns}/e", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    assert r.status_code == 200, r.text


async def test_filter_policies_naming_missing_clusters_are_accepted_with_a_warning(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client_nolc
    assert (await c.post("/clusters", json=sample("clusters", "real"))).status_code == 201
    body = {"kind": "FilterPolicy", "metadata": {"name": "fp"},
            "spec": {"clusterFilter": {"include": ["real", "future"], "exclude": ['ev"il\n']}}}
    r = await c.post("/default/filterpolicies", json=body)
    assert r.status_code == 201, r.text
    warnings = r.headers.get_list("warning")
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith('299 - "spec.clusterFilter.include[1]: cluster \'future\'')
    assert "exclude[0]" in warnings[1] and "\n" not in warnings[1]
    assert await store.get("filterpolicies", "fp", "default")
    r = await c.patch("/default/filterpolicies/fp",
                      json={"spec": {"clusterFilter": {"include": ["real"], "exclude": []}}},
                      headers=MERGE)
    assert r.status_code == 200 and "warning" not in r.headers
    r = await c.put("/default/filterpolicies/fp", json={**body, "spec": {
        "clusterFilter": {"include": [f"n{i}" for i in range(30)]}}})
    assert r.status_code == 200
    assert len(r.headers.get_list("warning")) == 11  # ten, then "and 20 more"
