"""Fuzzing the real API: no generated request gets a 5xx, and the store stays consistent.

Schemathesis generates requests for every operation of the server's own ``/openapi.json``
(valid and schema-violating ones, with random path parameters and again aimed at existing
objects), and strategies of our own cover what the document cannot describe: manifests with one
field replaced by a value of the wrong type, malformed JSON and YAML, odd content types and
bodies around the size limit. The server is uvicorn on loopback with the recording lifecycle
(so job logs/exec answer as with a lifecycle plane); the requests are sent from a thread with a
plain HTTP client, each watch stream closed as soon as its status arrived.

Afterwards every object in etcd must still validate with ``parse_object``, and the number of
objects must be what the 2xx answers say: before + created (201) - removed (DELETE 200).
``SKYSHIFT_FUZZ_EXAMPLES`` (default 25) bounds the examples per operation and mode.

The work is cut into parts, each a test with a server and store of its own: the documented
operations in ``SCHEMA_SHARDS`` shards (generating schemathesis' cases is most of the CPU, and one
test doing all of them outgrew pytest's 5 min per test on a loaded machine), and our own bodies
with the hostile-tenant probe. Under ``./dev test`` the parts also run on different workers.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fixtures.require import strict

try:
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable
except ImportError:  # a plain pytest without the dev extra: skip; a failure under ./dev test
    if strict():
        raise
    pytest.skip("needs schemathesis and hypothesis (pip install -e '.[dev]')",
                allow_module_level=True)

from skyshift.models.registry import API_KINDS, parse_object
from skyshift.store import ObjectStore
from tests.fixtures.api import (
    SAMPLES,
    RecordingLifecycle,
    add_sample_clusters,
    sample,
    uvicorn_server,
)
from tests.fixtures.auth import MakeSecureApi, admin_password, bearer, token_for

pytestmark = pytest.mark.integration

MAX_BODY = 1024 * 1024  # ApiOptions' default body limit
NDJSON = "application/x-ndjson"
TARGET = "fuzz-target"
PLURALS = {k.plural for k in API_KINDS}


def examples() -> int:
    return int(os.environ.get("SKYSHIFT_FUZZ_EXAMPLES", "25") or 25)


def fuzz_settings(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,  # nothing written into the work tree
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


@dataclass
class Record:
    """What the fuzzer sent and got: statuses, the 5xx answers, creates and removals."""

    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    created: int = 0
    removed: int = 0
    requests: int = 0
    #: Sent with every request (the admin's bearer token) unless the case sets its own.
    auth: dict[str, str] = field(default_factory=dict)

    def send(self, http: httpx.Client, method: str, url: str, **kw: Any) -> int:
        headers = {**self.auth, **kw.pop("headers", {})}
        with http.stream(method, url, headers=headers, **kw) as r:
            ctype = r.headers.get("content-type", "")
            # A watch stream is left open-ended: its status is what we check.
            text = "" if ctype.startswith(NDJSON) else r.read().decode(errors="replace")
            self.requests += 1
            self.statuses[r.status_code] += 1
            if r.status_code >= 500:
                body = kw.get("content", b"")
                shown = body[:300] if isinstance(body, bytes | str) else body
                self.failures.append(
                    f"{method} {url} params={kw.get('params')} body={shown!r} -> "
                    f"{r.status_code} {text[:300]}"
                )
            elif r.status_code < 300 and ctype.startswith("application/json"):
                json.loads(text)  # a success answer is always a JSON document
            # Only object routes count: users and invites are not objects of API_KINDS.
            segments = httpx.URL(url).path.strip("/").split("/")
            if r.status_code == 201 and segments[-1] in PLURALS:
                self.created += 1
            if method == "DELETE" and r.status_code == 200 and segments[-2:-1] != ["users"]:
                self.removed += 1
            return r.status_code


def from_case(case: Any, base_url: str) -> tuple[str, str, dict[str, Any]]:
    """A schemathesis case as ``(method, url, httpx kwargs)``."""
    kw = case.as_transport_kwargs(base_url=base_url)
    out: dict[str, Any] = {
        "headers": {k: v for k, v in kw.get("headers", {}).items() if k != "Connection"},
        "params": kw.get("params") or None,
    }
    if "json" in kw:
        out["content"] = json.dumps(kw["json"]).encode()
    elif kw.get("data") is not None:
        data = kw["data"]
        out["content"] = data if isinstance(data, bytes) else str(data).encode()
    return kw["method"], kw["url"], out


SCHEMA_SHARDS = 4
PARTS = [f"schema-{i}" for i in range(SCHEMA_SHARDS)] + ["bodies"]


def fuzz_schema(spec: dict[str, Any], url: str, rec: Record, shard: int) -> int:
    """The shard's documented operations (every ``SCHEMA_SHARDS``-th one), in both generation
    modes, with random and aimed path parameters."""
    schema = schemathesis.openapi.from_dict(spec)
    operations = [r.ok() for r in schema.get_all_operations()][shard::SCHEMA_SHARDS]
    assert operations, f"shard {shard} of {SCHEMA_SHARDS} has no operations"
    n = examples()
    runs = 0
    with httpx.Client(timeout=30) as http:
        for op in operations:
            aimed: dict[str, Any] = {}
            if "{namespace}" in op.path:
                aimed["namespace"] = "default"
            if "{name}" in op.path:
                aimed["name"] = TARGET
            variants: list[tuple[schemathesis.GenerationMode, dict[str, Any] | None]] = [
                (schemathesis.GenerationMode.POSITIVE, None),
                (schemathesis.GenerationMode.NEGATIVE, None),
            ]
            if aimed:
                variants.append((schemathesis.GenerationMode.POSITIVE, aimed))
            for mode, path_parameters in variants:
                strategy = op.as_strategy(generation_mode=mode, path_parameters=path_parameters)

                @fuzz_settings(n)
                @given(case=strategy)
                def run(case: Any) -> None:
                    method, target, kw = from_case(case, url)
                    rec.send(http, method, target, **kw)

                try:
                    run()
                except Unsatisfiable:
                    continue  # e.g. NEGATIVE for an operation without inputs: nothing to break
                runs += 1
    return runs


# -- bodies the OpenAPI document cannot describe ------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=10,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_manifest(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A valid sample manifest with one field (or a new one) set to an arbitrary JSON value."""
    plural = draw(st.sampled_from(sorted(SAMPLES)))
    name = draw(st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True) | st.text(max_size=70))
    obj = sample(plural, "x")
    obj["metadata"]["name"] = name
    path = draw(st.sampled_from(_paths(obj)[1:]))
    value = draw(json_values)
    target: Any = obj
    for part in path[:-1]:
        target = target[part]
    if draw(st.booleans()) and isinstance(target, dict):
        target[draw(st.text(min_size=1, max_size=10))] = value  # an unknown field
    else:
        target[path[-1]] = value
    return plural, obj


