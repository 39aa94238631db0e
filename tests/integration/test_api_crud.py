"""API CRUD against a real etcd: every kind, JSON and YAML bodies, and every refusal.

Each failing request is checked to leave the store exactly as it was (all objects, all
resourceVersions), because "a failed request never changes the store" is the API's contract.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import yaml

from skyshift.api import ApiOptions
from skyshift.models.registry import API_KINDS
from skyshift.store import ObjectStore
from tests.fixtures.api import add_sample_clusters, asgi_client, sample

# Until tests/conftest.py lists it: load the API fixtures for this module.
pytest_plugins = ["tests.fixtures.api"]
pytestmark = pytest.mark.integration

KINDS = [k.plural for k in API_KINDS]
NAMESPACED = {k.plural for k in API_KINDS if k.namespaced}


def coll(plural: str, ns: str = "default") -> str:
    return f"/{ns}/{plural}" if plural in NAMESPACED else f"/{plural}"


def item(plural: str, name: str, ns: str = "default") -> str:
    return f"{coll(plural, ns)}/{name}"


async def snapshot(store: ObjectStore) -> dict[str, list[dict[str, Any]]]:
    return {p: (await store.list(p)).items for p in KINDS}


def error(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    assert err["code"] == resp.status_code
    assert "Traceback" not in resp.text
    return err


async def test_default_namespace_exists(api_client_nolc: httpx.AsyncClient) -> None:
    r = await api_client_nolc.get("/namespaces/default")
    assert r.status_code == 200
    assert r.json()["status"]["phase"] == "Active"


@pytest.mark.parametrize("plural", KINDS)
async def test_crud_every_kind(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore, plural: str
) -> None:
    c = api_client_nolc
    await add_sample_clusters(store)  # the clusters a Link or Endpoints sample names
    r = await c.post(coll(plural), json=sample(plural, "obj-a", app="x"))
    assert r.status_code == 201, r.text
    created = r.json()
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert meta["resourceVersion"].isdigit()
    assert (meta["namespace"] == "default") == (plural in NAMESPACED)
    assert created == await store.get(plural, "obj-a", meta["namespace"])

    r = await c.get(item(plural, "obj-a"))
    assert r.status_code == 200 and r.json() == created

    r = await c.get(coll(plural))
    assert r.status_code == 200
    listed = r.json()
    assert listed["kind"] == f"{created['kind']}List"
    assert "obj-a" in [o["metadata"]["name"] for o in listed["items"]]
    assert int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])

    # Replace with the current resourceVersion: labels change, server-owned fields stay.
    body = dict(created, metadata={**meta, "labels": {"app": "y"}})
    r = await c.put(item(plural, "obj-a"), json=body)
    assert r.status_code == 200, r.text
    replaced = r.json()["metadata"]
    assert replaced["labels"] == {"app": "y"}
    assert replaced["uid"] == meta["uid"] and replaced["generation"] == 1
    assert int(replaced["resourceVersion"]) > int(meta["resourceVersion"])

    r = await c.patch(
        item(plural, "obj-a"),
        content=json.dumps({"metadata": {"annotations": {"note": "hi"}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["annotations"] == {"note": "hi"}

    r = await c.delete(item(plural, "obj-a"))
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["name"] == "obj-a"
    r = await c.get(item(plural, "obj-a"))
    assert r.status_code == 404
    assert "not found" in error(r)["message"]


async def test_yaml_body(api_client_nolc: httpx.AsyncClient) -> None:
    manifest = yaml.safe_dump(sample("jobs", "from-yaml"))
    for i, ctype in enumerate(("application/yaml", "text/yaml", "text/plain", "")):
        name = f"y-{i}"
        text = manifest.replace("from-yaml", name)
        r = await api_client_nolc.post(
            "/default/jobs", content=text, headers={"Content-Type": ctype}
        )
        assert r.status_code == 201, (ctype, r.text)
        assert r.json()["spec"]["resources"]["cpus"] == 0.5


async def test_apply_creates_then_replaces(api_client_nolc: httpx.AsyncClient) -> None:
    r = await api_client_nolc.put("/default/jobs", json=sample("jobs", "applied"))
    assert r.status_code == 201, r.text
    body = sample("jobs", "applied")
    body["spec"]["replicas"] = 5
    r = await api_client_nolc.put("/default/jobs", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["replicas"] == 5
    assert r.json()["metadata"]["generation"] == 2


async def test_server_owns_status_uid_and_generation(api_client_nolc: httpx.AsyncClient) -> None:
    c = api_client_nolc
    body = sample("jobs", "owned")
    body["status"] = {"phase": "Succeeded"}
    body["metadata"]["uid"] = "mine"
    r = await c.post("/default/jobs", json=body)
    assert r.status_code == 201
    job = r.json()
    assert job["status"]["phase"] == "Pending" and job["metadata"]["uid"] != "mine"

    # Labels only: generation stays; spec change: generation + 1; status in the body ignored.
    job["metadata"]["labels"] = {"a": "b"}
    job["status"] = {"phase": "Failed"}
    r = await c.put("/default/jobs/owned", json=job)
    assert r.status_code == 200
    assert r.json()["metadata"]["generation"] == 1
    assert r.json()["status"]["phase"] == "Pending"
    job = r.json()
    job["spec"]["replicas"] = 7
    r = await c.put("/default/jobs/owned", json=job)
    assert r.json()["metadata"]["generation"] == 2


async def test_stale_resource_version_conflicts(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client_nolc
    first = (await c.post("/default/jobs", json=sample("jobs", "cas"))).json()
    second = dict(first, spec={**first["spec"], "replicas": 3})
    current = (await c.put("/default/jobs/cas", json=second)).json()
    before = await snapshot(store)

    stale = dict(first, spec={**first["spec"], "replicas": 9})
    r = await c.put("/default/jobs/cas", json=stale)
    assert r.status_code == 409
    err = error(r)
    assert err["resourceVersion"] == current["metadata"]["resourceVersion"]

    patch = [
        {"op": "replace", "path": "/spec/replicas", "value": 9},
        {
            "op": "replace",
            "path": "/metadata/resourceVersion",
            "value": first["metadata"]["resourceVersion"],
        },
    ]
    r = await c.patch(
        "/default/jobs/cas", json=patch, headers={"Content-Type": "application/json-patch+json"}
    )
    assert r.status_code == 409
    assert error(r)["resourceVersion"] == current["metadata"]["resourceVersion"]

    r = await c.delete(
        "/default/jobs/cas", params={"resourceVersion": first["metadata"]["resourceVersion"]}
    )
    assert r.status_code == 409
    assert await snapshot(store) == before


async def _refused(
    c: httpx.AsyncClient, store: ObjectStore, method: str, url: str, status: int, **kw: Any
) -> dict[str, Any]:
    before = await snapshot(store)
    r = await c.request(method, url, **kw)
    assert r.status_code == status, r.text
    assert await snapshot(store) == before
    return error(r)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"replicas": -1}, "spec.replicas"),
        ({"resources": {"cpus": "abc"}}, "spec.resources.cpus"),
        ({"ports": [80, "x"]}, "spec.ports[1]"),
        ({"restartPolicy": "Sometimes"}, "spec.restartPolicy"),
        ({"unknownField": 1}, "spec.unknownField"),
    ],
)
async def test_invalid_fields_are_named(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore, spec: dict[str, Any], field: str
) -> None:
    body = {"kind": "Job", "metadata": {"name": "bad"}, "spec": spec}
    err = await _refused(api_client_nolc, store, "POST", "/default/jobs", 422, json=body)
    assert err["field"] == field, err
    assert err["reason"] == "Invalid"
    assert field in err["message"]


@pytest.mark.parametrize("name", ["Upper", "under_score", "-dash", "x" * 64, ""])
async def test_bad_names(api_client_nolc: httpx.AsyncClient, store: ObjectStore, name: str) -> None:
    body = {"kind": "Job", "metadata": {"name": name}}
    err = await _refused(api_client_nolc, store, "POST", "/default/jobs", 422, json=body)
    assert err["field"] == "metadata.name"


async def test_malformed_bodies(api_client_nolc: httpx.AsyncClient, store: ObjectStore) -> None:
    c = api_client_nolc
    err = await _refused(
        c,
        store,
        "POST",
        "/default/jobs",
        400,
        content="kind: Job\nmetadata: [unclosed",
        headers={"Content-Type": "application/yaml"},
    )
    assert "YAML" in err["message"]
    err = await _refused(
        c,
        store,
        "POST",
        "/default/jobs",
        400,
        content="{bad json",
        headers={"Content-Type": "application/json"},
    )
    assert "JSON" in err["message"]
    err = await _refused(
        c,
        store,
        "POST",
        "/default/jobs",
        415,
        content="<job/>",
        headers={"Content-Type": "application/xml"},
    )
    await _refused(
        c,
        store,
        "POST",
        "/default/jobs",
        400,
        content="- a\n- b\n",
        headers={"Content-Type": "application/yaml"},
    )


async def test_url_and_body_must_agree(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client_nolc
    body = sample("jobs", "j")
    body["metadata"]["namespace"] = "other"
    err = await _refused(c, store, "POST", "/default/jobs", 400, json=body)
    assert err["field"] == "metadata.namespace"
    err = await _refused(c, store, "POST", "/default/jobs", 400, json=sample("services", "s"))
    assert err["field"] == "kind"
    err = await _refused(c, store, "POST", "/nowhere/jobs", 404, json=sample("jobs", "j"))
    assert err["message"] == "namespace nowhere not found"
    await c.post("/default/jobs", json=sample("jobs", "j"))
    err = await _refused(c, store, "PUT", "/default/jobs/j", 400, json=sample("jobs", "k"))
    assert err["field"] == "metadata.name"
    err = await _refused(c, store, "POST", "/default/jobs", 409, json=sample("jobs", "j"))
    assert err["reason"] == "AlreadyExists"
    err = await _refused(c, store, "POST", "/namespaces", 422, json=sample("namespaces", "jobs"))
    assert "reserved" in err["message"]


async def test_unknown_kind_and_aliases(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client_nolc
    err = await _refused(c, store, "GET", "/default/widgets", 404)
    assert "widgets" in err["message"] and "jobs" in err["message"]
    await _refused(c, store, "POST", "/widgets", 404, json={"kind": "Widget"})
    r = await c.post("/default/job", json=sample("jobs", "aliased"))
    assert r.status_code == 201
    assert (await c.get("/default/job/aliased")).status_code == 200
    assert (await c.get("/svc")).status_code == 200
    assert (await c.get("/cluster")).json()["kind"] == "ClusterList"


async def test_oversized_body(make_api: Any, store: ObjectStore) -> None:
    async with asgi_client(make_api(options=ApiOptions(max_body_bytes=2048))) as c:
        body = sample("jobs", "big")
        body["spec"]["run"] = "x" * 4096
        err = await _refused(c, store, "POST", "/default/jobs", 413, json=body)
        assert "2048" in err["message"]

        async def chunks() -> Any:  # no Content-Length: the server must count
            for _ in range(8):
                yield b" " * 512

        await _refused(
            c,
            store,
            "POST",
            "/default/jobs",
            413,
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
    async with asgi_client(make_api()) as c:  # default limit: 1 MiB
        body["spec"]["run"] = "x" * (1024 * 1024 + 1)
        await _refused(c, store, "POST", "/default/jobs", 413, json=body)


async def test_json_patch(api_client_nolc: httpx.AsyncClient, store: ObjectStore) -> None:
    c = api_client_nolc
    await c.post("/default/jobs", json=sample("jobs", "p"))
    jp = {"Content-Type": "application/json-patch+json"}
    r = await c.patch(
        "/default/jobs/p",
        headers=jp,
        json=[
            {"op": "test", "path": "/spec/replicas", "value": 2},
            {"op": "replace", "path": "/spec/replicas", "value": 4},
            {"op": "add", "path": "/metadata/labels/tier", "value": "gold"},
        ],
    )
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["replicas"] == 4 and r.json()["metadata"]["generation"] == 2

    err = await _refused(
        c,
        store,
        "PATCH",
        "/default/jobs/p",
        422,
        headers=jp,
        json=[{"op": "test", "path": "/spec/replicas", "value": 1}],
    )
    assert "test" in err["message"]
    await _refused(
        c,
        store,
        "PATCH",
        "/default/jobs/p",
        422,
        headers=jp,
        json=[{"op": "remove", "path": "/spec/nope"}],
    )
    await _refused(
        c,
        store,
        "PATCH",
        "/default/jobs/p",
        422,
        headers=jp,
        json=[{"op": "frobnicate", "path": "/spec"}],
    )
    err = await _refused(
        c,
        store,
        "PATCH",
        "/default/jobs/p",
        422,
        headers=jp,
        json=[{"op": "replace", "path": "/spec/replicas", "value": -3}],
    )
    assert err["field"] == "spec.replicas"
    err = await _refused(
        c,
        store,
        "PATCH",
        "/default/jobs/p",
        422,
        headers=jp,
        json=[{"op": "replace", "path": "/metadata/name", "value": "q"}],
    )
    assert err["field"] == "metadata.name"
    await _refused(c, store, "PATCH", "/default/jobs/p", 400, headers=jp, content="[{")
    await _refused(c, store, "PATCH", "/default/jobs/missing", 404, headers=jp, json=[])


async def test_merge_patch(api_client_nolc: httpx.AsyncClient, store: ObjectStore) -> None:
    c = api_client_nolc
    body = sample("jobs", "m")
    body["spec"]["envs"] = {"A": "1", "B": "2"}
    await c.post("/default/jobs", json=body)
    mp = {"Content-Type": "application/merge-patch+json"}
    r = await c.patch(
        "/default/jobs/m", headers=mp, content=json.dumps({"spec": {"envs": {"A": None, "C": "3"}}})
    )
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["envs"] == {"B": "2", "C": "3"}
    assert r.json()["spec"]["replicas"] == 2
    err = await _refused(
        c,
        store,
        "PATCH",
        "/default/jobs/m",
        422,
        headers=mp,
        content=json.dumps({"spec": {"resources": {"cpus": "abc"}}}),
    )
    assert err["field"] == "spec.resources.cpus"
    await _refused(
        c,
        store,
        "PATCH",
        "/default/jobs/m",
        415,
        content="{}",
        headers={"Content-Type": "application/yaml"},
    )


async def test_list_selector_and_pages(api_client_nolc: httpx.AsyncClient) -> None:
    c = api_client_nolc
    for i in range(7):
        r = await c.post("/default/jobs", json=sample("jobs", f"l{i}", tier="a" if i % 2 else "b"))
        assert r.status_code == 201
    r = await c.get("/default/jobs", params={"labelSelector": "tier=a"})
    assert [o["metadata"]["name"] for o in r.json()["items"]] == ["l1", "l3", "l5"]

    names: list[str] = []
    params: dict[str, Any] = {"limit": 3}
    pages = 0
    rvs = set()
    while True:
        r = await c.get("/default/jobs", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        names += [o["metadata"]["name"] for o in body["items"]]
        rvs.add(body["metadata"]["resourceVersion"])
        pages += 1
        if not body["metadata"]["continue"]:
            break
        params = {"limit": 3, "continue": body["metadata"]["continue"]}
    assert names == [f"l{i}" for i in range(7)] and pages == 3 and len(rvs) == 1

    r = await c.get("/default/jobs", params={"labelSelector": "tier in (a", "limit": 2})
    assert r.status_code == 400 and error(r)["field"] == "labelSelector"
    r = await c.get("/default/jobs", params={"limit": 0})
    assert r.status_code == 422
    r = await c.get("/jobs", params={"labelSelector": "tier=b"})
    assert len(r.json()["items"]) == 4


async def test_namespace_delete_rules(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client_nolc
    await _refused(c, store, "DELETE", "/namespaces/default", 403)
    assert (await c.post("/namespaces", json=sample("namespaces", "team"))).status_code == 201
    assert (await c.post("/team/jobs", json=sample("jobs", "j"))).status_code == 201
    err = await _refused(c, store, "DELETE", "/namespaces/team", 409)
    assert "1 jobs" in err["message"]
    assert (await c.delete("/team/jobs/j")).status_code == 200
    assert (await c.delete("/namespaces/team")).status_code == 200


async def test_store_unavailable_is_503(make_api: Any) -> None:
    bogus = ObjectStore("127.0.0.1:1", prefix="/nowhere", timeout=0.3)
    async with asgi_client(make_api(store_=bogus)) as c:
        r = await c.get("/default/jobs")
        assert r.status_code == 503
        assert "etcd" in error(r)["message"]
        r = await c.post("/default/jobs", json=sample("jobs", "x"))
        assert r.status_code == 503
    await bogus.close()


async def test_concurrent_replaces(api_client_nolc: httpx.AsyncClient) -> None:
    c = api_client_nolc
    job = (await c.post("/default/jobs", json=sample("jobs", "race"))).json()

    def body(i: int, rv: str | None) -> dict[str, Any]:
        out = sample("jobs", "race", writer=str(i))
        if rv is not None:
            out["metadata"]["resourceVersion"] = rv
        return out

    rv = job["metadata"]["resourceVersion"]
    results = await asyncio.gather(
        *(c.put("/default/jobs/race", json=body(i, rv)) for i in range(8))
    )
    assert sorted(r.status_code for r in results) == [200] + [409] * 7
    # Without a resourceVersion a replace is unconditional: every writer lands, none is lost.
    results = await asyncio.gather(
        *(c.put("/default/jobs/race", json=body(i, None)) for i in range(8))
    )
    assert [r.status_code for r in results] == [200] * 8


async def test_spec_is_frozen_while_deleting(
    api_client: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client
    await c.post("/default/jobs", json=sample("jobs", "going"))
    assert (await c.delete("/default/jobs/going")).status_code == 202
    err = await _refused(
        c,
        store,
        "PATCH",
        "/default/jobs/going",
        409,
        json=[{"op": "replace", "path": "/spec/replicas", "value": 5}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert err["reason"] == "Deleting"
    r = await c.patch(
        "/default/jobs/going",
        json={"metadata": {"labels": {"still": "ok"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200


class _BrokenStore(ObjectStore):
    """A store whose reads fail with an unexpected (non-store) error."""

    async def get(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        raise RuntimeError("secret internal detail")


async def test_internal_errors_do_not_leak(make_api: Any, etcd_server: Any) -> None:
    broken = _BrokenStore(etcd_server.endpoint, prefix="/broken")
    await broken.connect()
    try:
        async with asgi_client(make_api(store_=broken)) as c:
            r = await c.get("/default/jobs/x")
            assert r.status_code == 500
            assert error(r)["message"] == "internal error (see the server log)"
            assert "secret" not in r.text
    finally:
        await broken.close()
