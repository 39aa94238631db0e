"""Audit records older than the retention are pruned, in one etcd request, newer ones stay
(real etcd). Before this, the trail grew without bound: one record per mutation, forever."""

from __future__ import annotations

import time

from skyshift.api.auth.audit import AUDIT, AuditLog, record_name
from skyshift.store import ObjectStore

DAY_NS = 86400 * 10**9


async def add(store: ObjectStore, at_ns: int, user: str) -> None:
    await store.create(AUDIT, {"kind": "AuditRecord",
                               "metadata": {"name": record_name(at_ns)}, "user": user})


async def users(store: ObjectStore) -> list[str]:
    return [r["user"] for r in (await store.list(AUDIT)).items]


async def test_prune_removes_only_records_past_retention(store: ObjectStore) -> None:
    now = time.time_ns()
    for age_days, user in ((200, "ancient"), (31, "old"), (29, "recent"), (0, "today")):
        await add(store, now - age_days * DAY_NS, user)
    assert await users(store) == ["today", "recent", "old", "ancient"]  # newest first

    assert await AuditLog(store, retention_days=30).prune(now) == 2
    assert await users(store) == ["today", "recent"]
    assert await AuditLog(store, retention_days=30).prune(now) == 0  # nothing left to prune


async def test_zero_retention_keeps_everything(store: ObjectStore) -> None:
    now = time.time_ns()
    await add(store, now - 5000 * DAY_NS, "ancient")
    assert await AuditLog(store, retention_days=0).prune(now) == 0
    assert await users(store) == ["ancient"]


async def test_write_prunes_at_most_once_per_interval(store: ObjectStore) -> None:
    now = time.time_ns()
    await add(store, now - 100 * DAY_NS, "old")
    log = AuditLog(store, retention_days=30)
    await log.write({"user": "alice", "action": "create"})  # first write prunes
    assert await users(store) == ["alice"]
    await add(store, now - 100 * DAY_NS, "old-again")
    await log.write({"user": "bob", "action": "create"})  # within PRUNE_EVERY: no prune
    assert await users(store) == ["bob", "alice", "old-again"]


async def test_delete_from_leaves_other_kinds_alone(store: ObjectStore) -> None:
    await store.create("clusters", {"kind": "Cluster", "metadata": {"name": "zzz"}})
    await add(store, time.time_ns() - 400 * DAY_NS, "ancient")
    assert await store.delete_from(AUDIT, "0") == 1
    assert [c["metadata"]["name"] for c in (await store.list("clusters")).items] == ["zzz"]
