"""ObjectStore: Kubernetes-style objects in etcd, with resourceVersion compare-and-swap.

Every component that reads or writes desired state or observed status goes through this class
(the API server, activities, the skylet). It is kind-agnostic: objects are plain dicts, keyed by
(plural, namespace, name). Each write is one etcd transaction whose compare is the
precondition (key absent for create, ``mod_revision == resourceVersion`` for updates and
deletes), so concurrent writers never overwrite each other silently.

aetcd's high-level KV helpers cannot range at a revision or with a limit and drop the
transaction header (the new revision), so KV calls go to aetcd's gRPC stubs directly; aetcd
still owns the channel and the watch stream (see ``transport`` and ``watch``), and
``connection`` keeps the client logged in when etcd's auth is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, ClassVar, NoReturn, TypeVar

import aetcd
from aetcd import rpc

from skyshift.config import EtcdCredentials, EtcdTls
from skyshift.models.base import Obj
from skyshift.store.codec import (
    decode,
    describe,
    encode,
    identity,
    list_prefix,
    normalize_prefix,
    object_key,
    parse_revision,
    prefix_range_end,
)
from skyshift.store.connection import Connection
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
from skyshift.store.etcdwatch import EtcdWatch
from skyshift.store.listing import ListResult, list_objects
from skyshift.store.selectors import Selector, parse_selector
from skyshift.store.transport import (
    auth_expired,
    cmp_absent,
    cmp_exists,
    cmp_mod,
    never_sent,
    op_delete,
    op_get,
    op_put,
    translate,
)
from skyshift.store.watch import WatchEvent, watch_stream

T = TypeVar("T")
SelectorArg = str | Mapping[str, str] | Selector | None


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
        self,
        endpoints: str = "127.0.0.1:23790",
        prefix: str = "/skyshift",
        timeout: float = 5.0,
        credentials: EtcdCredentials | None = None,
        tls: EtcdTls | None = None,
    ) -> None:
        """``credentials`` default to :func:`skyshift.config.etcd_credentials` (none: no auth),
        ``tls`` to :func:`skyshift.config.etcd_tls` (none: plaintext)."""
        self.endpoints = endpoints
        self.prefix = normalize_prefix(prefix)
        self.timeout = timeout
        self._conn = Connection(endpoints, timeout, credentials, tls)
        self._closed = False
        self._key_locks: dict[bytes, tuple[asyncio.Lock, list[int]]] = {}

    # -- connection ---------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the channel and wait until etcd answers; Unavailable after ``timeout``."""
        self._closed = False
        await self._ready()

    async def close(self) -> None:
        """Close the channel; running watches end, later calls raise StoreError."""
        self._closed = True
        await self._conn.close()

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
        return await self._conn.ready(self.timeout if wait is None else wait)

    async def watch_client(self) -> aetcd.Client:
        """The client to open a watch on. With auth, a read first proves the token is current
        (logging in again if not): etcd answers a watch made with a stale token by cancelling it,
        and the watch would only retry with the same token until it gave up."""
        if self._conn.authenticated:
            await self.revision()
        return await self._ready()

    async def _call(
        self, what: str, fn: Callable[[aetcd.Client], Awaitable[T]], *, retry: bool
    ) -> T:
        """Run one RPC; reads (``retry``) are retried while etcd is unavailable, up to timeout.

        Writes are retried only when gRPC never sent them (no connected address): after a lost
        connection their outcome is unknown, and a blind retry could turn a successful create
        into AlreadyExists or apply a mutation twice.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        delay = 0.05
        login_again = True  # once per call, when etcd forgot the token (refused, not applied)
        while True:
            client = await self._ready(max(deadline - loop.time(), 0.01))
            try:
                return await fn(client)
            except Exception as exc:
                if login_again and self._conn.authenticated and auth_expired(exc):
                    login_again = False
                    self._conn.retire(client)
                    continue
                err = translate(exc, what, self.timeout)
                again = retry or never_sent(exc)
                if not (again and isinstance(err, Unavailable) and loop.time() + delay < deadline):
                    if err is exc:
                        raise
                    raise err from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def read_range(self, what: str, request: Any) -> Any:
        """One Range request, retried while etcd is unavailable (up to the timeout)."""
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
        resp = await self.read_range("read revision", request)
        return int(resp.header.revision)

    async def get(self, plural: str, name: str, namespace: str | None = None) -> Obj:
        ident = describe(plural, name, namespace)
        key = object_key(self.prefix, plural, name, namespace)
        resp = await self.read_range(f"get {ident}", rpc.RangeRequest(key=key))
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
        return await list_objects(
            self, plural, namespace, parse_selector(label_selector), limit, continue_token
        )

    async def compacted_revision(self) -> int:
        """The revision etcd last compacted at (0 if never): older revisions are gone.

        etcd has no call for this; a watch from revision 1 on a never-written key is refused
        with the compact revision in its response.
        """
        client = await self._ready()
        probe = f"{self.prefix}/\0compaction-probe".encode()
        what = "read compacted revision"
        watch = None
        try:  # etcd confirms the watch first, then cancels it with the compact revision
            watch = await EtcdWatch.open(client, what, probe, None, 1, self.timeout)
            async with asyncio.timeout(min(self.timeout, 1.0)):
                await watch.next()
        except Expired as exc:
            return exc.compact_revision
        except TimeoutError:
            return 0
        except Exception as exc:
            raise translate(exc, what, self.timeout) from exc
        finally:
            if watch is not None:
                watch.cancel()
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
        resp = await self._txn(f"create {ident}", [cmp_absent(key)], [op_put(key, value)], [])
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
        compare = [cmp_exists(key)] + ([cmp_mod(key, rv)] if rv is not None else [])
        resp = await self._txn(f"update {ident}", compare, [op_put(key, value)], [op_get(key)])
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
        compare = [cmp_exists(key)] + ([cmp_mod(key, rv)] if rv is not None else [])
        resp = await self._txn(f"delete {ident}", compare, [op_delete(key)], [op_get(key)])
        if not resp.succeeded:
            self._precondition_failed(resp, ident, rv)
        prev = resp.responses[0].response_delete_range.prev_kvs[0]
        return decode(prev.value, resp.header.revision)

    async def delete_from(self, plural: str, first_name: str, namespace: str | None = None) -> int:
        """Remove every object of ``plural`` (in ``namespace``) whose name sorts at or after
        ``first_name``, in one request; returns how many were removed. For records named so that
        key order is age order (the audit trail), this is how old ones are pruned."""
        start = object_key(self.prefix, plural, first_name, namespace)
        end = prefix_range_end(list_prefix(self.prefix, plural, namespace))
        request = rpc.DeleteRangeRequest(key=start, range_end=end)
        resp = await self._call(
            f"prune {plural}",
            lambda c: c.kvstub.DeleteRange(request, timeout=self.timeout, metadata=c.metadata),
            retry=True,
        )
        return int(resp.deleted)

    async def delete_prefix(self, plural: str, name_prefix: str,
                            namespace: str | None = None) -> int:
        """Remove every object of ``plural`` (in ``namespace``) whose name starts with
        ``name_prefix``, in one request; returns how many were removed."""
        start = object_key(self.prefix, plural, name_prefix, namespace)
        request = rpc.DeleteRangeRequest(key=start, range_end=prefix_range_end(start))
        resp = await self._call(
            f"delete {describe(plural, name_prefix + '*', namespace)}",
            lambda c: c.kvstub.DeleteRange(request, timeout=self.timeout, metadata=c.metadata),
            retry=True,
        )
        return int(resp.deleted)

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
        key = object_key(self.prefix, plural, name, namespace)
        async with self._key_lock(key):
            ident = describe(plural, name, namespace)
            return await self._read_modify_write(key, ident, (name, namespace or None), mutate)

    @contextlib.asynccontextmanager
    async def _key_lock(self, key: bytes) -> AsyncIterator[None]:
        """Queue this process's read-modify-writes of one key (FIFO).

        Without it, concurrent updaters in one process collide on every round and the unlucky
        ones starve; with it, compare-and-swap conflicts only come from other processes.
        """
        lock, users = self._key_locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._key_locks[key]

    async def _read_modify_write(
        self,
        key: bytes,
        ident: str,
        name_ns: tuple[str, str | None],
        mutate: Callable[[Obj], Obj | None],
    ) -> Obj:
        resp = await self.read_range(f"get {ident}", rpc.RangeRequest(key=key))
        if not resp.kvs:
            raise NotFound(f"{ident} not found")
        kv = resp.kvs[0]
        for attempt in range(self.update_attempts):
            current = decode(kv.value, kv.mod_revision)
            new = mutate(decode(kv.value, kv.mod_revision))
            if new is None:
                return current
            if identity(new) != name_ns:
                raise InvalidArgument(f"guaranteed_update of {ident}: mutate renamed the object")
            value = encode(new)
            if value == kv.value:
                return current
            self._check_size(f"update {ident}", key, value)
            compare = [cmp_mod(key, kv.mod_revision)]
            txn = await self._txn(f"update {ident}", compare, [op_put(key, value)], [op_get(key)])
            if txn.succeeded:
                return decode(value, txn.header.revision)
            kvs = txn.responses[0].response_range.kvs
            if not kvs:
                raise NotFound(f"{ident} not found (deleted while updating)")
            kv = kvs[0]
            # Exponential backoff with full jitter: without it, writers hammering one key keep
            # colliding and an unlucky one can lose every round.
            await asyncio.sleep(random.uniform(0, min(0.0005 * 2**attempt, 0.05)))
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
