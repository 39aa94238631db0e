"""Objects the lifecycles create and delete themselves (pipeline steps, scheduled runs).

What the API does for a user, done by an activity: the same server-owned fields, the model's
validation, the etcd write, then the lifecycle's signal-with-start (:mod:`.starter`). Deleting
marks the object (``deletionTimestamp``) and tells its lifecycle, which tears it down.
"""

from __future__ import annotations

import copy
import uuid

from temporalio.client import Client

from skyshift.lifecycle import starter
from skyshift.models.base import Obj
from skyshift.models.meta import now_iso
from skyshift.models.registry import kind_info
from skyshift.store import NotFound, ObjectStore


def new_object(manifest: Obj) -> Obj:
    """``manifest`` with uid, creation time and generation set, validated by its kind's model."""
    info = kind_info(str(manifest["kind"]))
    meta = dict(manifest.get("metadata") or {})
    meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_iso(), generation=1,
                deletionTimestamp=None)
    data = {**manifest, "metadata": meta}
    data.pop("status", None)
    out: Obj = info.model.model_validate(data).model_dump(mode="json")
    return out


async def create_and_start(store: ObjectStore, client: Client, manifest: Obj) -> Obj:
    """Create the object (AlreadyExists propagates) and start its lifecycle."""
    info = kind_info(str(manifest["kind"]))
    created = await store.create(info.plural, new_object(manifest))
    await starter.ensure_lifecycle(client, created)
    return created


async def start_existing(client: Client, obj: Obj) -> None:
    """A retried create found its own object: make sure the lifecycle runs (idempotent)."""
    await starter.ensure_lifecycle(client, obj)


async def delete_object(store: ObjectStore, client: Client, plural: str, obj: Obj) -> bool:
    """Mark ``obj`` deleting (if it still has its uid) and tell its lifecycle; False: gone."""
    meta = obj.get("metadata") or {}
    uid = meta.get("uid")

    def mark(current: Obj) -> Obj | None:
        if (current.get("metadata") or {}).get("uid") != uid:
            raise NotFound(f"{plural} {meta.get('name')} was replaced")
        if current["metadata"].get("deletionTimestamp"):
            return None
        out = copy.deepcopy(current)
        out["metadata"]["deletionTimestamp"] = now_iso()
        status = out.get("status")
        if isinstance(status, dict) and "phase" in status:
            status["phase"] = "Deleting"
        return out

    try:
        marked = await store.guaranteed_update(plural, str(meta.get("name")),
                                               meta.get("namespace"), mark)
    except NotFound:
        return False
    await starter.notify_deleting(client, marked)
    return True
