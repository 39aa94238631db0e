"""TLS to etcd: an aetcd client whose channel is a secure one.

aetcd 1.0's ``Client`` takes no CA, certificate or key and its ``connect`` always opens an
insecure channel. :class:`TlsClient` keeps everything else of aetcd's client (its calls, its
watcher, ``close``) and replaces only ``connect``: it opens ``grpc.aio.secure_channel`` with the
CA of etcd's certificate and a client certificate (etcd's ``--client-cert-auth`` asks for one),
logs in when given a user, and puts the stubs of :mod:`aetcd.rpc` on that channel as aetcd's own
``connect`` would. The files come from :func:`skyshift.config.etcd_tls`
(``SKYSHIFT_ETCD_TLS_CA``, ``_CERT``, ``_KEY``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aetcd
import grpc
from aetcd import rpc
from aetcd.watcher import Watcher

from skyshift.config import ETCD_TLS_ENV, EtcdCredentials, EtcdTls
from skyshift.store.errors import StoreError


def channel_credentials(tls: EtcdTls) -> grpc.ChannelCredentials:
    """gRPC credentials from the PEM files; StoreError naming the variable of one unreadable."""
    pem: dict[str, bytes] = {}
    for what in ("ca", "cert", "key"):
        path = getattr(tls, what)
        try:
            pem[what] = path.read_bytes()
        except OSError as exc:
            raise StoreError(
                f"{ETCD_TLS_ENV[what]}={path}: cannot read it: {exc.strerror or exc}"
            ) from None
    return grpc.ssl_channel_credentials(
        root_certificates=pem["ca"], private_key=pem["key"], certificate_chain=pem["cert"]
    )


class TlsClient(aetcd.Client):  # type: ignore[misc]  # aetcd has no type hints
    """An aetcd client over TLS; ``host`` and ``port`` as aetcd takes them (the target is
    ``f"{host}:{port}"``)."""

    channel: grpc.aio.Channel | None  # aetcd's attribute: None until connected, and once closed

    def __init__(
        self,
        host: str,
        port: int,
        credentials: grpc.ChannelCredentials,
        login: EtcdCredentials | None,
        timeout: float,
        options: dict[str, Any],
    ) -> None:
        super().__init__(host=host, port=port, timeout=timeout, options=options,
                         username=login.user if login else None,
                         password=login.password if login else None)  # fmt: skip
        self._target = f"{host}:{port}"
        self._tls_credentials = credentials
        self._login = login
        self._call_timeout = timeout
        self._channel_options = list(options.items())
        self._connecting = asyncio.Lock()

    async def connect(self) -> None:
        """Open the secure channel and log in (once; concurrent callers wait for it)."""
        if self._connected.is_set():  # aetcd's calls each ask first
            return
        async with self._connecting:
            if self._connected.is_set():
                return
            if self.channel is not None:  # an earlier attempt failed (its login, say)
                await self.channel.close()
            self.channel = grpc.aio.secure_channel(
                self._target, self._tls_credentials, options=self._channel_options
            )
            if self._login is not None:
                self.auth_stub = rpc.AuthStub(self.channel)
                answer = await self.auth_stub.Authenticate(
                    rpc.AuthenticateRequest(name=self._login.user, password=self._login.password),
                    timeout=self._call_timeout,
                )
                self.metadata = (("token", answer.token),)
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = Watcher(
                rpc.WatchStub(self.channel), timeout=self._call_timeout, metadata=self.metadata
            )
            self._connected.set()
