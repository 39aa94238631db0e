"""ObjectStore.list against a real etcd: namespaces, label selectors, consistent pagination."""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.store import Expired, InvalidArgument, InvalidSelector, ObjectStore

pytestmark = pytest.mark.integration


def obj(name: str, namespace: str | None = "default", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": "Job", "metadata": meta, "spec": {}}


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


async def test_list_namespaces_and_order(store: ObjectStore) -> None:
    for ns, name in [("b", "x"), ("a", "z"), ("a", "y"), ("c", "w")]:
        await store.create("jobs", obj(name, ns))
    await store.create("clusters", obj("k", None))

    everything = await store.list("jobs")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everything.items] == [
        ("a", "y"),
        ("a", "z"),
        ("b", "x"),
        ("c", "w"),
    ]
    assert everything.continue_token is None
    assert int(everything.resource_version) >= max(
        int(i["metadata"]["resourceVersion"]) for i in everything.items
    )
    assert names((await store.list("jobs", "a")).items) == ["y", "z"]
    assert (await store.list("jobs", "nothing-here")).items == []
    assert names((await store.list("clusters")).items) == ["k"]


async def test_namespace_prefix_does_not_leak_into_similar_names(store: ObjectStore) -> None:
    await store.create("jobs", obj("x", "team"))
    await store.create("jobs", obj("y", "team-b"))
    assert names((await store.list("jobs", "team")).items) == ["x"]


async def test_label_selectors(store: ObjectStore) -> None:
    await store.create("jobs", obj("web1", app="web", env="prod"))
    await store.create("jobs", obj("web2", app="web", env="dev"))
    await store.create("jobs", obj("db", app="db", env="prod"))
    await store.create("jobs", obj("plain"))

    async def sel(s: Any) -> list[str]:
        return names((await store.list("jobs", "default", label_selector=s)).items)

    assert await sel("app=web") == ["web1", "web2"]
    assert await sel({"app": "web", "env": "prod"}) == ["web1"]
    assert await sel("env in (prod),app!=web") == ["db"]
    assert await sel("!app") == ["plain"]
    assert await sel("app notin (web)") == ["db", "plain"]
    assert await sel("") == ["db", "plain", "web1", "web2"]
    with pytest.raises(InvalidSelector):
        await sel("app in ()")


async def test_pagination_returns_every_item_once(store: ObjectStore) -> None:
    for i in range(23):
        await store.create("jobs", obj(f"j{i:02d}"))
    seen: list[str] = []
    token = None
    pages = 0
    rvs = set()
    while True:
        page = await store.list("jobs", limit=5, continue_token=token)
        assert len(page.items) <= 5
        seen += names(page.items)
        rvs.add(page.resource_version)
        pages += 1
        token = page.continue_token
        if token is None:
            break
    assert seen == [f"j{i:02d}" for i in range(23)]
    assert pages == 5
    assert len(rvs) == 1  # every page is read at the first page's snapshot


async def test_pages_are_consistent_while_objects_change(store: ObjectStore) -> None:
    for i in range(10):
        await store.create("jobs", obj(f"j{i}"))
    first = await store.list("jobs", limit=4)
    assert names(first.items) == ["j0", "j1", "j2", "j3"]
    snapshot = first.resource_version

    # Changes after the first page must not show up in later pages.
    await store.create("jobs", obj("j45"))  # sorts after the first page
    await store.delete("jobs", "j7", "default")
    j8 = await store.get("jobs", "j8", "default")
    await store.update("jobs", {**j8, "spec": {"changed": True}})

    rest: list[dict[str, Any]] = []
    token = first.continue_token
    while token:
        page = await store.list("jobs", limit=4, continue_token=token)
        assert page.resource_version == snapshot
        rest += page.items
        token = page.continue_token
    assert names(rest) == ["j4", "j5", "j6", "j7", "j8", "j9"]
    j8_then = next(i for i in rest if i["metadata"]["name"] == "j8")
    assert j8_then["spec"] == {}
    assert names((await store.list("jobs")).items) == [
        "j0", "j1", "j2", "j3", "j4", "j45", "j5", "j6", "j8", "j9",
    ]  # fmt: skip


async def test_limit_counts_matching_items(store: ObjectStore) -> None:
    for i in range(12):
        await store.create("jobs", obj(f"j{i:02d}", parity="even" if i % 2 == 0 else "odd"))
    seen: list[str] = []
    token = None
    while True:
        page = await store.list("jobs", label_selector="parity=odd", limit=2, continue_token=token)
        assert len(page.items) <= 2
        seen += names(page.items)
        token = page.continue_token
        if token is None:
            break
    assert seen == [f"j{i:02d}" for i in range(1, 12, 2)]


async def test_continue_token_from_a_compacted_snapshot_expires(store: ObjectStore) -> None:
    for i in range(4):
        await store.create("jobs", obj(f"j{i}"))
    first = await store.list("jobs", limit=2)
    assert first.continue_token
    await store.create("jobs", obj("later"))
    now = await store.revision()
    await store.compact(now)
    with pytest.raises(Expired, match="list again without the continue token") as info:
        await store.list("jobs", limit=2, continue_token=first.continue_token)
    assert info.value.compact_revision >= now
    assert "was compacted" in str(info.value)


async def test_bad_continue_tokens_are_rejected(store: ObjectStore) -> None:
    for i in range(3):
        await store.create("jobs", obj(f"j{i}", "a"))
    page = await store.list("jobs", "a", limit=1)
    assert page.continue_token
    with pytest.raises(InvalidArgument, match="does not belong"):
        await store.list("jobs", "b", continue_token=page.continue_token)
    with pytest.raises(InvalidArgument, match="invalid continue token"):
        await store.list("jobs", continue_token="not-a-token!")