raw_bodies = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    st.sampled_from([b"{", b"[1,2", b'{"kind": "Job", "metadata": {"name": "a"', b"null",
                     b"[]", b"1e400", b'"\\ud800"', b"- a\n- b", b"a: [1, 2", b"key: @x",
                     b"---\na: 1\n---\nb: 2", b"!!python/object:os.system {}", b"\xff\xfe",
                     b'{"a": NaN}', b'{"a": Infinity}', b"&a [*a, *a]"]),
)
content_types = st.sampled_from([
    "application/json", "application/yaml", "text/plain", "", "application/octet-stream",
    "application/json-patch+json", "application/merge-patch+json", "multipart/form-data",
    "application/json; charset=latin-1", "text/yaml",
])


def collection(plural: str, namespace: str = "default") -> str:
    info = next(k for k in API_KINDS if k.plural == plural)
    return f"/{namespace}/{plural}" if info.namespaced else f"/{plural}"


def fuzz_bodies(url: str, rec: Record) -> None:
    n = examples() * 8
    with httpx.Client(base_url=url, timeout=30) as http:

        @fuzz_settings(n)
        @given(item=mutated_manifest(), method=st.sampled_from(["POST", "PUT", "PUT-ITEM"]),
               as_yaml=st.booleans())
        def wrong_types(item: tuple[str, dict[str, Any]], method: str, as_yaml: bool) -> None:
            plural, obj = item
            path = collection(plural)
            if method == "PUT-ITEM":
                method, path = "PUT", f"{path}/{TARGET}"
                if isinstance(obj.get("metadata"), dict):
                    obj["metadata"]["name"] = TARGET
            body = yaml.safe_dump(obj).encode() if as_yaml else json.dumps(obj).encode()
            ctype = "application/yaml" if as_yaml else "application/json"
            rec.send(http, method, path, content=body, headers={"Content-Type": ctype})

        @fuzz_settings(n)
        @given(plural=st.sampled_from(sorted(SAMPLES)), body=raw_bodies, ctype=content_types,
               method=st.sampled_from(["POST", "PUT", "PUT-ITEM", "PATCH"]))
        def malformed(plural: str, body: bytes, ctype: str, method: str) -> None:
            path = collection(plural)
            if method in ("PUT-ITEM", "PATCH"):
                path = f"{path}/{TARGET}"
                method = "PUT" if method == "PUT-ITEM" else method
            rec.send(http, method, path, content=body, headers={"Content-Type": ctype})

        @fuzz_settings(n)
        @given(patch=st.one_of(
            json_values,
            st.lists(st.fixed_dictionaries(
                {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "x"]),
                 "path": st.sampled_from(["/spec/replicas", "/metadata/name", "/kind", "",
                                          "/metadata/annotations/a", "/spec/-", "/status",
                                          "/metadata/resourceVersion", "/spec/resources/cpus",
                                          "~1", "/metadata/labels/x~0y"])},
                optional={"value": json_values, "from": st.sampled_from(["/spec", "/metadata"])},
            ), max_size=4),
        ), plural=st.sampled_from(sorted(SAMPLES)),
           ctype=st.sampled_from(["application/json-patch+json", "application/merge-patch+json",
                                  "application/json"]))
        def patches(patch: Any, plural: str, ctype: str) -> None:
            path = f"{collection(plural)}/{TARGET}"
            rec.send(http, "PATCH", path, content=json.dumps(patch).encode(),
                     headers={"Content-Type": ctype})

        wrong_types()
        malformed()
        patches()

        # Around the body limit: just under, at and over it, declared honestly or not.
        for size in (MAX_BODY - 512, MAX_BODY, MAX_BODY + 1, 3 * MAX_BODY):
            big = job_with_annotation(f"big-{size}", size)
            rec.send(http, "POST", "/default/jobs", content=big,
                     headers={"Content-Type": "application/json"})
            rec.send(http, "PUT", f"/default/jobs/{TARGET}", content=big.replace(
                f"big-{size}".encode(), TARGET.encode()), headers={"Content-Type": "text/plain"})
            rec.send(http, "POST", "/default/jobs", content=b"x" * size,
                     headers={"Content-Type": "application/yaml"})
            rec.send(http, "PATCH", f"/default/jobs/{TARGET}", content=b"[" + b" " * size + b"]",
                     headers={"Content-Type": "application/json-patch+json"})


