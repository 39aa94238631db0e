"""Auth settings: where the signing key and the admin password live, token lifetime, throttling.

Everything has a secure default and can be changed from the environment, so one API replica on a
laptop needs no configuration while several production replicas can share one signing key (put
the same key file, e.g. a mounted secret, at ``SKYSHIFT_JWT_KEY_FILE`` on each of them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from skyshift.config import Settings, admin_password_file, jwt_key_file

DEFAULT_TOKEN_TTL_HOURS = 12.0


def _float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected a number") from None
    if number <= 0:
        raise ValueError(f"{name}={value!r}: must be positive")
    return number


def _retention(name: str, default: float) -> float:
    """Like ``_float``, but 0 is allowed (keep forever)."""
    value = os.environ.get(name, "").strip()
    if value in ("0", "0.0"):
        return 0.0
    return _float(name, default)


def _int(name: str, default: int) -> int:
    return int(_float(name, default))


@dataclass
class AuthConfig:
    """What the auth layer of one API server needs (see :meth:`from_env` for the variables)."""

    key_file: Path
    admin_password_file: Path
    #: Lifetime of issued tokens (``SKYSHIFT_TOKEN_TTL_HOURS``).
    token_ttl_hours: float = DEFAULT_TOKEN_TTL_HOURS
    #: Lifetime of invites (``SKYSHIFT_INVITE_TTL_HOURS``).
    invite_ttl_hours: float = 72.0
    #: Failed logins within ``throttle_window`` seconds before further attempts get 429: for one
    #: user from one client address (``SKYSHIFT_LOGIN_MAX_FAILURES``), from one address for any
    #: users (``SKYSHIFT_LOGIN_MAX_FAILURES_PER_ADDRESS``), and for one user from all addresses
    #: (``SKYSHIFT_LOGIN_MAX_FAILURES_TOTAL``); the window is ``SKYSHIFT_LOGIN_THROTTLE_SECONDS``.
    #: Failed registrations count against their address with the per-address limit.
    max_failures_per_user: int = 5
    max_failures_per_address: int = 20
    max_failures_per_user_total: int = 100
    throttle_window: float = 300.0
    #: How long one replica trusts its cached users and roles before reading etcd again
    #: (``SKYSHIFT_AUTH_CACHE_SECONDS``); changes made through a replica apply there at once.
    cache_seconds: float = 1.0
    #: Days audit records are kept (``SKYSHIFT_AUDIT_RETENTION_DAYS``; 0 keeps them forever).
    audit_retention_days: float = 90.0
    #: argon2 cost parameters (the library's defaults; tests lower them to run fast).
    argon2_time_cost: int = 3
    argon2_memory_kib: int = 65536

    @classmethod
    def from_env(cls, settings: Settings | None = None) -> AuthConfig:
        home = settings.home if settings is not None else None
        return cls(
            key_file=jwt_key_file(home),
            admin_password_file=admin_password_file(home),
            token_ttl_hours=_float("SKYSHIFT_TOKEN_TTL_HOURS", DEFAULT_TOKEN_TTL_HOURS),
            invite_ttl_hours=_float("SKYSHIFT_INVITE_TTL_HOURS", 72.0),
            max_failures_per_user=_int("SKYSHIFT_LOGIN_MAX_FAILURES", 5),
            max_failures_per_address=_int("SKYSHIFT_LOGIN_MAX_FAILURES_PER_ADDRESS", 20),
            max_failures_per_user_total=_int("SKYSHIFT_LOGIN_MAX_FAILURES_TOTAL", 100),
            throttle_window=_float("SKYSHIFT_LOGIN_THROTTLE_SECONDS", 300.0),
            cache_seconds=_float("SKYSHIFT_AUTH_CACHE_SECONDS", 1.0),
            audit_retention_days=_retention("SKYSHIFT_AUDIT_RETENTION_DAYS", 90.0),
        )

    @property
    def token_ttl_seconds(self) -> int:
        return max(1, int(self.token_ttl_hours * 3600))
