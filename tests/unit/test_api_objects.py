"""Unit tests of the API's pure rules: server-owned fields, generation, patches, kind paths,
error field paths and the watch line format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skyshift.api import objects
from skyshift.api.errors import ApiError, loc_path
from skyshift.api.paths import canonical_path
from skyshift.api.watch import line
from skyshift.models.registry import kind_info

JOB = kind_info("jobs")
CLUSTER = kind_info("clusters")


def job(**spec: Any) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": "j"}, "spec": spec}


def stored(**spec: Any) -> dict[str, Any]:
    obj = objects.prepare_create(JOB, objects.check_identity(JOB, job(**spec), "default"))
    obj["metadata"]["resourceVersion"] = "10"
    return obj


def test_prepare_create_sets_server_fields_and_default_status() -> None:
    data = job(replicas=2)
    data["status"] = {"phase": "Running"}
    data["metadata"].update(uid="u", generation=7, resourceVersion="5")
    obj = objects.prepare_create(JOB, objects.check_identity(JOB, data, "ns1"))
    meta = obj["metadata"]
    assert meta["namespace"] == "ns1" and meta["generation"] == 1
    assert meta["uid"] not in (None, "u") and meta["creationTimestamp"]
    assert meta["resourceVersion"] is None
    assert obj["status"]["phase"] == "Pending"


@pytest.mark.parametrize(
    ("data", "namespace", "field"),
    [
        ({"kind": "Service", "metadata": {"name": "j"}}, "default", "kind"),
        ({"kind": "Job", "metadata": {"name": "j", "namespace": "b"}}, "a", "metadata.namespace"),
    ],
)
def test_identity_mismatch_names_the_field(
    data: dict[str, Any], namespace: str, field: str
) -> None:
    with pytest.raises(ApiError) as exc:
        objects.check_identity(JOB, data, namespace)
    assert exc.value.code == 400 and exc.value.field == field


def test_identity_accepts_kind_aliases_and_refuses_namespace_on_cluster_kinds() -> None:
    assert objects.check_identity(JOB, {"kind": "job", "metadata": {}}, "d")["kind"] == "Job"
    with pytest.raises(ApiError) as exc:
        objects.check_identity(CLUSTER, {"metadata": {"name": "c", "namespace": "x"}}, None)
    assert exc.value.field == "metadata.namespace"


def test_merge_update_keeps_server_fields_and_bumps_generation_on_spec_change() -> None:
    current = stored(replicas=1)
    new = json.loads(json.dumps(current))
    new["metadata"].update(uid=None, labels={"a": "b"}, generation=99)
    new["status"] = {"phase": "Failed"}
    merged, changed = objects.merge_update(JOB, current, new)
    assert not changed and merged["metadata"]["generation"] == 1
    assert merged["metadata"]["uid"] == current["metadata"]["uid"]
    assert merged["status"] == current["status"] and merged["metadata"]["labels"] == {"a": "b"}
    new["spec"]["replicas"] = 3
    merged, changed = objects.merge_update(JOB, current, new)
    assert changed and merged["metadata"]["generation"] == 2


def test_merge_update_default_spelling_is_not_a_change() -> None:
    current = stored(resources={"cpus": "500m"})
    _, changed = objects.merge_update(JOB, current, job(resources={"cpus": 0.5}))
    assert not changed


def test_merge_update_refuses_another_uid() -> None:
    current = stored()
    other = job()
    other["metadata"]["uid"] = "someone-else"
    with pytest.raises(ApiError) as exc:
        objects.merge_update(JOB, current, other)
    assert exc.value.code == 409


def test_merge_patch_rfc7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None}, "l": [3], "n": {"x": None}}
    assert objects.merge_patch(target, patch) == {"a": "z", "c": {"d": "e"}, "l": [3], "n": {}}
    assert target["c"] == {"d": "e", "f": "g"}  # not mutated


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/spec/replicas", "value": 5}],
        [{"op": "remove", "path": "/spec/missing"}],
        [{"op": "nope", "path": "/spec"}],
        [{"path": "/spec"}],
        ["not an op"],
        [{"op": "replace", "path": "/spec/ports/9", "value": 1}],
    ],
)
def test_failing_json_patch_is_422(ops: list[Any]) -> None:
    with pytest.raises(ApiError) as exc:
        objects.apply_patch(stored(), "json-patch", ops)
    assert exc.value.code == 422


def test_json_patch_does_not_touch_the_original() -> None:
    current = stored(replicas=1)
    out = objects.apply_patch(
        current, "json-patch", [{"op": "replace", "path": "/spec/replicas", "value": 4}]
    )
    assert out["spec"]["replicas"] == 4 and current["spec"]["replicas"] == 1


def test_patched_identity() -> None:
    current = stored()
    patched = objects.apply_patch(current, "merge-patch", {"metadata": {"name": "other"}})
    with pytest.raises(ApiError) as exc:
        objects.check_patched_identity(current, patched)
    assert exc.value.field == "metadata.name"
    stale = objects.apply_patch(current, "merge-patch", {"metadata": {"resourceVersion": "3"}})
    with pytest.raises(ApiError) as exc:
        objects.check_patched_identity(current, stale)
    assert exc.value.code == 409 and exc.value.resource_version == "10"


def test_mark_deleting() -> None:
    obj = objects.mark_deleting(stored())
    assert obj["metadata"]["deletionTimestamp"] and obj["status"]["phase"] == "Deleting"
    again = objects.mark_deleting(obj)
    assert again["metadata"]["deletionTimestamp"] == obj["metadata"]["deletionTimestamp"]


def test_reserved_namespace_names() -> None:
    ns = kind_info("namespaces")
    for name in ("jobs", "svc", "cluster", "healthz"):
        with pytest.raises(ApiError):
            objects.prepare_create(ns, {"kind": "Namespace", "metadata": {"name": name}})


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/job", "/jobs"),
        ("/svc", "/services"),
        ("/cluster/c1", "/clusters/c1"),
        ("/default/job/x", "/default/jobs/x"),
        ("/default/job/x/logs", "/default/jobs/x/logs"),
        ("/default/jobs", "/default/jobs"),
        ("/clusters/job", "/clusters/job"),  # a cluster named "job"
        ("/healthz", "/healthz"),
        ("/", "/"),
    ],
)
def test_canonical_path(path: str, expected: str) -> None:
    assert canonical_path(path) == expected


def test_loc_path_and_error_body() -> None:
    assert loc_path(("spec", "ports", 1)) == "spec.ports[1]"
    assert loc_path(("body", "spec", "function-after[_cpus()]", "cpus")) == "spec.cpus"
    body = ApiError(409, "stale", resource_version="7").body()
    assert body == {
        "error": {"code": 409, "reason": "Conflict", "message": "stale", "resourceVersion": "7"}
    }


def test_watch_line() -> None:
    raw = line("ADDED", {"metadata": {"name": "x"}})
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert json.loads(raw) == {"type": "ADDED", "object": {"metadata": {"name": "x"}}}
