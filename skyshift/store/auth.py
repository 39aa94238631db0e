"""Turn on etcd's client auth with a root user (what ``etcdctl user add root; etcdctl auth
enable`` does), so only holders of the password can read or write SkyShift's objects.

``skyshift up`` calls it for the embedded etcd on every start: it is idempotent, and a password
that no longer matches is an error rather than something silently "fixed".
"""

from __future__ import annotations

from typing import Any

import grpc
from aetcd import rpc

from skyshift.config import EtcdCredentials, EtcdTls
from skyshift.store.errors import StoreError
from skyshift.store.transport import auth_not_enabled, make_client, translate

ROOT = "root"


async def enable_auth(
    endpoints: str,
    credentials: EtcdCredentials,
    timeout: float = 10.0,
    tls: EtcdTls | None = None,
) -> bool:
    """Make sure etcd's auth is on and ``credentials`` log in as its root user (over TLS with
    ``tls``'s client certificate when given).

    Returns True when auth was turned on now, False when it already was with these credentials.
    Raises StoreError when auth is on and the credentials are refused, or etcd is unreachable.
    """
    if credentials.user != ROOT:
        raise StoreError(f"etcd auth is set up for the user {ROOT!r}, not {credentials.user!r}")
    client = make_client(endpoints, timeout, credentials, tls)
    try:
        await client.connect()  # logs in: works only once auth is on
        return False
    except Exception as exc:
        if not auth_not_enabled(exc):
            raise translate(exc, f"log in to etcd at {endpoints} as {ROOT}", timeout) from exc
    finally:
        await client.close()
    plain = make_client(endpoints, timeout, tls=tls)
    try:
        await plain.connect()
        stub = rpc.AuthStub(plain.channel)
        await _call(stub.RoleAdd(rpc.AuthRoleAddRequest(name=ROOT), timeout=timeout),
                    ok="role name already exists")  # fmt: skip
        added = await _call(
            stub.UserAdd(
                rpc.AuthUserAddRequest(name=ROOT, password=credentials.password), timeout=timeout
            ),
            ok="user name already exists",
        )
        if not added:  # left by an earlier attempt, maybe with another password: ours wins
            await stub.UserChangePassword(
                rpc.AuthUserChangePasswordRequest(name=ROOT, password=credentials.password),
                timeout=timeout,
            )
        await stub.UserGrantRole(rpc.AuthUserGrantRoleRequest(user=ROOT, role=ROOT),
                                 timeout=timeout)  # fmt: skip
        await stub.AuthEnable(rpc.AuthEnableRequest(), timeout=timeout)
    except StoreError:
        raise
    except Exception as exc:
        raise translate(exc, f"enable auth on etcd at {endpoints}", timeout) from exc
    finally:
        await plain.close()
    return True


async def _call(call: Any, ok: str) -> bool:
    """Await an auth RPC; False when it failed only because of ``ok`` (already done)."""
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        if ok in (exc.details() or ""):
            return False
        raise
    return True