#: Inputs of the hostile-tenant probe (issue 26): each must be refused with a 4xx naming the
#: field, and none stored.
INJECTED = "web\nglobal\n    lua-load /tmp/evil.lua"
PROBES: list[tuple[str, dict[str, Any]]] = [
    ("services", {"metadata": {"name": INJECTED}}),
    ("services", {"metadata": {"name": "web\n"}}),
    ("jobs", {"metadata": {"name": "../../etc"}}),
    ("jobs", {"metadata": {"namespace": "default\n"}}),
    ("jobs", {"metadata": {"labels": {"app": "web\nglobal"}}}),
    ("jobs", {"metadata": {"labels": {"app\n": "web"}}}),
    ("jobs", {"metadata": {"annotations": {"note": "a\u0000b"}}}),
    ("jobs", {"spec": {"ports": [0]}}),
    ("jobs", {"spec": {"ports": [70000]}}),
    ("services", {"spec": {"ports": [{"port": 0}]}}),
    ("services", {"spec": {"ports": [{"port": 80, "targetPort": 65536}]}}),
    ("services", {"spec": {"selector": {"app": "web\nlua-load /tmp/x"}}}),
]


def probe_inputs(url: str, rec: Record) -> list[str]:
    """Send the probe's inputs and random HTTP methods; returns what was not refused."""
    wrong: list[str] = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for i, (plural, change) in enumerate(PROBES):
            obj = sample(plural, f"probe-{i}")  # a name of its own: never refused as a 409
            for part, values in change.items():
                obj[part] = {**obj.get(part, {}), **values}
            code = rec.send(http, "POST", collection(plural), content=json.dumps(obj).encode(),
                            headers={"Content-Type": "application/json"})
            if not 400 <= code < 500:
                wrong.append(f"POST {plural} {change} -> {code}")
        for i in range(40):  # each a new method: the metrics' method label must stay bounded
            rec.send(http, f"FUZZ{i}X", "/default/jobs")
    return wrong


