"""How every SkyShift process connects to Temporal: one place for the client's options.

The data converter (:mod:`.converter`) writes the same ``json/plain`` payloads as Temporal's
default one, several times faster; the replay tests decode histories recorded before it with it.

mTLS (docs/production.md): ``SKYSHIFT_TEMPORAL_TLS_CERT`` and ``SKYSHIFT_TEMPORAL_TLS_KEY`` (PEM
files: the client certificate and its key), ``SKYSHIFT_TEMPORAL_TLS_CA`` (the CA that signed the
frontend's certificate; the system's roots when unset) and ``SKYSHIFT_TEMPORAL_TLS_SERVER_NAME``
(the name to verify when the address's host is not in the certificate). Any of them turns TLS on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from skyshift.lifecycle.converter import DATA_CONVERTER

TLS_ENV = {
    "cert": "SKYSHIFT_TEMPORAL_TLS_CERT",
    "key": "SKYSHIFT_TEMPORAL_TLS_KEY",
    "ca": "SKYSHIFT_TEMPORAL_TLS_CA",
    "server_name": "SKYSHIFT_TEMPORAL_TLS_SERVER_NAME",
}


def _read_pem(variable: str, path: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ValueError(f"{variable}={path}: cannot read it: {exc.strerror or exc}") from None


def tls_config(environ: Mapping[str, str] | None = None) -> TLSConfig | None:
    """The client's TLS settings from the environment, or ``environ`` (None: plaintext).

    Raises ValueError naming the variable when a file cannot be read or only one of the
    certificate and key is set.
    """
    source = os.environ if environ is None else environ
    values = {what: source.get(name, "").strip() for what, name in TLS_ENV.items()}
    if not any(values.values()):
        return None
    if bool(values["cert"]) != bool(values["key"]):
        raise ValueError(
            f"set both {TLS_ENV['cert']} and {TLS_ENV['key']} for a client certificate, or neither"
        )
    pem = {
        what: _read_pem(TLS_ENV[what], values[what]) if values[what] else None
        for what in ("cert", "key", "ca")
    }
    return TLSConfig(
        server_root_ca_cert=pem["ca"],
        client_cert=pem["cert"],
        client_private_key=pem["key"],
        domain=values["server_name"] or None,
    )


async def connect(
    address: str,
    namespace: str = "default",
    *,
    lazy: bool = False,
    runtime: Runtime | None = None,
    environ: Mapping[str, str] | None = None,
) -> Client:
    """A client of ``namespace`` at ``address`` (``lazy``: connect on the first call), over mTLS
    when the ``SKYSHIFT_TEMPORAL_TLS_*`` variables (of ``environ`` when given) say so."""
    return await Client.connect(
        address,
        namespace=namespace,
        lazy=lazy,
        runtime=runtime,
        data_converter=DATA_CONVERTER,
        tls=tls_config(environ),  # None: the SDK's default (plaintext without an API key)
    )
