"""ObjectStore create/get/update/delete against a real etcd: resourceVersion and CAS."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from skyshift.store import (
    AlreadyExists,
    Conflict,
    InvalidArgument,
    NotFound,
    ObjectStore,
    StoreError,
    TooLarge,
    Unavailable,
)
from tests.fixtures.etcd import EtcdServer, free_port

pytestmark = pytest.mark.integration


def job(name: str, namespace: str | None = "default", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": name}}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"kind": "Job", "metadata": meta, "spec": dict(spec), "status": {}}


async def test_round_trip_with_resource_version(store: ObjectStore) -> None:
    created = await store.create("jobs", job("a", replicas=1))
    rv1 = created["metadata"]["resourceVersion"]
    assert isinstance(rv1, str) and int(rv1) > 0
    assert created["spec"] == {"replicas": 1}

    got = await store.get("jobs", "a", "default")
    assert got == created

    got["spec"]["replicas"] = 3
    updated = await store.update("jobs", got)
    rv2 = updated["metadata"]["resourceVersion"]
    assert int(rv2) > int(rv1)
    assert (await store.get("jobs", "a", "default"))["spec"]["replicas"] == 3
    assert await store.revision() >= int(rv2)

    deleted = await store.delete("jobs", "a", "default")
    assert deleted["spec"]["replicas"] == 3
    assert int(deleted["metadata"]["resourceVersion"]) > int(rv2)
    with pytest.raises(NotFound, match="jobs/default/a"):
        await store.get("jobs", "a", "default")


async def test_cluster_scoped_objects(store: ObjectStore) -> None:
    await store.create("clusters", job("c1", namespace=None))
    got = await store.get("clusters", "c1")
    assert "namespace" not in got["metadata"]
    with pytest.raises(NotFound, match="clusters/c2 not found"):
        await store.get("clusters", "c2")


async def test_create_does_not_mutate_the_callers_dict(store: ObjectStore) -> None:
    obj = job("m")
    obj["metadata"]["resourceVersion"] = "123"
    created = await store.create("jobs", obj)
    assert obj["metadata"]["resourceVersion"] == "123"
    assert created["metadata"]["resourceVersion"] != "123"


async def test_create_existing_name_leaves_value_unchanged(store: ObjectStore) -> None:
    first = await store.create("jobs", job("dup", image="one"))
    with pytest.raises(AlreadyExists, match="jobs/default/dup already exists"):
        await store.create("jobs", job("dup", image="two"))
    assert await store.get("jobs", "dup", "default") == first


async def test_stale_update_conflicts_with_current_rv(store: ObjectStore) -> None:
    v1 = await store.create("jobs", job("s", n=1))
    v2 = await store.update("jobs", {**v1, "spec": {"n": 2}})
    with pytest.raises(Conflict) as info:
        await store.update("jobs", {**v1, "spec": {"n": 3}})
    assert info.value.current_resource_version == v2["metadata"]["resourceVersion"]
    assert (await store.get("jobs", "s", "default"))["spec"] == {"n": 2}

    # expected_rv overrides the object's own resourceVersion
    with pytest.raises(Conflict):
        await store.update("jobs", v2, expected_rv=v1["metadata"]["resourceVersion"])
    v3 = await store.update(
        "jobs", {**v1, "spec": {"n": 4}}, expected_rv=v2["metadata"]["resourceVersion"]
    )
    assert v3["spec"] == {"n": 4}


async def test_unconditional_update_needs_an_existing_object(store: ObjectStore) -> None:
    obj = job("u")
    with pytest.raises(NotFound, match="jobs/default/u"):
        await store.update("jobs", obj)
    await store.create("jobs", obj)
    await store.update("jobs", {**obj, "spec": {"x": 1}})  # no resourceVersion: last write wins
    assert (await store.get("jobs", "u", "default"))["spec"] == {"x": 1}
    with pytest.raises(NotFound):
        await store.update("jobs", job("other"), expected_rv="5")


async def test_delete_precondition(store: ObjectStore) -> None:
    v1 = await store.create("jobs", job("d"))
    v2 = await store.update("jobs", v1)
    with pytest.raises(Conflict) as info:
        await store.delete("jobs", "d", "default", expected_rv=v1["metadata"]["resourceVersion"])
    assert info.value.current_resource_version == v2["metadata"]["resourceVersion"]
    await store.get("jobs", "d", "default")  # still there
    await store.delete("jobs", "d", "default", expected_rv=v2["metadata"]["resourceVersion"])
    with pytest.raises(NotFound):
        await store.delete("jobs", "d", "default")


async def test_concurrent_guaranteed_updates_all_land(store: ObjectStore) -> None:
    await store.create("jobs", job("counter", count=0))

    def increment(obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"]["count"] += 1
        return obj

    results = await asyncio.gather(
        *(store.guaranteed_update("jobs", "counter", "default", increment) for _ in range(20))
    )
    final = await store.get("jobs", "counter", "default")
    assert final["spec"]["count"] == 20
    assert sorted(r["spec"]["count"] for r in results) == list(range(1, 21))


async def test_guaranteed_updates_from_several_processes_all_land(
    store: ObjectStore, etcd_server: EtcdServer
) -> None:
    """Separate ObjectStores (like API replicas) really race on the compare-and-swap."""
    await store.create("jobs", job("shared", count=0))
    replicas = [ObjectStore(etcd_server.endpoint, prefix=store.prefix) for _ in range(4)]
    calls = 0

    def increment(obj: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        obj["spec"]["count"] += 1
        return obj

    try:
        await asyncio.gather(
            *(
                r.guaranteed_update("jobs", "shared", "default", increment)
                for r in replicas
                for _ in range(10)
            )
        )
    finally:
        for r in replicas:
            await r.close()
    assert (await store.get("jobs", "shared", "default"))["spec"]["count"] == 40
    assert calls >= 40  # conflicts between replicas were retried, none lost


async def test_concurrent_plain_updates_only_one_wins(store: ObjectStore) -> None:
    base = await store.create("jobs", job("race", n=0))
    outcomes = await asyncio.gather(
        *(store.update("jobs", {**base, "spec": {"n": i}}) for i in range(1, 11)),
        return_exceptions=True,
    )
    winners = [o for o in outcomes if isinstance(o, dict)]
    assert len(winners) == 1
    assert all(isinstance(o, Conflict) for o in outcomes if not isinstance(o, dict))
    assert await store.get("jobs", "race", "default") == winners[0]


async def test_guaranteed_update_no_change_does_not_write(store: ObjectStore) -> None:
    v1 = await store.create("jobs", job("same", n=1))
    assert await store.guaranteed_update("jobs", "same", "default", lambda o: None) == v1
    assert await store.guaranteed_update("jobs", "same", "default", lambda o: o) == v1
    assert (await store.get("jobs", "same", "default")) == v1
    with pytest.raises(NotFound):
        await store.guaranteed_update("jobs", "absent", "default", lambda o: o)


async def test_too_large_object_is_refused_clearly(store: ObjectStore) -> None:
    with pytest.raises(TooLarge, match="at most"):
        await store.create("jobs", job("big", blob="x" * 2_000_000))
    with pytest.raises(NotFound):
        await store.get("jobs", "big", "default")
    # Just under the client-side check, the server's own limit is surfaced the same way.
    limit = ObjectStore.max_request_bytes
    try:
        ObjectStore.max_request_bytes = 10_000_000
        with pytest.raises(TooLarge):
            await store.create("jobs", job("big", blob="x" * 1_600_000))
        with pytest.raises(TooLarge):
            await store.create("jobs", job("big", blob="x" * 3_000_000))
    finally:
        ObjectStore.max_request_bytes = limit
    fits = await store.create("jobs", job("big", blob="x" * 1_000_000))
    assert len(fits["spec"]["blob"]) == 1_000_000


@pytest.mark.parametrize(
    "obj",
    [
        {"metadata": {}},
        {"metadata": {"name": "a/b"}},
        {"metadata": {"name": "a", "namespace": "x/y"}},
        {"spec": {}},
    ],
)
async def test_malformed_objects_are_invalid_arguments(store: ObjectStore, obj: Any) -> None:
    with pytest.raises(InvalidArgument):
        await store.create("jobs", obj)


async def test_bad_resource_version_is_invalid_argument(store: ObjectStore) -> None:
    await store.create("jobs", job("rv"))
    with pytest.raises(InvalidArgument, match="resourceVersion"):
        await store.update("jobs", job("rv"), expected_rv="abc")


async def test_unreachable_etcd_is_unavailable() -> None:
    s = ObjectStore(f"127.0.0.1:{free_port()}", prefix="/nowhere", timeout=0.5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(Unavailable, match="unreachable"):
        await s.revision()
    assert loop.time() - started < 3
    with pytest.raises(Unavailable):
        await s.connect()
    await s.close()
    with pytest.raises(StoreError, match="closed"):
        await s.get("jobs", "x")


async def test_foreign_values_raise_store_errors(store: ObjectStore) -> None:
    import aetcd

    host, port = store.endpoints.rsplit(":", 1)
    async with aetcd.Client(host=host, port=int(port)) as raw:
        await raw.put(f"{store.prefix}/jobs/default/junk".encode(), b"not json")
    with pytest.raises(StoreError, match="not a JSON object"):
        await store.get("jobs", "junk", "default")
    with pytest.raises(StoreError, match="not a JSON object"):
        await store.list("jobs")


async def test_calls_wait_out_a_short_etcd_restart(
    etcd_factory: Callable[[], EtcdServer],
) -> None:
    server = etcd_factory()
    async with ObjectStore(server.endpoint, prefix="/restart", timeout=10) as s:
        await s.create("jobs", job("a"))
        server.stop()
        restart = asyncio.create_task(asyncio.to_thread(server.start))
        # Issued while etcd is down: both wait for the connection instead of failing.
        got, created = await asyncio.gather(
            s.get("jobs", "a", "default"), s.create("jobs", job("b"))
        )
        await restart
        assert got["metadata"]["name"] == "a"
        assert created["metadata"]["name"] == "b"
