"""Secret files (the token signing key, the generated admin password) with owner-only access.

Files are created complete-or-not-at-all (a 0600 temporary file hard-linked into place) in a
0700 directory, so two processes starting at once never overwrite or half-read each other and
no other local user can read them. An existing key whose
mode lets group or others read it is refused rather than silently used: that key may have leaked.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

KEY_BYTES = 64


class SecretFileError(RuntimeError):
    """A secret file cannot be created or is not private enough to trust."""


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) with mode 0700; tighten it if we own it and it is looser."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
        path.chmod(0o700)


def _check_private(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise SecretFileError(
            f"{path} is readable by other users (mode {mode:o}): a secret there may have leaked; "
            f"replace it, or `chmod 600 {path}` if you know it did not"
        )


def _write_exclusive(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return True


def write_new(path: Path, data: bytes) -> bool:
    """Create ``path`` with ``data`` (0600); False if it already exists (nothing written).

    The data goes to a private temporary file first and is hard-linked into place, so a
    process starting at the same moment sees either no file or the complete one.
    """
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    if not _write_exclusive(tmp, data):  # pragma: no cover - random name collision
        raise SecretFileError(f"cannot create {tmp}")
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError:  # a filesystem without hard links: exclusive create in place
        return _write_exclusive(path, data)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return True


def write_replace(path: Path, data: bytes) -> None:
    """Atomically (re)write ``path`` with mode 0600."""
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    if not _write_exclusive(tmp, data):  # pragma: no cover - random name collision
        raise SecretFileError(f"cannot create {tmp}")
    os.replace(tmp, path)


def read_private(path: Path) -> bytes:
    """The contents of a secret file, refusing one that others may read."""
    _check_private(path)
    return path.read_bytes()


def load_or_create_key(path: Path) -> bytes:
    """The signing key at ``path``, generated (random, 64 bytes) on first start."""
    try:
        write_new(path, secrets.token_bytes(KEY_BYTES).hex().encode())
        key = read_private(path).strip()
    except OSError as exc:
        raise SecretFileError(f"cannot use the token signing key {path}: {exc}") from exc
    if len(key) < 32:
        raise SecretFileError(f"the token signing key {path} is too short (< 32 bytes)")
    return key
