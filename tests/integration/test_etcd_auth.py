"""etcd with client auth on: the store logs in, and nobody without the password gets in.

Runs a private etcd with a 1 s token TTL, so the token expiring (and etcd forgetting every token
when it restarts) happens within the test: the store must log in again without the caller
noticing, watches included.
"""

from __future__ import annotations

import asyncio
import json
import stat
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skyshift.config import EtcdCredentials, etcd_credentials, etcd_password_file
from skyshift.devstack.components import StackError
from skyshift.devstack.etcd_auth import ensure_auth
from skyshift.store import ObjectStore, StoreError
from skyshift.store.auth import enable_auth
from tests.fixtures.etcd import EtcdServer, _new_server

pytestmark = pytest.mark.integration

ROOT = EtcdCredentials("root", "correct-horse-" + uuid.uuid4().hex)


class ShortTokenEtcd(EtcdServer):
    def _args(self) -> list[str]:
        return [*super()._args(), "--auth-token-ttl=1"]


@pytest.fixture
def auth_etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    plain = _new_server(tmp_path, "auth")
    server = ShortTokenEtcd(plain.binary, plain.data_dir)
    server.start()
    asyncio.run(enable_auth(server.endpoint, ROOT))
    try:
        yield server
    finally:
        server.stop()


def job(name: str) -> dict[str, object]:
    return {"kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": {}}


def prefix() -> str:
    return f"/t-{uuid.uuid4().hex[:8]}"


def gateway_range(endpoint: str, token: str | None = None) -> tuple[int, str]:
    """What ``etcdctl get /`` without credentials does, through etcd's HTTP gateway."""
    req = urllib.request.Request(
        f"http://{endpoint}/v3/kv/range", data=json.dumps({"key": "Lw==", "range_end": "MA=="})
        .encode(), headers={"Authorization": token} if token else {},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_enable_auth_is_idempotent_and_keeps_its_password(auth_etcd: EtcdServer) -> None:
    assert await enable_auth(auth_etcd.endpoint, ROOT) is False
    with pytest.raises(StoreError, match="rejected the user and password"):
        await enable_auth(auth_etcd.endpoint, EtcdCredentials("root", "guess"))


async def test_without_or_with_a_wrong_password_nothing_is_readable(
    auth_etcd: EtcdServer,
) -> None:
    async with ObjectStore(auth_etcd.endpoint, prefix(), credentials=ROOT) as store:
        await store.create("jobs", job("secret"))
    no_creds = ObjectStore(auth_etcd.endpoint, prefix(), timeout=2)
    with pytest.raises(StoreError, match="requires authentication"):
        await no_creds.list("jobs")
    await no_creds.close()
    wrong = ObjectStore(auth_etcd.endpoint, prefix(), timeout=2,
                        credentials=EtcdCredentials("root", "guess"))  # fmt: skip
    with pytest.raises(StoreError, match="rejected the user and password"):
        await wrong.connect()
    await wrong.close()
    status, body = gateway_range(auth_etcd.endpoint)
    assert status != 200 and "user name is empty" in body


async def test_credentials_come_from_the_environment(
    auth_etcd: EtcdServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    password_file = tmp_path / "etcd-password"
    password_file.write_text(ROOT.password + "\n")
    monkeypatch.setenv("SKYSHIFT_ETCD_USER", "root")
    monkeypatch.setenv("SKYSHIFT_ETCD_PASSWORD_FILE", str(password_file))
    assert etcd_credentials() == ROOT
    async with ObjectStore(auth_etcd.endpoint, prefix()) as store:
        created = await store.create("jobs", job("a"))
        assert (await store.get("jobs", "a", "default")) == created


def test_half_or_unreadable_credentials_are_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYSHIFT_ETCD_USER", "root")
    monkeypatch.delenv("SKYSHIFT_ETCD_PASSWORD_FILE", raising=False)
    with pytest.raises(ValueError, match="set both"):
        etcd_credentials()
    monkeypatch.setenv("SKYSHIFT_ETCD_PASSWORD_FILE", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="cannot read the etcd password file"):
        etcd_credentials()
    monkeypatch.delenv("SKYSHIFT_ETCD_USER")
    monkeypatch.delenv("SKYSHIFT_ETCD_PASSWORD_FILE")
    assert etcd_credentials() is None


async def test_an_expired_token_is_renewed_for_reads_writes_and_watches(
    auth_etcd: EtcdServer,
) -> None:
    async with ObjectStore(auth_etcd.endpoint, prefix(), credentials=ROOT) as store:
        await store.create("jobs", job("a"))
        start = await store.revision()
        await asyncio.sleep(2.5)  # the token (TTL 1 s) has expired
        assert (await store.get("jobs", "a", "default"))["metadata"]["name"] == "a"
        await asyncio.sleep(2.5)
        await store.create("jobs", job("b"))  # a write refused for its token is retried once
        await asyncio.sleep(2.5)
        # a watch opened with a stale token would be cancelled by etcd without a word
        events = store.watch("jobs", from_revision=start)
        event = await asyncio.wait_for(anext(events), 10)
        assert event.object["metadata"]["name"] == "b"
        await events.aclose()


async def test_store_and_watch_go_on_across_an_etcd_restart(auth_etcd: EtcdServer) -> None:
    watcher = ObjectStore(auth_etcd.endpoint, prefix(), credentials=ROOT, timeout=10)
    async with watcher, ObjectStore(
        auth_etcd.endpoint, watcher.prefix, credentials=ROOT, timeout=10
    ) as writer:
        events = watcher.watch("jobs", from_revision=await watcher.revision())
        await writer.create("jobs", job("before"))
        assert (await asyncio.wait_for(anext(events), 10)).object["metadata"]["name"] == "before"
        auth_etcd.stop()
        auth_etcd.start()  # every token is forgotten
        await writer.create("jobs", job("after"))
        # the watcher itself made no call: its watch resumes with a new login on its own
        event = await asyncio.wait_for(anext(events), 8)
        assert event.object["metadata"]["name"] == "after"
        assert [o["metadata"]["name"] for o in (await watcher.list("jobs")).items] == [
            "after", "before",
        ]
        await events.aclose()


def test_skyshift_up_turns_auth_on_once_with_a_private_password(
    etcd_factory: Callable[[], EtcdServer], tmp_path: Path
) -> None:
    server = etcd_factory()
    home = tmp_path / "home"
    line = ensure_auth(home, server.endpoint)
    path = etcd_password_file(home)
    assert "client auth enabled" in line and str(path) in line
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert ensure_auth(home, server.endpoint) == ""  # a second `up`: nothing to do
    status, body = gateway_range(server.endpoint)
    assert status != 200 and "user name is empty" in body
    path.write_text("not-the-password\n")  # lost and regenerated, say
    with pytest.raises(StackError, match="down --purge"):
        ensure_auth(home, server.endpoint)
