"""etcd serving TLS and requiring client certificates (``--client-cert-auth``): the store reads,
writes and watches over TLS with the files of ``SKYSHIFT_ETCD_TLS_*``, logs in on top of it, and a
plaintext client or one without a certificate gets nothing.

A private etcd with a CA, server and client certificates of
:func:`skyshift.devstack.temporal_pki.make_pki`, as ``skyshift up --ha`` makes for its members.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from skyshift.config import ETCD_TLS_ENV, EtcdCredentials, EtcdTls
from skyshift.devstack.etcd_auth import ensure_auth
from skyshift.devstack.temporal_pki import Pki, make_pki
from skyshift.store import ObjectStore, StoreError, Unavailable
from tests.fixtures.etcd import EtcdServer, _new_server

pytestmark = pytest.mark.integration


class TlsEtcd(EtcdServer):
    """The fixture's etcd on https client and peer URLs, both requiring client certificates."""

    pki: Pki

    def _args(self) -> list[str]:
        files = [str(self.pki.server_cert), str(self.pki.server_key), str(self.pki.ca)]
        tls = [f"--cert-file={files[0]}", f"--key-file={files[1]}",
               f"--trusted-ca-file={files[2]}", "--client-cert-auth"]  # fmt: skip
        tls += [a.replace("--", "--peer-", 1) for a in tls]
        return [a.replace("http://", "https://") for a in super()._args()] + tls

    def healthy(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        context.load_cert_chain(str(self.pki.client_cert), str(self.pki.client_key))
        url = f"https://{self.endpoint}/health"
        try:
            with urllib.request.urlopen(url, timeout=1, context=context) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, ValueError):
            return False


@pytest.fixture
def tls_etcd(tmp_path: Path) -> Iterator[TlsEtcd]:
    plain = _new_server(tmp_path, "tls")
    server = TlsEtcd(plain.binary, plain.data_dir)
    server.pki = make_pki(tmp_path / "pki", ca_name="test-etcd-ca")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def job(name: str) -> dict[str, object]:
    return {"kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": {}}


def prefix() -> str:
    return f"/t-{uuid.uuid4().hex[:8]}"


async def test_reads_writes_and_watches_over_tls(
    tls_etcd: TlsEtcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in tls_etcd.pki.etcd_tls().env().items():
        monkeypatch.setenv(name, value)
    async with ObjectStore(tls_etcd.endpoint, prefix(), timeout=5) as store:  # from the env
        events = store.watch("jobs", from_revision=await store.revision())
        created = await store.create("jobs", job("a"))
        assert (await store.get("jobs", "a", "default")) == created
        event = await asyncio.wait_for(anext(events), 10)
        assert event.object["metadata"]["name"] == "a"
        await events.aclose()


async def test_a_plaintext_client_or_one_without_a_certificate_is_refused(
    tls_etcd: TlsEtcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ETCD_TLS_ENV.values():
        monkeypatch.delenv(name, raising=False)
    plain = ObjectStore(tls_etcd.endpoint, prefix(), timeout=2)
    with pytest.raises(Unavailable):
        await plain.revision()
    await plain.close()
    no_cert = ssl.create_default_context(cafile=str(tls_etcd.pki.ca))
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"https://{tls_etcd.endpoint}/health", verify=no_cert, timeout=5)
    other = make_pki(tls_etcd.data_dir.parent / "other", ca_name="another-ca")
    stranger = ObjectStore(tls_etcd.endpoint, prefix(), timeout=2, tls=other.etcd_tls())
    with pytest.raises(Unavailable):  # a certificate of another CA, both ways
        await stranger.revision()
    await stranger.close()


def test_skyshift_up_turns_auth_on_over_tls(
    tls_etcd: TlsEtcd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SKYSHIFT_ETCD_USER", "SKYSHIFT_ETCD_PASSWORD_FILE"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    tls = tls_etcd.pki.etcd_tls()
    assert "client auth enabled" in ensure_auth(home, tls_etcd.endpoint, tls)
    password = (home / "auth" / "etcd-password").read_text().strip()

    async def names(login: EtcdCredentials | None) -> list[str]:
        async with ObjectStore(tls_etcd.endpoint, "/up", timeout=3, credentials=login,
                               tls=tls) as store:  # fmt: skip
            await store.create("jobs", job(uuid.uuid4().hex[:6]))
            return [o["metadata"]["name"] for o in (await store.list("jobs")).items]

    assert len(asyncio.run(names(EtcdCredentials("root", password)))) == 1
    # the certificate alone logs nobody in (its common name is no etcd user)
    with pytest.raises(StoreError, match=r"requires authentication|denied"):
        asyncio.run(names(None))


def test_settings_from_the_files_name_an_unreadable_one(tmp_path: Path) -> None:
    tls = EtcdTls(tmp_path / "ca.pem", tmp_path / "c.pem", tmp_path / "k.pem")
    store = ObjectStore("127.0.0.1:1", timeout=1, tls=tls)
    with pytest.raises(StoreError, match=r"SKYSHIFT_ETCD_TLS_CA=.*ca\.pem: cannot read it"):
        asyncio.run(store.connect())
