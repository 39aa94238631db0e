"""Certificates for a server that requires client certificates: a CA, the server's certificate,
a client certificate for SkyShift's processes and, when asked, more client certificates.

``skyshift up --ha`` keeps the Temporal frontend's set under ``$SKYSHIFT_HOME/pki`` (with one more
client certificate, ``temporal-ui``, for the Temporal UI server) and etcd's, from a CA of its
own, under ``$SKYSHIFT_HOME/pki/etcd`` (made once, reused by later ``up``\\s);
tests/integration/test_temporal_server.py makes a set per test server. Keys are ECDSA P-256
(PKCS#8, mode 0600); the server's certificate names ``localhost`` and ``127.0.0.1`` and serves as
a client certificate too (etcd members use it between each other).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from skyshift.config import EtcdTls

#: the name the frontend's certificate is issued for (SKYSHIFT_TEMPORAL_TLS_SERVER_NAME)
SERVER_NAME = "localhost"


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def under(cls, d: Path) -> Pki:
        return cls(d / "ca.pem", d / "server.pem", d / "server-key.pem", d / "client.pem",
                   d / "client-key.pem")  # fmt: skip

    def leaf(self, name: str) -> tuple[Path, Path]:
        """(certificate, key) of the extra client certificate ``name``."""
        d = self.ca.parent
        return d / f"{name}.pem", d / f"{name}-key.pem"

    def complete(self, clients: tuple[str, ...] = ()) -> bool:
        paths = [self.ca, self.server_cert, self.server_key, self.client_cert, self.client_key]
        paths += [path for name in clients for path in self.leaf(name)]
        return all(p.is_file() for p in paths)

    def etcd_tls(self) -> EtcdTls:
        """The CA and the client certificate as SKYSHIFT_ETCD_TLS_* name them."""
        return EtcdTls(self.ca, self.client_cert, self.client_key)

    def client_env(self) -> dict[str, str]:
        """SKYSHIFT_TEMPORAL_TLS_* for a process that connects with the client certificate."""
        return {
            "SKYSHIFT_TEMPORAL_TLS_CERT": str(self.client_cert),
            "SKYSHIFT_TEMPORAL_TLS_KEY": str(self.client_key),
            "SKYSHIFT_TEMPORAL_TLS_CA": str(self.ca),
            "SKYSHIFT_TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        }


Issuer = tuple[x509.Name, ec.EllipticCurvePrivateKey]


def _issue(
    name: str, issuer: Issuer | None, server: bool, days: int
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer if issuer else (subject, key)
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] * server)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server:
        names = [x509.DNSName(SERVER_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def _write(
    cert: x509.Certificate, key: ec.EllipticCurvePrivateKey, cert_path: Path, key_path: Path
) -> None:
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.chmod(0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def make_pki(
    d: Path, ca_name: str = "skyshift-temporal-ca", days: int = 1, clients: tuple[str, ...] = ()
) -> Pki:
    """A new CA, the server's certificate (also the server's own client certificate, for the
    Temporal server's system workers and etcd's peers), a client certificate for SkyShift and
    one for each of ``clients`` (its common name), written under ``d`` (0700)."""
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca, ca_key = _issue(ca_name, None, server=False, days=days)
    issuer = (ca.subject, ca_key)
    pki = Pki.under(d)
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write(*_issue(SERVER_NAME, issuer, True, days), pki.server_cert, pki.server_key)
    _write(*_issue("skyshift", issuer, False, days), pki.client_cert, pki.client_key)
    for name in clients:
        _write(*_issue(name, issuer, False, days), *pki.leaf(name))
    return pki


def ensure_pki(
    d: Path, days: int = 365, ca_name: str = "skyshift-temporal-ca", clients: tuple[str, ...] = ()
) -> Pki:
    """The certificates under ``d``, made on the first call (the CA's key is not kept, so a
    set missing a file is made anew)."""
    pki = Pki.under(d)
    return pki if pki.complete(clients) else make_pki(d, ca_name, days, clients)
