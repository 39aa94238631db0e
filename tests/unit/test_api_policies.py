"""The object routes come from the kind registry and the per-kind policies: every kind gets the
same routes (plus its policy's own), documented in OpenAPI with stable operation ids."""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.api.app import create_app
from skyshift.api.policies import POLICIES, policy_of
from skyshift.api.rules import RULES, spawned
from skyshift.models.registry import API_KINDS, KINDS, KindInfo, kind_info
from skyshift.store import ObjectStore

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    # never connected: building the schema does no I/O
    app = create_app(store=ObjectStore(["http://127.0.0.1:1"], "/unused"), auth=False)
    return app.openapi()


def _operations(spec: dict[str, Any], tag: str) -> set[tuple[str, str]]:
    return {
        (path, method)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in METHODS and tag in op.get("tags", ())
    }


def _expected(info: KindInfo) -> set[tuple[str, str]]:
    coll = f"/{{namespace}}/{info.plural}" if info.namespaced else f"/{info.plural}"
    item = f"{coll}/{{name}}"
    ops = {(coll, "post"), (coll, "put"), (coll, "get")}
    ops |= {(item, m) for m in ("get", "put", "patch", "delete")}
    if info.namespaced:
        ops.add((f"/{info.plural}", "get"))
    for router in policy_of(info).routers:
        for route in router.routes:
            ops |= {(route.path, m.lower()) for m in route.methods}  # type: ignore[attr-defined]
    return ops


@pytest.mark.parametrize("info", API_KINDS, ids=lambda k: k.kind)
def test_every_kind_has_the_generic_routes_and_its_policys(
    openapi: dict[str, Any], info: KindInfo
) -> None:
    assert _operations(openapi, info.kind) == _expected(info)


def test_operation_ids_are_unique_and_name_the_route(openapi: dict[str, Any]) -> None:
    ids = [
        op["operationId"]
        for item in openapi["paths"].values()
        for method, op in item.items()
        if method in METHODS
    ]
    assert len(ids) == len(set(ids))
    jobs = openapi["paths"]["/{namespace}/jobs/{name}"]
    assert jobs["delete"]["operationId"] == "delete_route__namespace__jobs__name__delete"
    assert openapi["paths"]["/jobs"]["get"]["operationId"] == "list_all_jobs_get"


def test_delete_texts_follow_the_policy(openapi: dict[str, Any]) -> None:
    ns = openapi["paths"]["/namespaces/{name}"]["delete"]["description"]
    assert "Refused for `default` (403)" in ns
    job = openapi["paths"]["/{namespace}/jobs/{name}"]["delete"]["description"]
    assert "deletionTimestamp" in job


def test_policies_and_rules_name_known_kinds_and_document_each() -> None:
    names = {k.kind for k in KINDS}
    assert set(POLICIES) <= names
    assert set(RULES) <= names
    assert all(policy_of(k).doc for k in API_KINDS)


def test_spawned_names_what_a_lifecycle_creates() -> None:
    schedule = kind_info("schedules")
    assert spawned(schedule, {"spec": {"jobTemplate": {}}}) == ("jobs",)
    assert spawned(schedule, {"spec": {"pipelineTemplate": {}}}) == ("jobs", "pipelines")
    assert spawned(kind_info("pipelines"), {"spec": {}}) == ("jobs",)
    assert spawned(kind_info("jobs"), {"spec": {}}) == ()
