"""After ``up``: log the local CLI in as ``admin`` with the password the API server generated.

The API server writes a random admin password to a 0600 file under ``SKYSHIFT_HOME`` on its
first start; reading it here keeps the quick start (``skyshift up`` then ``skyctl create job``)
working with authentication on, without any default password.
"""

from __future__ import annotations

import time
from pathlib import Path

from skyshift.client.auth import Token, login
from skyshift.client.errors import ApiError
from skyshift.config import admin_password_file
from skyshift.devstack.components import StackError

ADMIN = "admin"


def read_admin_password(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def admin_login(api_url: str, home: Path, wait: float = 30.0) -> Token:
    """A fresh admin token (the password file may appear a moment after the API is ready)."""
    path = admin_password_file(home)
    deadline = time.monotonic() + wait
    while True:
        try:
            password = read_admin_password(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise StackError(f"cannot read the admin password file {path}: {exc}") from None
        if password is not None:
            break
        if time.monotonic() >= deadline:
            raise StackError(
                f"no admin password file at {path}: the admin account was created elsewhere; "
                "log in with `skyctl login USER`"
            )
        time.sleep(0.2)
    try:
        return login(api_url, ADMIN, password)
    except ApiError as exc:
        raise StackError(f"could not log in as admin at {api_url}: {exc}") from None
