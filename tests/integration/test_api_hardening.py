"""Hostile bodies against the API on a real etcd: YAML alias bombs, JSON Patch amplification,
deep nesting on every body-reading route. Each must be a 4xx naming the field, quickly, and
leave the store exactly as it was; none may run its CPU-heavy part on the event loop.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from skyshift.api import ApiOptions, body, objects
from skyshift.models.registry import API_KINDS
from skyshift.store import ObjectStore
from tests.fixtures.api import MakeApi, asgi_client, sample
from tests.fixtures.auth import admin_password, bearer, token_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KINDS = [k.plural for k in API_KINDS]
YAML = {"Content-Type": "application/yaml"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


async def snapshot(store: ObjectStore) -> dict[str, list[dict[str, Any]]]:
    return {p: (await store.list(p)).items for p in [*KINDS, "users"]}


async def refused(
    c: httpx.AsyncClient,
    store: ObjectStore,
    method: str,
    path: str,
    code: int,
    *,
    field: str | None = None,
    within: float = 10.0,
    **kw: Any,
) -> dict[str, Any]:
    """The request gets ``code`` within ``within`` seconds, names ``field`` (when given) and
    leaves the store as it was; returns the error body."""
    before = await snapshot(store)
    started = time.monotonic()
    r = await c.request(method, path, **kw)
    elapsed = time.monotonic() - started
    assert r.status_code == code, r.text[:2000]
    err: dict[str, Any] = r.json()["error"]
    assert "Traceback" not in r.text and "RecursionError" not in r.text
    if field is not None:
        assert err.get("field") == field, err
    assert elapsed < within, f"{method} {path} took {elapsed:.1f}s"
    assert await snapshot(store) == before
    return err


def bomb(levels: int, width: int = 9) -> str:
    """The classic "billion laughs": ``width ** levels`` strings from a few hundred bytes."""
    lines = ["kind: Cluster", "metadata:", "  name: laughs", '  l0: &l0 ["lol"]']
    for i in range(1, levels + 1):
        refs = ",".join([f"*l{i - 1}"] * width)
        lines.append(f"  l{i}: &l{i} [{refs}]")
    lines.append("spec: {manager: local, cpus: 4, memory: 8Gi}")
    return "\n".join(lines) + "\n"


def nested_json(depth: int, leaf: str = "1", key: str = "a") -> str:
    return f'{{"{key}": ' * depth + leaf + "}" * depth


# --- 1. YAML anchors, aliases and decoded size ------------------------------------------------


async def test_yaml_alias_bomb_is_refused_before_it_expands(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client_nolc
    small = bomb(6)  # a million strings once expanded: bounded even where aliases are loaded
    err = await refused(c, store, "POST", "/clusters", 400, field="metadata.l0", content=small,
                        headers=YAML)
    assert "aliases" in err["message"] and "anchors" in err["message"]


async def test_full_size_yaml_alias_bomb(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    """The real thing (under 600 bytes, 9**9 strings): refused at once, with no memory to
    speak of (before the fix: minutes at 12 GB)."""
    c = api_client_nolc
    huge = bomb(9)
    assert len(huge) < 600
    await refused(c, store, "POST", "/clusters", 400, field="metadata.l0", content=huge,
                  headers=YAML, within=2.0)
    await refused(c, store, "PUT", "/clusters", 400, content=huge, headers=YAML, within=2.0)
    await refused(c, store, "PUT", "/clusters/laughs", 400, content=huge,
                  headers={"Content-Type": ""}, within=2.0)  # sniffed as YAML


async def test_yaml_anchor_without_bomb_is_refused_too(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    manifest = (
        "kind: Cluster\n"
        "metadata: {name: twins, labels: &l {team: a}, annotations: *l}\n"
        "spec: {manager: local, cpus: 4, memory: 8Gi}\n"
    )
    err = await refused(api_client_nolc, store, "POST", "/clusters", 400,
                        field="metadata.labels", content=manifest, headers=YAML)
    assert "&l" in err["message"]
    plain = manifest.replace("&l ", "").replace("*l", "{team: a}")
    r = await api_client_nolc.post("/clusters", content=plain, headers=YAML)
    assert r.status_code == 201, r.text  # the same manifest written out is fine


async def test_yaml_decoded_size_is_bounded(make_api: MakeApi, store: ObjectStore) -> None:
    options = ApiOptions(max_nodes=5_000)
    async with asgi_client(make_api(options=options)) as c:
        many = "[" + ",".join(["1"] * 6_000) + "]"
        manifest = f"kind: Cluster\nmetadata: {{name: many}}\nspec: {{manager: local, x: {many}}}\n"
        err = await refused(c, store, "POST", "/clusters", 413, content=manifest, headers=YAML)
        assert "5000 values" in err["message"] and err["field"].startswith("spec.x[")
        as_json = json.dumps({"kind": "Cluster", "metadata": {"name": "many"},
                              "spec": {"manager": "local", "x": [1] * 6_000}})
        await refused(c, store, "POST", "/clusters", 413, content=as_json,
                      headers={"Content-Type": "application/json"})
        big_int = "kind: Cluster\nmetadata: {name: big}\nspec: {cpus: " + "9" * 5000 + "}\n"
        await refused(c, store, "POST", "/clusters", 400, content=big_int, headers=YAML)


# --- 2. JSON Patch and merge patch amplification ----------------------------------------------


async def _cluster(c: httpx.AsyncClient, name: str, **spec: Any) -> dict[str, Any]:
    body = sample("clusters", name)
    body["metadata"]["annotations"] = {"note": "n" * 1000}
    body["spec"].update(spec)
    r = await c.post("/clusters", json=body)
    assert r.status_code == 201, r.text
    obj: dict[str, Any] = r.json()
    return obj


async def test_json_patch_copies_cannot_double_the_object(
    make_api: MakeApi, store: ObjectStore
) -> None:
    async with asgi_client(make_api(options=ApiOptions(max_body_bytes=64 * 1024))) as c:
        await _cluster(c, "copied")
        # each op copies all annotations into a new one: 2**12 times the object on old code
        # each op copies all of metadata into one of its annotations: 2**12 times the object
        ops = [
            {"op": "copy", "from": "/metadata", "path": f"/metadata/annotations/m{i}"}
            for i in range(12)
        ]
        err = await refused(c, store, "PATCH", "/clusters/copied", 413, field="[5].from",
                            content=json.dumps(ops), headers=JSON_PATCH)
        assert "copy" in err["message"]


async def test_full_size_json_patch_copy_bomb(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    """40 doubling copies (3 KB) against the default 1 MiB limit (before: 100 s at 8 GB)."""
    c = api_client_nolc
    await _cluster(c, "copied")
    ops = [
        {"op": "copy", "from": "/metadata", "path": f"/metadata/annotations/m{i}"}
        for i in range(40)
    ]
    await refused(c, store, "PATCH", "/clusters/copied", 413, content=json.dumps(ops),
                  headers=JSON_PATCH, within=5.0)


async def test_json_patch_operation_count_is_bounded(
    make_api: MakeApi, store: ObjectStore
) -> None:
    async with asgi_client(make_api(options=ApiOptions(max_patch_ops=50))) as c:
        await _cluster(c, "counted")
        ops = [{"op": "test", "path": "/kind", "value": "Cluster"}] * 51
        err = await refused(c, store, "PATCH", "/clusters/counted", 400, field="[50]",
                            content=json.dumps(ops), headers=JSON_PATCH)
        assert "at most 50 operations" in err["message"]
        r = await c.patch("/clusters/counted", content=json.dumps(ops[:50]), headers=JSON_PATCH)
        assert r.status_code == 200, r.text


async def test_merge_patch_result_is_bounded(make_api: MakeApi, store: ObjectStore) -> None:
    async with asgi_client(make_api(options=ApiOptions(max_body_bytes=8 * 1024))) as c:
        await _cluster(c, "merged", cpus=2)
        grow = {"metadata": {"labels": {"big": "x"}, "annotations": {"more": "m" * 7000}}}
        await refused(c, store, "PATCH", "/clusters/merged", 413, content=json.dumps(grow),
                      headers=MERGE)
        r = await c.patch("/clusters/merged", json={"spec": {"cpus": 3}}, headers=MERGE)
        assert r.status_code == 200 and r.json()["spec"]["cpus"] == 3


async def test_parsing_and_patching_run_off_the_event_loop(
    api_client_nolc: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    seen: dict[str, int] = {}

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kw: Any) -> Any:
            seen[name] = threading.get_ident()
            return real(*args, **kw)

        return wrapper

    monkeypatch.setattr(body, "parse_yaml", spy("yaml", body.parse_yaml))
    monkeypatch.setattr(body, "parse_json", spy("json", body.parse_json))
    monkeypatch.setattr(objects, "apply_patch", spy("patch", objects.apply_patch))
    c = api_client_nolc
    manifest = "kind: Cluster\nmetadata: {name: threaded}\nspec: {manager: local}\n"
    assert (await c.post("/clusters", content=manifest, headers=YAML)).status_code == 201
    r = await c.patch("/clusters/threaded", json={"spec": {"cpus": 3}}, headers=MERGE)
    assert r.status_code == 200, r.text
    assert set(seen) == {"yaml", "json", "patch"}
    assert loop_thread not in seen.values(), seen


# --- 3. deep nesting on every body-reading route ------------------------------------------------


async def test_deep_nesting_is_400_on_object_routes(
    api_client: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client
    await _cluster(c, "deep")
    await c.post("/default/jobs", json=sample("jobs", "deepjob"))
    deep = nested_json(100_000)
    for method, path, headers in [
        ("POST", "/clusters", {"Content-Type": "application/json"}),
        ("PUT", "/clusters/deep", {"Content-Type": "application/json"}),
        ("PUT", "/clusters", {}),
        ("PATCH", "/clusters/deep", MERGE),
        ("PATCH", "/clusters/deep", {"Content-Type": "application/json"}),
        ("POST", "/default/jobs/deepjob/exec", {"Content-Type": "application/json"}),
    ]:
        err = await refused(c, store, method, path, 400, content=deep, headers=headers)
        assert "nested more than 64 levels" in err["message"], (method, path)
        assert err["field"].startswith("a.a.a."), err
    # deep enough to pass the parser but not the limit: the path is exact
    medium = json.dumps({"kind": "Cluster", "metadata": {"name": "x"},
                         "spec": json.loads(nested_json(70))})
    err = await refused(c, store, "POST", "/clusters", 400, content=medium,
                        headers={"Content-Type": "application/json"})
    assert err["field"] == "spec" + ".a" * 63
    merge = json.dumps({"spec": json.loads(nested_json(900))})
    await refused(c, store, "PATCH", "/clusters/deep", 400, content=merge, headers=MERGE)
    deep_yaml = "kind: Cluster\nspec: " + "[" * 5000 + "]" * 5000 + "\n"
    err = await refused(c, store, "POST", "/clusters", 400, content=deep_yaml, headers=YAML)
    assert "nested more than 64 levels" in err["message"]
    # the exact path with the pure-Python parser; where the nesting starts with libyaml >=
    # 0.2.6, which stops at its own depth limit while scanning ahead
    assert err["field"].startswith("spec") and len(err["field"]) <= len("spec" + "[0]" * 63)
    block = "kind: Cluster\nspec:\n" + "".join(f"{'  ' * (i + 1)}k{i}:\n" for i in range(300))
    await refused(c, store, "POST", "/clusters", 400, content=block, headers=YAML)


async def test_deep_nesting_is_400_on_auth_routes(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str], store: ObjectStore
) -> None:
    c = secure_client
    deep = nested_json(2_000)  # 14 KB: within the 16 KB of auth bodies
    as_json = {"Content-Type": "application/json"}
    await refused(c, store, "POST", "/token", 400, content=deep, headers=as_json)
    await refused(c, store, "POST", "/register_user", 400, content=deep, headers=as_json)
    for path in ("/invite", "/revoke_invite"):
        await refused(c, store, "POST", path, 400, content=deep,
                      headers={**as_json, **admin_headers})


async def test_reasonable_bodies_still_work(api_client: httpx.AsyncClient) -> None:
    """Depth 60 in free-form fields, 1000 patch operations, YAML with comments and several
    empty documents: all within the limits."""
    c = api_client
    manifest = "---\n# a cluster\nkind: Cluster\nmetadata: {name: ok}\nspec: {manager: local}\n"
    assert (await c.post("/clusters", content=manifest, headers=YAML)).status_code == 201
    ops = [{"op": "add", "path": f"/metadata/labels/l{i}", "value": "v"} for i in range(60)]
    ops += [{"op": "test", "path": "/kind", "value": "Cluster"}] * 940
    r = await c.patch("/clusters/ok", content=json.dumps(ops), headers=JSON_PATCH)
    assert r.status_code == 200 and len(r.json()["metadata"]["labels"]) == 60


async def test_login_still_takes_json_and_forms(
    secure_client: httpx.AsyncClient, auth_home: Any
) -> None:
    password = admin_password(auth_home)
    assert await token_for(secure_client, "admin", password)
    r = await secure_client.post("/token", json={"username": "admin", "password": password})
    assert r.status_code == 200
    assert bearer(r.json()["access_token"])


# --- 4. lone UTF-16 surrogates (JSON "\ud800") and NUL bytes where argv goes -----------------

AS_JSON = {"Content-Type": "application/json"}


async def test_a_lone_surrogate_is_422_naming_the_field_and_nothing_is_stored(
    api_client: httpx.AsyncClient, store: ObjectStore, api_lifecycle: Any
) -> None:
    """Stored, such a string broke every later read of the kind (500 on UTF-8 encoding)."""
    c = api_client
    job = '{"kind":"Job","metadata":{"name":"s2"%s},"spec":{"run":"echo %s"}}'
    err = await refused(c, store, "POST", "/default/jobs", 422, field="spec.run",
                        content=job % ("", "\\ud800"), headers=AS_JSON)
    assert "surrogate" in err["message"] and "spec.run" in err["message"]
    annotated = job % (',"annotations":{"note":"x\\udfff"}', "hi")
    await refused(c, store, "POST", "/default/jobs", 422, field="metadata.annotations.note",
                  content=annotated, headers=AS_JSON)
    keyed = job % (',"annotations":{"k\\udc80":"v"}', "hi")
    err = await refused(c, store, "POST", "/default/jobs", 422, content=keyed, headers=AS_JSON)
    assert err["field"] == "metadata.annotations.k\\udc80"  # the key, printable
    as_yaml = 'kind: Job\nmetadata: {name: s3}\nspec: {run: "echo \\ud800"}\n'
    # libyaml refuses the escape itself (400); the pure-Python parser decodes it (422 here)
    r = await c.post("/default/jobs", content=as_yaml, headers=YAML)
    assert r.status_code in (400, 422), r.text
    # updates of a stored object are refused the same way
    assert (await c.post("/default/jobs", json=sample("jobs", "ok"))).status_code == 201
    merge = '{"metadata":{"annotations":{"a":"\\ud800"}}}'
    await refused(c, store, "PATCH", "/default/jobs/ok", 422,
                  field="metadata.annotations.a", content=merge, headers=MERGE)
    # every read still works and holds only the good job; no workflow was asked to start
    for path in ("/default/jobs", "/jobs"):
        r = await c.get(path)
        assert r.status_code == 200, r.text
        assert [j["metadata"]["name"] for j in r.json()["items"]] == ["ok"]
    assert (await c.get("/default/jobs/s2")).status_code == 404
    assert api_lifecycle.hooks("s2") == [] and api_lifecycle.hooks("s3") == []
    # characters beyond the BMP (a proper surrogate pair in JSON) are fine
    emoji = job % ("", "\\ud83d\\ude00")
    r = await c.post("/default/jobs", content=emoji.replace('"s2"', '"smile"'), headers=AS_JSON)
    assert r.status_code == 201, r.text
    assert (await c.get("/default/jobs/smile")).json()["spec"]["run"] == "echo \U0001f600"


async def test_exec_refuses_a_nul_byte_or_a_surrogate_in_the_command(
    api_client: httpx.AsyncClient, store: ObjectStore, api_lifecycle: Any
) -> None:
    """No argv can hold either: the replica's exec failed with a 502/503 instead."""
    c = api_client
    assert (await c.post("/default/jobs", json=sample("jobs", "ex"))).status_code == 201
    for arg in ("a\\u0000b", "a\\ud800"):
        body = f'{{"command": ["echo", "{arg}"]}}'
        err = await refused(c, store, "POST", "/default/jobs/ex/exec", 422, field="command[1]",
                            content=body, headers=AS_JSON)
        assert "command[1]" in err["message"], err
    assert api_lifecycle.exec_args == []
    r = await c.post("/default/jobs/ex/exec", json={"command": ["echo", "a b"]})
    assert r.status_code == 200 and api_lifecycle.exec_args == [(["echo", "a b"], 0)]