def method_labels() -> set[str]:
    from prometheus_client import REGISTRY

    return {s.labels["method"] for m in REGISTRY.collect() if m.name == "skyshift_api_requests"
            for s in m.samples if "method" in s.labels}


def job_with_annotation(name: str, size: int) -> bytes:
    """A valid Job manifest padded to exactly ``size`` bytes with one annotation."""
    obj = sample("jobs", name)
    obj["metadata"]["annotations"] = {"pad": ""}
    empty = len(json.dumps(obj).encode())
    obj["metadata"]["annotations"]["pad"] = "p" * max(0, size - empty)
    return json.dumps(obj).encode()


async def stored_objects(store: ObjectStore) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for info in API_KINDS:
        out += (await store.list(info.plural)).items
    return out


async def seed_targets(url: str, auth: dict[str, str]) -> None:
    """One object named ``fuzz-target`` of every kind, for the aimed runs."""
    async with httpx.AsyncClient(base_url=url, timeout=30, headers=auth) as c:
        for plural in SAMPLES:
            obj = sample(plural, TARGET)
            r = await c.post(collection(plural), json=obj)
            assert r.status_code == 201, r.text


@pytest.mark.parametrize("part", PARTS)
async def test_fuzzed_requests_never_5xx_and_store_stays_consistent(
    part: str, make_secure_api: MakeSecureApi, auth_home: Path, store: ObjectStore
) -> None:
    # Production's configuration: auth on (requests carry the admin's token, so the fuzzer
    # gets past it to the object routes; the auth routes are fuzzed too).
    app = make_secure_api(lifecycle=RecordingLifecycle())
    async with uvicorn_server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            auth = bearer(await token_for(c, "admin", admin_password(auth_home)))
            r = await c.get("/openapi.json")
            assert r.status_code == 200
            spec: dict[str, Any] = r.json()
        await add_sample_clusters(store)  # named by the Link and Endpoints samples
        await seed_targets(url, auth)
        await fuzz_and_check(part, url, spec, auth, store)


async def fuzz_and_check(
    part: str, url: str, spec: dict[str, Any], auth: dict[str, str], store: ObjectStore
) -> None:
    before = await stored_objects(store)

    rec = Record(auth=auth)
    t0 = time.monotonic()
    runs, not_refused = 0, list[str]()
    if part == "bodies":
        await asyncio.to_thread(fuzz_bodies, url, rec)
        not_refused = await asyncio.to_thread(probe_inputs, url, rec)
        assert rec.requests > 0
    else:
        runs = await asyncio.to_thread(fuzz_schema, spec, url, rec, int(part.split("-")[1]))
        assert runs > 0 and rec.requests > 0, "schemathesis generated nothing"
    schema_requests = rec.requests if runs else 0
    elapsed = time.monotonic() - t0

    after = await stored_objects(store)
    invalid: list[str] = []
    for obj in after:
        try:
            parse_object(obj)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            invalid.append(f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}: {exc}")
    expected = len(before) + rec.created - rec.removed
    print(f"\n[fuzz {part}] {rec.requests} requests in {elapsed:.0f}s ({schema_requests} from "
          f"schemathesis over {runs} operation/mode runs, the rest from our body strategies)")
    print(f"[fuzz {part}] statuses {dict(sorted(rec.statuses.items()))}")
    print(f"[fuzz {part}] objects before {len(before)}, created {rec.created}, "
          f"removed {rec.removed}, "
          f"after {len(after)} (expected {expected}); invalid in etcd {len(invalid)}; "
          f"5xx {len(rec.failures)}")
    assert not rec.failures, "\n".join(rec.failures[:10])
    assert not not_refused, not_refused
    from skyshift.api.metrics import METHODS

    assert method_labels() <= METHODS | {"OTHER"}, method_labels() - METHODS
    assert not invalid, invalid[:10]
    assert len(after) == expected
