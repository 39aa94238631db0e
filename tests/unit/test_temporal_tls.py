"""The Temporal client's mTLS settings come from SKYSHIFT_TEMPORAL_TLS_* (docs/production.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.lifecycle.client import TLS_ENV, tls_config


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TLS_ENV.values():
        monkeypatch.delenv(name, raising=False)


def _pem(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(f"-----BEGIN {name}-----\n".encode())
    return str(path)


def test_no_variable_means_plaintext() -> None:
    assert tls_config() is None


def test_client_certificate_key_and_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TLS_ENV["cert"], _pem(tmp_path, "CERT"))
    monkeypatch.setenv(TLS_ENV["key"], _pem(tmp_path, "KEY"))
    monkeypatch.setenv(TLS_ENV["ca"], _pem(tmp_path, "CA"))
    monkeypatch.setenv(TLS_ENV["server_name"], "temporal.internal")
    tls = tls_config()
    assert tls is not None
    assert tls.client_cert == b"-----BEGIN CERT-----\n"
    assert tls.client_private_key == b"-----BEGIN KEY-----\n"
    assert tls.server_root_ca_cert == b"-----BEGIN CA-----\n"
    assert tls.domain == "temporal.internal"


def test_a_ca_alone_is_server_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TLS_ENV["ca"], _pem(tmp_path, "CA"))
    tls = tls_config()
    assert tls is not None and tls.client_cert is None and tls.domain is None


def test_half_a_client_certificate_names_both_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TLS_ENV["cert"], _pem(tmp_path, "CERT"))
    with pytest.raises(ValueError, match="_TLS_CERT and SKYSHIFT_TEMPORAL_TLS_KEY"):
        tls_config()


def test_an_unreadable_file_names_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TLS_ENV["ca"], str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match=r"SKYSHIFT_TEMPORAL_TLS_CA=.*missing\.pem"):
        tls_config()
