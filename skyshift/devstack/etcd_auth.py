"""Client auth for the embedded etcd: a root user whose random password only the stack can read.

Without it anything that reaches etcd's loopback port (a job on the local cluster, say) could read
and rewrite every object, users and roles included, going around the API's RBAC. The first ``up``
writes a random password to ``$SKYSHIFT_HOME/auth/etcd-password`` (0600, in the 0700 ``auth/``),
creates etcd's root user with it and turns auth on; the API server and workers get
``SKYSHIFT_ETCD_USER`` and ``SKYSHIFT_ETCD_PASSWORD_FILE`` (see
:func:`skyshift.devstack.components.stack_env`). Later ``up``\\s check that the password still
logs in.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

from skyshift.config import EtcdCredentials, EtcdTls, auth_dir, etcd_password_file
from skyshift.devstack.errors import StackError
from skyshift.store import StoreError, enable_auth

USER = "root"  # etcd's auth needs its root user; the stack's processes log in as it


def secure_home(home: Path) -> None:
    """``$SKYSHIFT_HOME`` and its ``auth/`` readable by the stack's user only (0700)."""
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    auth = auth_dir(home)
    auth.mkdir(mode=0o700, exist_ok=True)
    os.chmod(auth, 0o700)


def ensure_secret(path: Path, what: str) -> str:
    """The secret in ``path``: random, written 0600 on the first call (in the 0700 ``auth/``)."""
    secure_home(path.parent.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
    try:
        secret = path.read_text().strip()
    except OSError as exc:
        raise StackError(f"cannot read the {what} file {path}: {exc}") from None
    if not secret:
        raise StackError(f"the {what} file {path} is empty; remove it and run up again")
    return secret


def ensure_password(home: Path) -> EtcdCredentials:
    """The root password from its file, generated (0600) on the first call."""
    return EtcdCredentials(USER, ensure_secret(etcd_password_file(home), "etcd password"))


def ensure_auth(home: Path, endpoint: str, tls: EtcdTls | None = None) -> str:
    """Turn etcd's auth on (or check it is on with our password), over TLS with ``tls``'s client
    certificate when given; a line for the user."""
    credentials = ensure_password(home)
    path = etcd_password_file(home)
    try:
        enabled = asyncio.run(enable_auth(endpoint, credentials, tls=tls))
    except StoreError as exc:
        raise StackError(
            f"etcd client auth: {exc}; if {path} was lost, `skyshift down --purge` starts "
            "etcd afresh (its data is deleted)"
        ) from None
    if enabled:
        return f"etcd: client auth enabled (user {USER}, password in {path})"
    return ""
