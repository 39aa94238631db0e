"""TLS to etcd comes from SKYSHIFT_ETCD_TLS_CA, _CERT and _KEY: all three or none, and a clear
error naming the variable otherwise (docs/production.md, "Certificates and secrets")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skyshift.config import ETCD_TLS_ENV, EtcdTls, etcd_tls
from skyshift.devstack.temporal_pki import make_pki
from skyshift.store import ObjectStore, StoreError
from skyshift.store.tls import TlsClient, channel_credentials
from skyshift.store.transport import make_client


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ETCD_TLS_ENV.values():
        monkeypatch.delenv(name, raising=False)


def test_none_set_means_plaintext() -> None:
    assert etcd_tls() is None
    assert not isinstance(make_client("127.0.0.1:2379", 1.0), TlsClient)


def test_all_three_give_the_files() -> None:
    env = {"SKYSHIFT_ETCD_TLS_CA": "/c/ca.pem", "SKYSHIFT_ETCD_TLS_CERT": "/c/client.pem",
           "SKYSHIFT_ETCD_TLS_KEY": "/c/client-key.pem"}  # fmt: skip
    tls = etcd_tls(env)
    assert tls == EtcdTls(Path("/c/ca.pem"), Path("/c/client.pem"), Path("/c/client-key.pem"))
    assert tls.env() == env


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        (("ca",), "SKYSHIFT_ETCD_TLS_CERT, SKYSHIFT_ETCD_TLS_KEY not set"),
        (("cert", "key"), "SKYSHIFT_ETCD_TLS_CA not set"),
        (("ca", "cert"), "SKYSHIFT_ETCD_TLS_KEY not set"),
    ],
)
def test_some_but_not_all_names_what_is_missing(given: tuple[str, ...], missing: str) -> None:
    with pytest.raises(ValueError, match=missing):
        etcd_tls({ETCD_TLS_ENV[what]: f"/c/{what}.pem" for what in given})


def test_the_store_refuses_half_the_settings_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_ETCD_TLS_CA", "/c/ca.pem")
    store = ObjectStore("127.0.0.1:1", timeout=1.0)
    with pytest.raises(StoreError, match="etcd settings: SKYSHIFT_ETCD_TLS_CERT"):
        asyncio.run(store.connect())


def test_an_unreadable_file_names_its_variable(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    tls = EtcdTls(pki.ca, pki.client_cert, tmp_path / "missing-key.pem")
    with pytest.raises(StoreError, match=r"SKYSHIFT_ETCD_TLS_KEY=.*missing-key\.pem"):
        channel_credentials(tls)


def test_with_the_files_the_client_is_a_tls_one(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    client = make_client("127.0.0.1:2379,127.0.0.1:2380", 1.0, tls=pki.etcd_tls())
    assert isinstance(client, TlsClient)
