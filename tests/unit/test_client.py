"""The Python client against httpx.MockTransport: routes, paging, patch types, watch parsing,
apply, and error shapes (server errors, FastAPI bodies, connection refused)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from skyshift.client import ApiError, AsyncSkyShiftClient, SkyShiftClient
from skyshift.client.base import LOGS_READ_TIMEOUT
from skyshift.client.errors import error_from_response
from skyshift.models import Job

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


def client(handler: Handler, **kw: Any) -> SkyShiftClient:
    return SkyShiftClient(server="http://api", transport=httpx.MockTransport(handler), **kw)


def err(status: int, reason: str, message: str, **extra: Any) -> httpx.Response:
    body = {"error": {"code": status, "reason": reason, "message": message, **extra}}
    return httpx.Response(status, json=body)


def test_routes_follow_scope_and_aliases() -> None:
    seen: list[tuple[str, str]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((req.method, req.url.path))
        return httpx.Response(200, json={"kind": "X", "metadata": {"name": "n"}, "items": []})

    c = client(handler, namespace="ml")
    c.get("svc", "web")
    c.get("cl", "kind-1")
    c.get(Job, "train", "other")
    c.list("jobs")
    c.list("jobs", namespace="all")
    c.list("clusters", namespace="ignored")
    c.create({"kind": "Job", "metadata": {"name": "a"}})
    c.update({"kind": "fp", "metadata": {"name": "p", "namespace": "x"}})
    c.delete("edp", "e")
    assert seen == [
        ("GET", "/ml/services/web"),
        ("GET", "/clusters/kind-1"),
        ("GET", "/other/jobs/train"),
        ("GET", "/ml/jobs"),
        ("GET", "/jobs"),
        ("GET", "/clusters"),
        ("POST", "/ml/jobs"),
        ("PUT", "/x/filterpolicies/p"),
        ("DELETE", "/ml/endpoints/e"),
    ]


def test_create_fills_namespace_and_accepts_models() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(req.content))
        return httpx.Response(201, json=bodies[-1])

    c = client(handler)
    c.create(Job.model_validate({"kind": "Job", "metadata": {"name": "a"}}))
    assert bodies[0]["metadata"]["namespace"] == "default"
    assert "uid" not in bodies[0]["metadata"]  # server-owned None fields are not sent


def test_list_follows_continue_tokens() -> None:
    pages = {
        None: {"metadata": {"resourceVersion": "10", "continue": "t1"}, "items": [{"n": 1}]},
        "t1": {"metadata": {"resourceVersion": "10", "continue": "t2"}, "items": [{"n": 2}]},
        "t2": {"metadata": {"resourceVersion": "10", "continue": None}, "items": [{"n": 3}]},
    }
    queries: list[dict[str, str]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        queries.append(dict(req.url.params))
        page = pages[req.url.params.get("continue")]
        return httpx.Response(200, json={"kind": "JobList", **page})

    data = client(handler).list("jobs", label_selector={"app": "web", "tier": "db"}, limit=1)
    assert [i["n"] for i in data["items"]] == [1, 2, 3]
    assert data["kind"] == "JobList" and data["metadata"]["resourceVersion"] == "10"
    assert queries[0] == {"limit": "1", "labelSelector": "app=web,tier=db"}
    assert queries[2]["continue"] == "t2"
    one = client(handler).list("jobs", limit=1, follow=False)
    assert len(one["items"]) == 1 and one["metadata"]["continue"] == "t1"


def test_patch_content_types() -> None:
    seen: list[tuple[str, Any]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((req.headers["content-type"], json.loads(req.content)))
        return httpx.Response(200, json={"kind": "Job", "metadata": {"name": "a"}})

    c = client(handler)
    c.patch("jobs", "a", None, {"spec": {"replicas": 3}})
    c.patch("jobs", "a", None, [{"op": "replace", "path": "/spec/replicas", "value": 2}])
    c.patch("jobs", "a", "ml", {"metadata": {"labels": {"x": "y"}}}, type="merge")
    assert [s[0] for s in seen] == [
        "application/merge-patch+json", "application/json-patch+json",
        "application/merge-patch+json",
    ]
    assert seen[1][1][0]["op"] == "replace"


def test_delete_reports_pending_lifecycles() -> None:
    codes = iter([202, 200])

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(next(codes), json={"kind": "Job", "metadata": {"name": "a"}})

    c = client(handler)
    assert c.delete("jobs", "a").pending is True
    assert c.delete("jobs", "a").pending is False


def test_apply_creates_updates_or_leaves_alone() -> None:
    stored = {
        "kind": "Job",
        "metadata": {"name": "a", "namespace": "default", "uid": "u1", "resourceVersion": "5",
                     "labels": {}},
        "spec": {"run": "x", "replicas": 1},
        "status": {"phase": "Running"},
    }
    puts: list[dict[str, Any]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        if req.method == "POST":
            return err(409, "AlreadyExists", "Job a already exists")
        if req.method == "GET":
            return httpx.Response(200, json=stored)
        puts.append(json.loads(req.content))
        return httpx.Response(200, json=puts[-1])

    c = client(handler)
    same = c.apply({"kind": "Job", "metadata": {"name": "a"}, "spec": {"run": "x"}})
    assert same.action == "unchanged" and not puts  # defaults make the specs equal
    changed = c.apply({"kind": "Job", "metadata": {"name": "a"}, "spec": {"run": "y"}})
    assert changed.action == "configured"
    assert puts[0]["metadata"]["resourceVersion"] == "5"  # CAS on what was read
    assert puts[0]["metadata"]["uid"] == "u1" and puts[0]["status"] == {"phase": "Running"}
    assert puts[0]["spec"] == {"run": "y"}

    created = client(lambda r: httpx.Response(201, json={"kind": "Job"})).apply(
        {"kind": "Job", "metadata": {"name": "b"}}
    )
    assert created.action == "created"


def test_watch_parses_ndjson_and_skips_keepalives() -> None:
    lines = [
        {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "3"}}},
        None,
        {"type": "MODIFIED", "object": {"metadata": {"name": "a", "resourceVersion": "4"}}},
    ]
    body = "".join(("\n" if ln is None else json.dumps(ln) + "\n") for ln in lines)
    params: list[dict[str, str]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        params.append(dict(req.url.params))
        return httpx.Response(200, text=body, headers={"content-type": "application/x-ndjson"})

    events = list(client(handler).watch("jobs", resource_version="2", timeout=5))
    assert [(e.type, e.resource_version) for e in events] == [("ADDED", "3"), ("MODIFIED", "4")]
    assert params[0] == {"watch": "true", "resourceVersion": "2", "timeoutSeconds": "5"}


def test_logs_read_waits_past_the_clients_timeout_for_the_apis_answer() -> None:
    """The API answers a logs read within its own bound (a 504 naming a slow cluster), longer
    than the client's usual timeout: the read must wait for that answer, other calls not."""
    seen: dict[str, dict[str, Any]] = {}

    def handler(req: httpx.Request) -> httpx.Response:
        seen[req.url.path] = req.extensions["timeout"]
        if req.url.path.endswith("/logs"):
            return httpx.Response(200, text="hello\n", headers={"content-type": "text/plain"})
        return httpx.Response(200, json={"kind": "Job", "metadata": {"name": "a"}})

    c = client(handler, timeout=30)
    assert c.logs("a") == "hello\n"
    c.get("jobs", "a")
    assert seen["/default/jobs/a/logs"]["read"] == LOGS_READ_TIMEOUT > 50
    assert seen["/default/jobs/a"]["read"] == 30


