"""ObjectStore: Kubernetes-style objects in etcd, with resourceVersion compare-and-swap.

Every component that reads or writes desired state or observed status goes through this class
(the API server, activities, the skylet). It is kind-agnostic: objects are plain dicts, keyed by
(plural, namespace, name). Each write is one etcd transaction whose compare is the
precondition (key absent for create, ``mod_revision == resourceVersion`` for updates and
deletes), so concurrent writers never overwrite each other silently.

aetcd's high-level KV helpers cannot range at a revision or with a limit and drop the
transaction header (the new revision), so KV calls go to aetcd's gRPC stubs directly; aetcd
still owns the channel and the watch stream (see ``transport`` and ``watch``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, NoReturn, TypeVar

import aetcd
from aetcd import rpc

from skyshift.store.codec import (
    Obj,
    decode,
    decode_continue,
    describe,
    encode,
    encode_continue,
    identity,
    labels_of,
    list_prefix,
    normalize_prefix,
    object_key,
    parse_revision,
    prefix_range_end,
)
from skyshift.store.errors import (
    AlreadyExists,
    Conflict,
    Expired,
    InvalidArgument,
    NotFound,
    StoreError,
    TooLarge,
    Unavailable,
)
from skyshift.store.selectors import Selector, parse_selector
from skyshift.store.transport import make_client, translate, wait_ready
from skyshift.store.watch import WatchEvent, watch_stream

T = TypeVar("T")
SelectorArg = str | Mapping[str, str] | Selector | None


@dataclass
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None


def _exists(key: bytes) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.VERSION, result=rpc.Compare.GREATER, version=0)


def _absent(key: bytes) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.VERSION, result=rpc.Compare.EQUAL, version=0)


def _mod_is(key: bytes, revision: int) -> Any:
    return rpc.Compare(
        key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=revision
    )


def _put(key: bytes, value: bytes) -> Any:
    return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value))


def _get(key: bytes) -> Any:
    return rpc.RequestOp(request_range=rpc.RangeRequest(key=key))


def _delete(key: bytes) -> Any:
    return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key, prev_kv=True))


class ObjectStore:
    """Async etcd object store; use ``async with ObjectStore(...) as store``."""

    #: etcd's ``--max-request-bytes`` default; larger writes are refused before sending.
    max_request_bytes: ClassVar[int] = 1_572_864
    #: Compare-and-swap rounds ``guaranteed_update`` tries before giving up with Conflict.
    update_attempts: ClassVar[int] = 64
    #: A broken watch reconnects for up to ``timeout * watch_reconnect_attempts`` seconds.
    watch_reconnect_attempts: ClassVar[int] = 3
    #: Keys fetched per etcd range request while listing.
    list_batch: ClassVar[int] = 500

    def __init__(
        self, endpoints: str = "127.0.0.1:23790", prefix: str = "/skyshift", timeout: float = 5.0
    ) -> None:
        self.endpoints = endpoints
        self.prefix = normalize_prefix(prefix)
        self.timeout = timeout
        self._client: aetcd.Client | None = None
        self._closed = False

    # -- connection ---------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the channel and wait until etcd answers; Unavailable after ``timeout``."""
        self._closed = False
        await self._ready()

    async def close(self) -> None:
        """Close the channel; running watches end, later calls raise StoreError."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> ObjectStore:
        await self.connect()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _ready(self, wait: float | None = None) -> aetcd.Client:
        """The connected aetcd client (created on first use), once its channel is up.

        Waits at most ``wait`` seconds (default: the store timeout) for the connection.
        """
        if self._closed:
            raise StoreError("the ObjectStore is closed")
        if self._client is None:
            self._client = make_client(self.endpoints, self.timeout)
        client = self._client
        try:
            await client.connect()
        except Exception as exc:
            raise translate(exc, "connect", self.timeout) from exc
        await wait_ready(client, self.endpoints, self.timeout if wait is None else wait)
        return client

    async def _call(
        self, what: str, fn: Callable[[aetcd.Client], Awaitable[T]], *, retry: bool
    ) -> T:
        """Run one RPC; reads (``retry``) are retried while etcd is unavailable, up to timeout.

        Writes are never retried: after a lost connection their outcome is unknown, and a blind
        retry could turn a successful create into AlreadyExists or apply a mutation twice.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        delay = 0.05
        while True:
            client = await self._ready(max(deadline - loop.time(), 0.01))
            try:
                return await fn(client)
            except Exception as exc:
                err = translate(exc, what, self.timeout)
                if not (retry and isinstance(err, Unavailable) and loop.time() + delay < deadline):
                    if err is exc:
                        raise
                    raise err from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def _range(self, what: str, request: Any) -> Any:
        return await self._call(
            what,
            lambda c: c.kvstub.Range(request, timeout=self.timeout, metadata=c.metadata),
            retry=True,
        )

    async def _txn(
        self, what: str, compare: list[Any], success: list[Any], failure: list[Any]
    ) -> Any:
        request = rpc.TxnRequest(compare=compare, success=success, failure=failure)
        return await self._call(
            what,
            lambda c: c.kvstub.Txn(request, timeout=self.timeout, metadata=c.metadata),
            retry=False,
        )

    def _check_size(self, what: str, key: bytes, value: bytes) -> None:
        size = len(value) + 3 * len(key) + 256  # key appears in compare, put and get
        if size > self.max_request_bytes:
            raise TooLarge(
                f"{what}: the object is {len(value)} bytes encoded; etcd accepts at most "
                f"{self.max_request_bytes} bytes per request"
            )

    # -- reads --------------------------------------------------------------------------------

    async def revision(self) -> int:
        """etcd's current revision (also a cheap health check); Unavailable if unreachable."""
        request = rpc.RangeRequest(key=f"{self.prefix}/".encode(), count_only=True)
        resp = await self._range("read revision", request)
        return int(resp.header.revision)

    async def get(self, plural: str, name: str, namespace: str | None = None) -> Obj:
        ident = describe(plural, name, namespace)
        key = object_key(self.prefix, plural, name, namespace)
        resp = await self._range(f"get {ident}", rpc.RangeRequest(key=key))
        if not resp.kvs:
            raise NotFound(f"{ident} not found")
        kv = resp.kvs[0]
        return decode(kv.value, kv.mod_revision)

    async def list(
        self,
        plural: str,
        namespace: str | None = None,
        *,
        label_selector: SelectorArg = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListResult:
        """Objects sorted by key, all read at one snapshot revision (also across pages).

        ``limit`` counts matching items. With a selector, the last page may come back empty
        when the keys after the previous page all failed to match.
        """
        selector = parse_selector(label_selector)
        prefix = list_prefix(self.prefix, plural, namespace)
        start, end, snapshot = prefix, prefix_range_end(prefix), 0
        if continue_token:
            last, snapshot = decode_continue(continue_token, prefix)
            start = last + b"\0"
        want = limit if limit is not None and limit > 0 else None
        what = f"list {plural}" + (f" in {namespace}" if namespace else "")
        items: list[Obj] = []
        last_key: bytes | None = None
        more = False
        while True:
            batch = self.list_batch
            if want is not None and selector.empty:
                batch = min(batch, want - len(items))
            request = rpc.RangeRequest(key=start, range_end=end, limit=batch, revision=snapshot)
            try:
                resp = await self._range(what, request)
            except Expired as exc:
                raise await self._expired_list(what, snapshot) from exc
            snapshot = snapshot or int(resp.header.revision)
            full = False
            for kv in resp.kvs:
                if want is not None and len(items) >= want:
                    full = True
                    break
                last_key = kv.key
                obj = decode(kv.value, kv.mod_revision)
                if selector.matches(labels_of(obj)):
                    items.append(obj)
            more = full or bool(resp.more)
            if last_key is not None:
                start = last_key + b"\0"
            if full or not resp.more or (want is not None and len(items) >= want):
                break
        token = encode_continue(last_key, snapshot) if more and last_key is not None else None
        return ListResult(items=items, resource_version=str(snapshot), continue_token=token)

    async def _expired_list(self, what: str, snapshot: int) -> Expired:
        oldest = await self.compacted_revision()
        return Expired(
            f"{what}: the continue token is too old: revision {snapshot} was compacted (oldest "
            f"available {oldest}); list again without the continue token",
            oldest,
        )

    async def compacted_revision(self) -> int:
        """The revision etcd last compacted at (0 if never): older revisions are gone.

        etcd has no call for this; a watch from revision 1 on a never-written key is refused
        with the compact revision in its response.
        """
        client = await self._ready()
        probe = f"{self.prefix}/\0compaction-probe".encode()
        watch = None
        try:
            watch = await client.watch(probe, start_revision=1)
            async with asyncio.timeout(self.timeout):
                async for _ in watch:
                    break
        except aetcd.RevisionCompactedError as exc:
            return int(exc.compacted_revision)
        except TimeoutError:
            return 0
        except Exception as exc:
            raise translate(exc, "read compacted revision", self.timeout) from exc
        finally:
            if watch is not None:
                await watch.cancel()
        return 0

    def watch(
        self,
        plural: str,
        namespace: str | None = None,
        *,
        name: str | None = None,
        from_revision: str | int | None = None,
        label_selector: SelectorArg = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Changes after ``from_revision`` (None: after the watch starts), in order, once each.

        Survives etcd restarts (resuming from the last delivered revision); raises Expired
        when the revision was compacted and Unavailable when etcd stays away too long.
        With a selector, objects entering or leaving it arrive as ADDED or DELETED.
        """
        selector = parse_selector(label_selector)
        start = parse_revision(from_revision, "from_revision")
        if name is not None:
            key, range_end = object_key(self.prefix, plural, name, namespace), None
            what = f"watch {describe(plural, name, namespace)}"
        else:
            key = list_prefix(self.prefix, plural, namespace)
            range_end = prefix_range_end(key)
            what = f"watch {plural}" + (f" in {namespace}" if namespace else "")
        return watch_stream(self, what, key, range_end, start, selector)

    # -- writes -------------------------------------------------------------------------------

    async def create(self, plural: str, obj: Obj) -> Obj:
        """Store a new object; AlreadyExists (nothing written) if the name is taken."""
        name, namespace = identity(obj)
        ident = describe(plural, name, namespace)
        key, value = object_key(self.prefix, plural, name, namespace), encode(obj)
        self._check_size(f"create {ident}", key, value)
        resp = await self._txn(f"create {ident}", [_absent(key)], [_put(key, value)], [])
        if not resp.succeeded:
            raise AlreadyExists(f"{ident} already exists")
        return decode(value, resp.header.revision)

    async def update(self, plural: str, obj: Obj, *, expected_rv: str | None = None) -> Obj:
        """Replace an existing object, if its resourceVersion still is ``expected_rv``.

        ``expected_rv`` defaults to ``obj.metadata.resourceVersion``; when both are None
        the update is unconditional (but still NotFound if the object does not exist).
        """
        name, namespace = identity(obj)
        ident = describe(plural, name, namespace)
        raw_rv = expected_rv if expected_rv is not None else obj["metadata"].get("resourceVersion")
        rv = parse_revision(raw_rv)
        key, value = object_key(self.prefix, plural, name, namespace), encode(obj)
        self._check_size(f"update {ident}", key, value)
        compare = [_exists(key)] + ([_mod_is(key, rv)] if rv is not None else [])
        resp = await self._txn(f"update {ident}", compare, [_put(key, value)], [_get(key)])
        if not resp.succeeded:
            self._precondition_failed(resp, ident, rv)
        return decode(value, resp.header.revision)

    async def delete(
        self,
        plural: str,
        name: str,
        namespace: str | None = None,
        *,
        expected_rv: str | None = None,
    ) -> Obj:
        """Remove an object and return its last state (resourceVersion = the delete revision)."""
        ident = describe(plural, name, namespace)
        key = object_key(self.prefix, plural, name, namespace)
        rv = parse_revision(expected_rv)
        compare = [_exists(key)] + ([_mod_is(key, rv)] if rv is not None else [])
        resp = await self._txn(f"delete {ident}", compare, [_delete(key)], [_get(key)])
        if not resp.succeeded:
            self._precondition_failed(resp, ident, rv)
        prev = resp.responses[0].response_delete_range.prev_kvs[0]
        return decode(prev.value, resp.header.revision)

    async def guaranteed_update(
        self,
        plural: str,
        name: str,
        namespace: str | None,
        mutate: Callable[[Obj], Obj | None],
    ) -> Obj:
        """Read-modify-write until the compare-and-swap lands.

        ``mutate`` gets a fresh copy of the current object and returns the new one, or None
        for "no change" (nothing is written and the current object is returned). It may run
        several times, so it must be a pure function of its argument.
        """
        ident = describe(plural, name, namespace)
        key = object_key(self.prefix, plural, name, namespace)
        resp = await self._range(f"get {ident}", rpc.RangeRequest(key=key))
        if not resp.kvs:
            raise NotFound(f"{ident} not found")
        kv = resp.kvs[0]
        for attempt in range(self.update_attempts):
            current = decode(kv.value, kv.mod_revision)
            new = mutate(decode(kv.value, kv.mod_revision))
            if new is None:
                return current
            if identity(new) != (name, namespace or None):
                raise InvalidArgument(f"guaranteed_update of {ident}: mutate renamed the object")
            value = encode(new)
            if value == kv.value:
                return current
            self._check_size(f"update {ident}", key, value)
            txn = await self._txn(
                f"update {ident}", [_mod_is(key, kv.mod_revision)], [_put(key, value)], [_get(key)]
            )
            if txn.succeeded:
                return decode(value, txn.header.revision)
            kvs = txn.responses[0].response_range.kvs
            if not kvs:
                raise NotFound(f"{ident} not found (deleted while updating)")
            kv = kvs[0]
            if attempt >= 3:  # heavy contention: spread the writers out a little
                await asyncio.sleep(random.uniform(0, 0.002 * attempt))
        raise Conflict(
            f"{ident}: gave up after {self.update_attempts} conflicting updates",
            current_resource_version=str(kv.mod_revision),
        )

    @staticmethod
    def _precondition_failed(resp: Any, ident: str, rv: int | None) -> NoReturn:
        kvs = resp.responses[0].response_range.kvs
        if not kvs:
            raise NotFound(f"{ident} not found")
        current = str(kvs[0].mod_revision)
        raise Conflict(
            f"{ident} has been modified: resourceVersion {rv} is stale (current {current}); "
            "read it again and retry",
            current_resource_version=current,
        )

    # -- maintenance --------------------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        """Drop history before ``revision`` (waits until applied); compacting twice is a no-op."""

        async def run(client: aetcd.Client) -> None:
            await client.kvstub.Compact(
                rpc.CompactionRequest(revision=revision, physical=True),
                timeout=self.timeout,
                metadata=client.metadata,
            )

        try:
            await self._call(f"compact at {revision}", run, retry=True)
        except Expired:
            return
