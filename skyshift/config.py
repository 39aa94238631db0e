"""Settings shared by every process (API server, workers, devstack, CLI).

Everything is read from the environment with sane local defaults, so the embedded stack needs no
configuration and production only sets a few variables (see README, "Configuration").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


def _env(name: str, default: str) -> str:
    value = os.environ.get(name)
    return value if value else default


def skyshift_home() -> Path:
    """The directory holding state, config and logs (``SKYSHIFT_HOME``, default ``~/.skyshift``)."""
    return Path(_env("SKYSHIFT_HOME", str(Path.home() / ".skyshift"))).expanduser()


def auth_dir(home: Path | None = None) -> Path:
    """``$SKYSHIFT_HOME/auth``: the 0700 directory of the API server's secrets."""
    return (home or skyshift_home()) / "auth"


def admin_password_file(home: Path | None = None) -> Path:
    """Where the API server's first start writes the generated admin password (0600);
    ``skyshift up`` reads it to log the local CLI in. ``SKYSHIFT_ADMIN_PASSWORD_FILE``."""
    value = os.environ.get("SKYSHIFT_ADMIN_PASSWORD_FILE")
    return Path(value).expanduser() if value else auth_dir(home) / "admin-password"


def jwt_key_file(home: Path | None = None) -> Path:
    """The token signing key (0600), shared by every API replica. ``SKYSHIFT_JWT_KEY_FILE``."""
    value = os.environ.get("SKYSHIFT_JWT_KEY_FILE")
    return Path(value).expanduser() if value else auth_dir(home) / "jwt.key"


def etcd_password_file(home: Path | None = None) -> Path:
    """Where ``skyshift up`` keeps the embedded etcd's root password (0600)."""
    return auth_dir(home) / "etcd-password"


@dataclass(frozen=True)
class EtcdCredentials:
    """A user and password for etcd's client auth."""

    user: str
    password: str = field(repr=False)


def etcd_credentials() -> EtcdCredentials | None:
    """etcd credentials from ``SKYSHIFT_ETCD_USER`` and ``SKYSHIFT_ETCD_PASSWORD_FILE`` (the
    password is the file's first line), or None when neither is set (etcd without auth).

    Raises ValueError when only one is set or the file cannot be read.
    """
    user = os.environ.get("SKYSHIFT_ETCD_USER", "")
    path = os.environ.get("SKYSHIFT_ETCD_PASSWORD_FILE", "")
    if not user and not path:
        return None
    if not user or not path:
        raise ValueError(
            "set both SKYSHIFT_ETCD_USER and SKYSHIFT_ETCD_PASSWORD_FILE for etcd auth, or neither"
        )
    try:
        lines = Path(path).expanduser().read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the etcd password file {path}: {exc}") from None
    password = lines[0].strip() if lines else ""
    if not password:
        raise ValueError(f"the etcd password file {path} is empty")
    return EtcdCredentials(user, password)


#: SKYSHIFT_ETCD_TLS_* by what each names: the CA that signed etcd's certificate, and the
#: client certificate and its key (etcd's ``--client-cert-auth`` asks for one)
ETCD_TLS_ENV = {
    "ca": "SKYSHIFT_ETCD_TLS_CA",
    "cert": "SKYSHIFT_ETCD_TLS_CERT",
    "key": "SKYSHIFT_ETCD_TLS_KEY",
}


@dataclass(frozen=True)
class EtcdTls:
    """PEM files for TLS to etcd: its CA, a client certificate and the certificate's key."""

    ca: Path
    cert: Path
    key: Path

    def env(self) -> dict[str, str]:
        """The SKYSHIFT_ETCD_TLS_* variables that name these files."""
        return {name: str(getattr(self, what)) for what, name in ETCD_TLS_ENV.items()}


def etcd_tls(environ: Mapping[str, str] | None = None) -> EtcdTls | None:
    """TLS to etcd from ``SKYSHIFT_ETCD_TLS_CA``, ``_CERT`` and ``_KEY`` (of ``environ`` when
    given), or None when none is set (plaintext).

    Raises ValueError naming the variables missing when only some are set.
    """
    source = os.environ if environ is None else environ
    values = {what: source.get(name, "").strip() for what, name in ETCD_TLS_ENV.items()}
    missing = [ETCD_TLS_ENV[what] for what, value in values.items() if not value]
    if len(missing) == len(values):
        return None
    if missing:
        raise ValueError(
            f"{', '.join(missing)} not set: TLS to etcd needs all of "
            f"{', '.join(ETCD_TLS_ENV.values())} (the CA, a client certificate and its key), "
            "or none of them"
        )
    ca, cert, key = (Path(values[what]).expanduser() for what in ("ca", "cert", "key"))
    return EtcdTls(ca, cert, key)


def parse_endpoints(value: str) -> list[tuple[str, int]]:
    """Parse ``host:port[,host:port...]`` (an ``http://`` prefix is allowed) into pairs."""
    out: list[tuple[str, int]] = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        part = part.removeprefix("http://").removeprefix("https://").rstrip("/")
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad endpoint {part!r}: expected host:port")
        out.append((host, int(port)))
    if not out:
        raise ValueError("no endpoint given")
    return out


DEFAULT_SCHEDULE_MIN_INTERVAL = 60


def schedule_min_interval() -> int:
    """The shortest Schedule interval the API accepts, in seconds
    (``SKYSHIFT_SCHEDULE_MIN_INTERVAL``, default 60, the finest a cron can do). A one-second
    schedule creates 86,400 objects a day: an admin may lower it, a user may not."""
    raw = _env("SKYSHIFT_SCHEDULE_MIN_INTERVAL", str(DEFAULT_SCHEDULE_MIN_INTERVAL))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(
            f"SKYSHIFT_SCHEDULE_MIN_INTERVAL={raw!r}: expected a number of seconds"
        ) from None
    return max(value, 1)


@dataclass
class Settings:
    """Where the parts of SkyShift live. Built with :meth:`from_env`."""

    home: Path = field(default_factory=skyshift_home)
    etcd_endpoints: str = "127.0.0.1:23790"
    store_prefix: str = "/skyshift"
    temporal_address: str = "127.0.0.1:7233"
    temporal_namespace: str = "default"
    temporal_ui_url: str = "http://127.0.0.1:8233"
    api_host: str = "127.0.0.1"
    api_port: int = 50051

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            home=skyshift_home(),
            etcd_endpoints=_env("SKYSHIFT_ETCD", "127.0.0.1:23790"),
            store_prefix=_env("SKYSHIFT_STORE_PREFIX", "/skyshift"),
            temporal_address=_env("SKYSHIFT_TEMPORAL_ADDRESS", "127.0.0.1:7233"),
            temporal_namespace=_env("SKYSHIFT_TEMPORAL_NAMESPACE", "default"),
            temporal_ui_url=_env("SKYSHIFT_TEMPORAL_UI", "http://127.0.0.1:8233"),
            api_host=_env("SKYSHIFT_API_HOST", "127.0.0.1"),
            api_port=int(_env("SKYSHIFT_API_PORT", "50051")),
        )

    @property
    def etcd(self) -> tuple[str, int]:
        """The first etcd endpoint (aetcd talks to one; list several for failover later)."""
        return parse_endpoints(self.etcd_endpoints)[0]