def test_watch_error_event_raises() -> None:
    error_line = {"type": "ERROR", "object": {"error": {"code": 410, "reason": "Expired",
                                                        "message": "revision 2 compacted"}}}

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=json.dumps(error_line) + "\n")

    with pytest.raises(ApiError) as info:
        list(client(handler).watch("jobs"))
    assert (info.value.status, info.value.reason) == (410, "Expired")


def test_error_shapes_become_one_line() -> None:
    e = error_from_response(
        422, json.dumps({"error": {"code": 422, "reason": "Invalid", "field": "spec.replicas",
                                   "message": "invalid Job: spec.replicas: must be >= 0"}})
    )
    assert (e.status, e.reason, e.field) == (422, "Invalid", "spec.replicas")
    assert str(e) == "invalid Job: spec.replicas: must be >= 0"
    e = error_from_response(404, json.dumps({"error": {"code": 404, "reason": "NotFound",
                                                       "message": "Job a not found"}}))
    assert str(e) == "Job a not found (NotFound)"
    e = error_from_response(409, json.dumps({"error": {"code": 409, "reason": "Conflict",
                                                       "message": "stale",
                                                       "resourceVersion": "12"}}))
    assert e.conflict and e.resource_version == "12"
    e = error_from_response(422, json.dumps({"detail": [{"loc": ["body", "rank"],
                                                         "msg": "must be >= 0"}]}))
    assert (e.field, str(e)) == ("rank", "rank: must be >= 0 (Invalid)")
    e = error_from_response(502, "<html>\nBad gateway\n</html>")
    assert e.reason == "BadGateway" and "\n" not in str(e)


def test_http_errors_raise_api_error() -> None:
    c = client(lambda r: err(404, "NotFound", "Job a not found in namespace default"))
    with pytest.raises(ApiError) as info:
        c.get("jobs", "a")
    assert info.value.not_found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_says_where_and_what_to_do() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ApiError) as info:
        SkyShiftClient(server=url).list("jobs")
    msg = str(info.value)
    assert info.value.status == 0
    assert url in msg and "connection refused" in msg and "skyshift up" in msg
    assert "--server" in msg and "\n" not in msg


def test_server_token_and_namespace_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"items": []})

    monkeypatch.setenv("SKYSHIFT_SERVER", "http://from-env:1/")
    c = SkyShiftClient(token="t0k", transport=httpx.MockTransport(handler))
    assert c.server == "http://from-env:1" and c.namespace == "default"
    c.list("jobs")
    assert seen[0].headers["authorization"] == "Bearer t0k"
    assert str(seen[0].url) == "http://from-env:1/default/jobs"
    assert SkyShiftClient(server="http://flag:2").server == "http://flag:2"


async def test_async_client_mirrors_sync() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        if "watch" in req.url.params:
            ev = {"type": "ADDED", "object": {"metadata": {"name": "a"}}}
            return httpx.Response(200, text=json.dumps(ev) + "\n")
        if req.url.path.endswith("/exec"):
            return httpx.Response(200, json={"exit_code": 2, "stdout": "o", "stderr": "e"})
        if req.method == "DELETE":
            return httpx.Response(202, json={"metadata": {"name": "a"}})
        return httpx.Response(200, json={"kind": "JobList", "metadata": {}, "items": [{"a": 1}]})

    async with AsyncSkyShiftClient(server="http://api",
                                   transport=httpx.MockTransport(handler)) as c:
        assert (await c.list("jobs"))["items"] == [{"a": 1}]
        assert [e.type async for e in c.watch("jobs")] == ["ADDED"]
        result = await c.exec("a", ["false"], rank=1)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "o", "e")
        assert (await c.delete("jobs", "a")).pending