async def test_a_nul_byte_in_a_jobs_command_is_422_naming_spec_run(
    api_client: httpx.AsyncClient, store: ObjectStore, api_lifecycle: Any
) -> None:
    """It runs as an argument of /bin/sh -c, which cannot hold one: a workflow that retried
    its launch for ever instead."""
    body = '{"kind":"Job","metadata":{"name":"nul"},"spec":{"run":"echo a\\u0000b"}}'
    err = await refused(api_client, store, "POST", "/default/jobs", 422, field="spec.run",
                        content=body, headers=AS_JSON)
    assert "NUL" in err["message"]
    assert api_lifecycle.hooks("nul") == []


async def test_a_nul_byte_in_an_annotation_is_422_naming_it(
    api_client: httpx.AsyncClient, store: ObjectStore, api_lifecycle: Any
) -> None:
    """Issue 26: a NUL in an annotation value was stored; every tool reading it back sees a
    different text than the one stored."""
    body = '{"kind":"Job","metadata":{"name":"nulnote","annotations":{"note":"a\\u0000b"}}}'
    err = await refused(api_client, store, "POST", "/default/jobs", 422,
                        field="metadata.annotations.note", content=body, headers=AS_JSON)
    assert "NUL" in err["message"] and "metadata.annotations.note" in err["message"]
    assert api_lifecycle.hooks("nulnote") == []
    assert (await api_client.post("/default/jobs", json=sample("jobs", "ok2"))).status_code == 201
    merge = '{"metadata":{"annotations":{"a":"x\\u0000"}}}'
    await refused(api_client, store, "PATCH", "/default/jobs/ok2", 422,
                  field="metadata.annotations.a", content=merge, headers=MERGE)
