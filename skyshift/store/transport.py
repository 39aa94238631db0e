"""The aetcd connection under the store, and the one place gRPC errors become store errors.

aetcd owns the gRPC channel and its stubs (watches open their own streams on it, see
:mod:`skyshift.store.etcdwatch`); this module decides how the
channel behaves (unbounded receive size for big lists, fast reconnects after an etcd restart,
keepalive so a silently dead peer breaks watches) and how long an operation may wait for etcd
before the caller gets :class:`Unavailable`. Nothing outside ``skyshift.store`` sees aetcd/grpc.
It also builds the few etcd request messages the store sends (compares and ops of a txn).

With etcd's client auth on, the client logs in with a user and password
(:func:`skyshift.config.etcd_credentials`) when it connects and sends the token it got with every
call. etcd forgets tokens when it restarts and after ``--auth-token-ttl`` seconds unused, so
:func:`auth_expired` tells the store when to log in again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aetcd
import grpc
from aetcd import rpc

from skyshift.config import EtcdCredentials, EtcdTls, parse_endpoints
from skyshift.store.errors import Expired, StoreError, TooLarge, Unavailable
from skyshift.store.tls import TlsClient, channel_credentials

CHANNEL_OPTIONS: dict[str, Any] = {
    # A list page can legitimately exceed grpc's 4 MiB default.
    "grpc.max_receive_message_length": -1,
    "grpc.max_send_message_length": -1,
    # grpc's default backoff grows to 2 minutes: an etcd restart would stall watches that long.
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
    # Only ping while calls (watches) are open: etcd's enforcement policy (min 5 s, no pings
    # without streams) would otherwise close the connection with too_many_pings.
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.keepalive_permit_without_calls": 0,
    "grpc.http2.max_pings_without_data": 0,
}


def make_client(
    endpoints: str,
    timeout: float,
    credentials: EtcdCredentials | None = None,
    tls: EtcdTls | None = None,
) -> aetcd.Client:
    """An unconnected aetcd client for ``host:port[,host:port...]``; with ``credentials`` its
    ``connect()`` logs in (etcd's Authenticate) and every call carries the token; with ``tls``
    its channel is TLS with that client certificate (:class:`~skyshift.store.tls.TlsClient`).

    Several endpoints become a gRPC ``ipv4:a:p,b:q`` target (pick-first fails over in order),
    which needs IPv4 literals; aetcd formats its target as ``f"{host}:{port}"``. Over TLS, gRPC
    checks one name for the whole channel: the first endpoint's host, which every member's
    certificate must then name.
    """
    try:
        pairs = parse_endpoints(endpoints)
    except ValueError as exc:
        raise StoreError(f"bad etcd endpoints {endpoints!r}: {exc}") from exc
    options = dict(CHANNEL_OPTIONS)
    if len(pairs) == 1:
        host, port = pairs[0]
    else:
        hosts = [h for h, _ in pairs]
        if not all(_is_ipv4(h) for h in hosts):
            raise StoreError(f"several etcd endpoints must be IPv4 addresses: {endpoints!r}")
        joined = ",".join(f"{h}:{p}" for h, p in pairs[:-1])
        host, port = f"ipv4:{joined},{pairs[-1][0]}", pairs[-1][1]
    if tls is not None:
        if len(pairs) > 1:
            options["grpc.ssl_target_name_override"] = pairs[0][0]
        return TlsClient(host, port, channel_credentials(tls), credentials, timeout, options)
    user, password = (credentials.user, credentials.password) if credentials else (None, None)
    return aetcd.Client(host=host, port=port, username=user, password=password, timeout=timeout,
                        options=options)  # fmt: skip


def _is_ipv4(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts)


async def wait_ready(client: aetcd.Client, endpoints: str, timeout: float) -> None:
    """Wait until the channel is connected; Unavailable after ``timeout`` seconds."""
    channel = client.channel
    if channel is None:
        raise StoreError("etcd client is closed")
    if channel.get_state(try_to_connect=True) == grpc.ChannelConnectivity.READY:
        return
    try:
        await asyncio.wait_for(channel.channel_ready(), timeout)
    except TimeoutError:
        raise Unavailable(
            f"etcd at {endpoints} is unreachable (connection attempts timed out)"
        ) from None


def _status(exc: BaseException) -> tuple[Any, str]:
    """(grpc status code or None, details) of a raw grpc or aetcd-wrapped error."""
    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, grpc.aio.AioRpcError):
            return candidate.code(), candidate.details() or ""
    return None, str(exc)


def auth_expired(exc: BaseException) -> bool:
    """etcd no longer knows the client's token (it restarted, or the token's TTL ran out); the
    request was refused before anything was applied, so logging in again and retrying is safe."""
    code, details = _status(exc)
    return code == grpc.StatusCode.UNAUTHENTICATED or "invalid auth token" in details


def never_sent(exc: BaseException) -> bool:
    """The RPC failed before it reached etcd: gRPC found no connected address to send it on
    (etcd down or restarting while the channel still looked ready). Nothing was applied, so
    even a write may be sent again."""
    code, details = _status(exc)
    return code == grpc.StatusCode.UNAVAILABLE and "failed to connect to all addresses" in details


def auth_not_enabled(exc: BaseException) -> bool:
    """The client logged in to an etcd whose auth is off (it then works without a token)."""
    return "authentication is not enabled" in _status(exc)[1]


def _auth_error(what: str, details: str) -> StoreError | None:
    if "user name is empty" in details:
        return StoreError(
            f"{what}: etcd requires authentication; set SKYSHIFT_ETCD_USER and "
            "SKYSHIFT_ETCD_PASSWORD_FILE"
        )
    if "authentication failed" in details:
        return StoreError(
            f"{what}: etcd rejected the user and password (SKYSHIFT_ETCD_USER, "
            "SKYSHIFT_ETCD_PASSWORD_FILE)"
        )
    if "permission denied" in details:
        return StoreError(f"{what}: etcd denied the request to this user ({details})")
    return None


def is_compacted(exc: BaseException) -> bool:
    code, details = _status(exc)
    return code == grpc.StatusCode.OUT_OF_RANGE and "compacted" in details


def translate(exc: BaseException, what: str, timeout: float) -> StoreError:
    """Map an aetcd/grpc error raised while doing ``what`` to the store's own error."""
    if isinstance(exc, StoreError):
        return exc
    code, details = _status(exc)
    if (
        isinstance(exc, aetcd.ConnectionTimeoutError | TimeoutError)
        or code == grpc.StatusCode.DEADLINE_EXCEEDED
    ):
        return Unavailable(f"{what}: etcd did not answer within {timeout:g}s")
    if isinstance(exc, aetcd.ConnectionFailedError) or code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
    ):
        return Unavailable(f"{what}: etcd is unavailable ({details})")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED or "request is too large" in details:
        return TooLarge(f"{what}: request too large for etcd ({details})")
    if is_compacted(exc):
        return Expired(f"{what}: revision was compacted")
    if auth_expired(exc):  # what is left after the store logged in again once
        return Unavailable(f"{what}: etcd refused the login token ({details})")
    auth = _auth_error(what, details)
    if auth is not None:
        return auth
    return StoreError(f"{what}: etcd error: {details or exc!r}")


# -- etcd request builders (protobuf messages of aetcd's generated rpc module) ---------------


def cmp_exists(key: bytes) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.VERSION, result=rpc.Compare.GREATER, version=0)


def cmp_absent(key: bytes) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.VERSION, result=rpc.Compare.EQUAL, version=0)


def cmp_mod(key: bytes, revision: int) -> Any:
    return rpc.Compare(
        key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=revision
    )


def op_put(key: bytes, value: bytes) -> Any:
    return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value))


def op_get(key: bytes) -> Any:
    return rpc.RequestOp(request_range=rpc.RangeRequest(key=key))


def op_delete(key: bytes) -> Any:
    return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key, prev_kv=True))
