"""The authorization matrix: role x action x kind x namespace, each allowed or denied as the roles
say, through a real uvicorn server with auth on.

Expectations come from :data:`GRANTS`, a hand-written table of what each user's roles grant,
not from the authorizer's code. Watches (which also need ``list``) and cross-namespace lists and
watches (which need the grant in every namespace, i.e. ``namespaces: ["*"]``) are part of it.
The creator/deleter pair pins the original's defect (create checked against delete) down.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from skyshift.api.auth.bootstrap import READABLE
from tests.fixtures.api import RecordingLifecycle, sample, uvicorn_server
from tests.fixtures.auth import MakeSecureApi, admin_password, bearer

pytestmark = pytest.mark.integration

ALL = "<all>"
NAMESPACES = ("default", "team-a", "team-b")
KINDS = {"jobs": True, "services": True, "clusters": False}  # plural -> namespaced
PASSWORD = "correct horse battery"

#: What each user's roles grant: (resource, action, namespace) with "*" wildcards. These are
#: the roles :func:`setup` creates; the default roles are admin, reader and inviter.
GRANTS: dict[str, list[tuple[str, str, str]]] = {
    "admin": [("*", "*", "*")],
    "rita": [(r, a, "*") for r in READABLE for a in ("get", "list", "watch")],  # reader
    "ed": [(r, "*", "team-a") for r in ("jobs", "services")],
    "cora": [("jobs", "create", "*")],
    "dora": [("jobs", "delete", "*")],
    "lin": [("jobs", "list", "*"), ("jobs", "get", "*"), ("clusters", "list", "*")],
    "mia": [("jobs", a, ns) for a in ("list", "watch") for ns in NAMESPACES],
    "nora": [],
}
CUSTOM_ROLES: dict[str, dict[str, Any]] = {
    "team-a-edit": {
        "rules": [{"resources": ["job", "svc"], "actions": ["*"]}],
        "namespaces": ["team-a"],
    },
    "job-creator": {"rules": [{"resources": ["jobs"], "actions": ["create"]}], "namespaces": ["*"]},
    "job-deleter": {"rules": [{"resources": ["jobs"], "actions": ["delete"]}], "namespaces": ["*"]},
    "lister": {
        "rules": [
            {"resources": ["jobs"], "actions": ["list", "get"]},
            {"resources": ["clusters"], "actions": ["list"]},
        ],
        "namespaces": ["*"],
    },
    "explicit-ns": {
        "rules": [{"resources": ["jobs"], "actions": ["list", "watch"]}],
        "namespaces": list(NAMESPACES),
    },
}
ROLE_OF = {
    "rita": "reader",
    "ed": "team-a-edit",
    "cora": "job-creator",
    "dora": "job-deleter",
    "lin": "lister",
    "mia": "explicit-ns",
    "nora": None,
}
#: operation -> the (action) checks it needs; watches need list (or get) and watch.
OPERATIONS: dict[str, tuple[str, ...]] = {
    "create": ("create",),
    "get": ("get",),
    "watch-one": ("get", "watch"),
    "list": ("list",),
    "watch": ("list", "watch"),
    "list-all": ("list",),
    "watch-all": ("list", "watch"),
    "update": ("update",),
    "patch": ("patch",),
    "delete": ("delete",),
}


def may(user: str, action: str, resource: str, namespace: str | None) -> bool:
    for res, act, ns in GRANTS[user]:
        if res not in (resource, "*") or act not in (action, "*"):
            continue
        if namespace is None or ns == "*" or (namespace != ALL and ns == namespace):
            return True
    return False


def expected(user: str, op: str, resource: str, namespace: str | None) -> bool:
    return all(may(user, action, resource, namespace) for action in OPERATIONS[op])


@dataclass
class World:
    http: httpx.AsyncClient
    tokens: dict[str, str]

    def h(self, user: str) -> dict[str, str]:
        return bearer(self.tokens[user])


async def _ok(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code < 300, f"{resp.request.method} {resp.request.url}: {resp.text}"
    data: dict[str, Any] = resp.json()
    return data


async def setup(http: httpx.AsyncClient, home: Any) -> World:
    admin = bearer(
        (
            await _ok(
                await http.post(
                    "/token", data={"username": "admin", "password": admin_password(home)}
                )
            )
        )["access_token"]
    )
    for ns in NAMESPACES[1:]:
        await _ok(
            await http.post(
                "/namespaces", json={"kind": "Namespace", "metadata": {"name": ns}}, headers=admin
            )
        )
    for name, spec in CUSTOM_ROLES.items():
        body = {"kind": "Role", "metadata": {"name": name}, "spec": spec}
        await _ok(await http.post("/roles", json=body, headers=admin))
    tokens = {"admin": admin["Authorization"].split()[1]}
    for user, role in ROLE_OF.items():
        roles = [role] if role else []
        invite = await _ok(await http.post("/invite", json={"roles": roles}, headers=admin))
        reg = {"username": user, "password": PASSWORD, "invite": invite["invite"]}
        await _ok(await http.post("/register_user", json=reg))
        login = await _ok(await http.post("/token", data={"username": user, "password": PASSWORD}))
        tokens[user] = login["access_token"]
    return World(http, tokens)


@pytest_asyncio.fixture
async def world(make_secure_api: MakeSecureApi, auth_home: Any) -> AsyncIterator[World]:
    async with (
        uvicorn_server(make_secure_api()) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        yield await setup(http, auth_home)


class Case:
    """Runs one operation as ``user`` and reports whether it was allowed (2xx) or denied (403)."""

    counter = itertools.count()

    def __init__(self, world: World, user: str, plural: str, namespace: str | None) -> None:
        self.w, self.user, self.plural, self.ns = world, user, plural, namespace

    def coll(self, all_namespaces: bool = False) -> str:
        if self.ns is None or all_namespaces:
            return f"/{self.plural}"
        return f"/{self.ns}/{self.plural}"

    async def fresh(self, prefix: str) -> str:
        """An object created by admin for this case (a name no other case uses)."""
        name = f"{prefix}-{self.user}-{next(self.counter)}"
        await _ok(
            await self.w.http.post(
                self.coll(), json=sample(self.plural, name), headers=self.w.h("admin")
            )
        )
        return name

    async def stream_status(self, path: str, params: dict[str, str]) -> int:
        async with self.w.http.stream("GET", path, params=params, headers=self.w.h(self.user)) as r:
            return r.status_code  # leaving the block closes the (endless) watch

    async def run(self, op: str) -> int:
        http, h = self.w.http, self.w.h(self.user)
        if op == "create":
            name = f"new-{self.user}-{next(self.counter)}"
            return (
                await http.post(self.coll(), json=sample(self.plural, name), headers=h)
            ).status_code
        if op == "list":
            return (await http.get(self.coll(), headers=h)).status_code
        if op == "list-all":
            return (await http.get(self.coll(True), headers=h)).status_code
        if op == "watch":
            return await self.stream_status(self.coll(), {"watch": "true"})
        if op == "watch-all":
            return await self.stream_status(self.coll(True), {"watch": "true"})
        name = await self.fresh("obj")
        item = f"{self.coll()}/{name}"
        if op == "get":
            return (await http.get(item, headers=h)).status_code
        if op == "watch-one":
            return await self.stream_status(item, {"watch": "true"})
        if op == "update":
            current = (await http.get(item, headers=self.w.h("admin"))).json()
            current["metadata"]["labels"] = {"touched": "yes"}
            return (await http.put(item, json=current, headers=h)).status_code
        if op == "patch":
            return (
                await http.patch(
                    item,
                    json={"metadata": {"labels": {"p": "1"}}},
                    headers={**h, "Content-Type": "application/merge-patch+json"},
                )
            ).status_code
        if op == "delete":
            return (await http.delete(item, headers=h)).status_code
        raise AssertionError(op)


def scopes(plural: str) -> list[str | None]:
    return list(NAMESPACES) if KINDS[plural] else [None]


@pytest.mark.parametrize("user", list(GRANTS))
async def test_matrix(world: World, user: str) -> None:
    wrong: list[str] = []
    checked = 0
    for plural in KINDS:
        for ns in scopes(plural):
            case = Case(world, user, plural, ns)
            for op in OPERATIONS:
                if op.endswith("-all") and ns is None:
                    continue
                if op.endswith("-all") and ns != NAMESPACES[0]:
                    continue  # one run per kind is enough: the namespace is not in the URL
                scope = ALL if op.endswith("-all") else ns
                want = expected(user, op, plural, scope)
                code = await case.run(op)
                checked += 1
                ok = 200 <= code < 300 if want else code == 403
                if not ok:
                    wrong.append(
                        f"{user} {op} {plural} in {scope}: got {code}, "
                        f"want {'2xx' if want else '403'}"
                    )
    assert checked >= 50
    assert not wrong, "\n".join(wrong)


async def test_matrix_covers_allowed_and_denied_for_every_operation() -> None:
    """The table itself: every operation is allowed for someone and denied for someone."""
    for op in OPERATIONS:
        outcomes = {
            expected(
                u, op, p, ALL if op.endswith("-all") else (NAMESPACES[1] if KINDS[p] else None)
            )
            for u in GRANTS
            for p in KINDS
        }
        assert outcomes == {True, False}, op
    # the cases the issue names explicitly
    assert expected("cora", "create", "jobs", "default")
    assert not expected("cora", "delete", "jobs", "default")
    assert expected("dora", "delete", "jobs", "default")
    assert not expected("dora", "create", "jobs", "default")
    assert expected("mia", "watch", "jobs", "team-b") and not expected(
        "mia", "watch-all", "jobs", ALL
    )
    assert expected("lin", "list-all", "jobs", ALL) and not expected(
        "lin", "watch-all", "jobs", ALL
    )
    assert expected("ed", "update", "jobs", "team-a") and not expected(
        "ed", "get", "jobs", "team-b"
    )


async def test_forbidden_answers_name_the_missing_permission(world: World) -> None:
    r = await world.http.get("/jobs", headers=world.h("mia"))
    assert r.status_code == 403
    assert r.json()["error"]["message"] == (
        "forbidden: user mia may not list jobs across all namespaces (name one with --namespace)"
    )
    r = await world.http.post("/team-b/jobs", json=sample("jobs", "x"), headers=world.h("ed"))
    assert (
        r.json()["error"]["message"] == "forbidden: user ed may not create jobs in namespace team-b"
    )


async def test_apply_needs_create_for_new_and_update_for_existing(world: World) -> None:
    """PUT on a collection is a create or an update; each is checked as what it turns out to be."""
    http = world.http
    new = sample("jobs", "applied-new")
    assert (await http.put("/default/jobs", json=new, headers=world.h("cora"))).status_code == 201
    existing = (await http.get("/default/jobs/applied-new", headers=world.h("admin"))).json()
    existing["metadata"]["labels"] = {"changed": "yes"}
    r = await http.put("/default/jobs", json=existing, headers=world.h("cora"))
    assert r.status_code == 403 and "may not update" in r.text
    r = await http.put("/team-a/jobs", json=sample("jobs", "ed-applied"), headers=world.h("ed"))
    assert r.status_code == 201
    assert (
        await http.put("/team-b/jobs", json=sample("jobs", "nope"), headers=world.h("ed"))
    ).status_code == 403


async def test_logs_and_exec_follow_get_and_update(world: World) -> None:
    """Logs need get, exec needs update, in the job's namespace (checked before the 503 of a
    server without the lifecycle plane)."""
    http = world.http
    await _ok(await http.post("/team-a/jobs", json=sample("jobs", "lj"), headers=world.h("admin")))
    assert (await http.get("/team-a/jobs/lj/logs", headers=world.h("nora"))).status_code == 403
    assert (await http.get("/team-a/jobs/lj/logs", headers=world.h("rita"))).status_code == 503
    body = {"command": ["ls"]}
    assert (
        await http.post("/team-a/jobs/lj/exec", json=body, headers=world.h("rita"))
    ).status_code == 403
    assert (
        await http.post("/team-a/jobs/lj/exec", json=body, headers=world.h("ed"))
    ).status_code == 503


async def test_role_changes_apply_at_once(world: World) -> None:
    """Granting or revoking through the API takes effect on the next request."""
    http, admin = world.http, world.h("admin")
    assert (await http.get("/team-b/jobs", headers=world.h("nora"))).status_code == 403
    role = {
        "kind": "Role",
        "metadata": {"name": "nora-b"},
        "spec": {
            "rules": [{"resources": ["jobs"], "actions": ["list"]}],
            "namespaces": ["team-b"],
            "users": ["nora"],
        },
    }
    await _ok(await http.post("/roles", json=role, headers=admin))
    assert (await http.get("/team-b/jobs", headers=world.h("nora"))).status_code == 200
    assert (await http.get("/team-a/jobs", headers=world.h("nora"))).status_code == 403
    assert (await http.delete("/roles/nora-b", headers=admin)).status_code == 200
    assert (await http.get("/team-b/jobs", headers=world.h("nora"))).status_code == 403


async def test_unknown_paths_need_a_token_too(world: World) -> None:
    assert (await world.http.get("/gizmos")).status_code == 401
    assert (await world.http.get("/gizmos", headers=world.h("nora"))).status_code == 404


async def test_pipelines_and_schedules_need_the_rights_to_what_they_create(world: World) -> None:
    """Their lifecycles create Jobs (and Pipelines) with the control plane's rights, so creating
    one needs the caller to hold those rights too; cancelling a pipeline does not."""
    http, admin = world.http, world.h("admin")
    role = {"kind": "Role", "metadata": {"name": "flows"}, "spec": {
        "rules": [{"resources": ["pipelines", "schedules"], "actions": ["*"]}],
        "namespaces": ["*"], "users": ["nora", "cora"]}}
    await _ok(await http.post("/roles", json=role, headers=admin))
    r = await http.post("/default/pipelines", json=sample("pipelines", "p1"),
                        headers=world.h("nora"))
    assert r.status_code == 403
    assert r.json()["error"]["message"] == (
        "forbidden: user nora may not create jobs in namespace default")
    r = await http.post("/default/schedules", json=sample("schedules", "s1"),
                        headers=world.h("nora"))
    assert r.status_code == 403 and "may not create jobs" in r.text
    # cora may create jobs: her pipelines and job schedules are fine
    assert (await http.post("/default/pipelines", json=sample("pipelines", "p2"),
                            headers=world.h("cora"))).status_code == 201
    assert (await http.post("/default/schedules", json=sample("schedules", "s2"),
                            headers=world.h("cora"))).status_code == 201
    # nora may cancel a pipeline someone else made (steps never change afterwards) ...
    merge = {"Content-Type": "application/merge-patch+json"}
    r = await http.patch("/default/pipelines/p2", json={"spec": {"cancel": True}},
                         headers={**world.h("nora"), **merge})
    assert r.status_code == 200, r.text
    # ... but not point a schedule at other work
    r = await http.patch("/default/schedules/s2",
                         json={"spec": {"jobTemplate": {"spec": {"run": "other"}}}},
                         headers={**world.h("nora"), **merge})
    assert r.status_code == 403 and "may not create jobs" in r.text
    assert (await http.get("/default/schedules/s2", headers=admin)).json()["spec"][
        "jobTemplate"]["spec"]["run"] == "date"


@pytest.mark.parametrize("value", ["t", "y", "T", "Y", "on", "1", "true"])
async def test_every_spelling_of_a_true_watch_needs_the_watch_permission(
    world: World, value: str
) -> None:
    """The check reads ``watch`` the way the route does: ``?watch=t`` is a watch, so lin (list
    and get on jobs, no watch) is refused it, on a list, a get and the cross-namespace list."""
    name = await Case(world, "admin", "jobs", "default").fresh("w")
    lin = Case(world, "lin", "jobs", "default")
    for path in ("/default/jobs", f"/default/jobs/{name}", "/jobs"):
        async with world.http.stream(
            "GET", path, params={"watch": value, "timeoutSeconds": "1"}, headers=world.h("lin")
        ) as r:
            await r.aread()
            assert r.status_code == 403, (path, value)
            assert r.json()["error"]["message"].startswith("forbidden: user lin may not watch jobs")
    # a user holding watch streams with the same spelling; a false one is a plain list for lin
    rita = Case(world, "rita", "jobs", "default")
    assert await rita.stream_status("/default/jobs", {"watch": value}) == 200
    r = await world.http.get("/default/jobs", params={"watch": "f"}, headers=world.h("lin"))
    assert r.status_code == 200 and r.json()["kind"] == "JobList"
    assert await lin.stream_status("/default/jobs", {"watch": "maybe"}) == 422


@pytest_asyncio.fixture
async def world_lc(
    make_secure_api: MakeSecureApi, auth_home: Any
) -> AsyncIterator[tuple[World, RecordingLifecycle]]:
    """The world with a (recording) lifecycle plane, for the schedule actions."""
    lifecycle = RecordingLifecycle()
    async with (
        uvicorn_server(make_secure_api(lifecycle=lifecycle)) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        yield await setup(http, auth_home), lifecycle


async def test_trigger_and_backfill_need_the_rights_to_what_the_schedule_runs(
    world_lc: tuple[World, RecordingLifecycle],
) -> None:
    """Trigger and backfill make the lifecycle create the schedule's jobs, so they need what a
    patch unpausing it needs: ``update`` on the schedule is not enough without ``create`` jobs."""
    world, lifecycle = world_lc
    http, admin = world.http, world.h("admin")
    role = {"kind": "Role", "metadata": {"name": "sched-ops"}, "spec": {
        "rules": [{"resources": ["schedules"], "actions": ["get", "list", "update", "patch"]}],
        "namespaces": ["team-a"], "users": ["nora", "cora"]}}
    await _ok(await http.post("/roles", json=role, headers=admin))
    await _ok(await http.post("/team-a/schedules", json=sample("schedules", "sc1"), headers=admin))
    window = {"start": "2026-11-01T00:00:00Z", "end": "2026-11-03T00:00:00Z"}
    for action, body in (("trigger", None), ("backfill", window)):
        r = await http.post(f"/team-a/schedules/sc1/{action}", json=body, headers=world.h("nora"))
        assert r.status_code == 403, (action, r.text)
        assert r.json()["error"]["message"] == (
            "forbidden: user nora may not create jobs in namespace team-a")
    assert lifecycle.hooks("sc1") == ["created"] and lifecycle.backfills == []
    assert (await http.get("/team-a/jobs", headers=admin)).json()["items"] == []
    # cora may create jobs: the same role lets her run it
    r = await http.post("/team-a/schedules/sc1/trigger", headers=world.h("cora"))
    assert r.status_code == 202, r.text
    r = await http.post("/team-a/schedules/sc1/backfill", json=window, headers=world.h("cora"))
    assert r.status_code == 202, r.text
    assert lifecycle.hooks("sc1") == ["created", "trigger", "backfill"]
