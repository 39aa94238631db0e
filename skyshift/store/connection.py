"""The store's one aetcd client: made on first use, logged in when etcd's auth is on, and
replaced when etcd forgets the login token.

etcd's simple tokens live in the etcd process: a restart forgets them all, and one unused for
``--auth-token-ttl`` seconds expires. A call with such a token is refused before anything is
applied (``auth_expired``), so the store retires the client and retries on a new one, which logs
in again. The retired client is closed a little later rather than at once, so calls already in
flight on it (which may have been accepted) still get their answers; its watches then end and
resume on the new client from their last revision.

Credentials come from :func:`skyshift.config.etcd_credentials` (``SKYSHIFT_ETCD_USER``,
``SKYSHIFT_ETCD_PASSWORD_FILE``) and TLS from :func:`skyshift.config.etcd_tls`
(``SKYSHIFT_ETCD_TLS_CA``, ``_CERT``, ``_KEY``; none set: plaintext) unless given. Logging in
to an etcd whose auth is off works without a token, as etcd's own client does.
"""

from __future__ import annotations

import asyncio
import contextlib

import aetcd

from skyshift.config import EtcdCredentials, EtcdTls, etcd_credentials, etcd_tls
from skyshift.store.errors import StoreError, Unavailable
from skyshift.store.transport import auth_not_enabled, make_client, translate, wait_ready


class Connection:
    def __init__(
        self,
        endpoints: str,
        timeout: float,
        credentials: EtcdCredentials | None = None,
        tls: EtcdTls | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.timeout = timeout
        self._credentials = credentials
        self._tls = tls
        self._settings_read = False
        self._client: aetcd.Client | None = None
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def authenticated(self) -> bool:
        """Whether the current client logs in (only such a client's token can expire)."""
        return self._credentials is not None

    async def ready(self, wait: float) -> aetcd.Client:
        """The connected client, once its channel is up (at most ``wait`` seconds)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        delay = 0.05
        plain = False  # logged in to an etcd whose auth is off: go on without a token
        while True:
            client = self._current(plain)
            try:
                await client.connect()  # with credentials, the login: etcd must be up
                break
            except Exception as exc:
                self._drop(client, later=False)  # aetcd would not reuse the failed channel
                if self._credentials is not None and auth_not_enabled(exc) and not plain:
                    plain = True
                    continue
                err = translate(exc, "connect", self.timeout)
                if not isinstance(err, Unavailable) or loop.time() + delay >= deadline:
                    raise err from exc
            await asyncio.sleep(delay)  # nothing was sent yet: waiting out a restart is safe
            delay = min(delay * 2, 0.5)
        await wait_ready(client, self.endpoints, max(deadline - loop.time(), 0.01))
        return client

    def _current(self, plain: bool) -> aetcd.Client:
        if self._client is None:
            self._read_settings()
            credentials = None if plain else self._credentials
            self._client = make_client(self.endpoints, self.timeout, credentials, self._tls)
        return self._client

    def _read_settings(self) -> None:
        """Credentials and TLS not given come from the environment (read once)."""
        if self._settings_read:
            return
        try:
            if self._credentials is None:
                self._credentials = etcd_credentials()
            if self._tls is None:
                self._tls = etcd_tls()
        except ValueError as exc:
            raise StoreError(f"etcd settings: {exc}") from None
        self._settings_read = True

    def retire(self, client: aetcd.Client) -> None:
        """``client``'s token was refused: the next call gets a new client (a new login)."""
        self._drop(client, later=True)

    def _drop(self, client: aetcd.Client, later: bool) -> None:
        if self._client is not client:
            return  # another call retired it already
        self._client = None
        task = asyncio.get_running_loop().create_task(
            self._close(client, self.timeout if later else 0.0)
        )
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, client: aetcd.Client, after: float) -> None:
        try:
            await asyncio.sleep(after)
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def close(self) -> None:
        """Close the client and any retired one; running watches end."""
        client, self._client = self._client, None
        for task in list(self._closing):
            task.cancel()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        if client is not None:
            await client.close()
