"""Who simulated Ray heads run as: never root.

Entrypoints of Ray jobs run as the raylet's user, so a head started as root runs every Ray job
as root. Run as root, ``skyshift sim ray up`` starts each head as ``skyshift-run`` (the group the
stack's firewall refuses the control plane to, :mod:`skyshift.devstack.firewall`) through
``setpriv``. When that user cannot reach this Python (on the project's machines it is pyenv's,
under a 0700 ``/root``), the head starts in a mount namespace of its own in which each such
directory is a small empty tmpfs holding only the path to the interpreter, bound from the real
one: the head can run Python and Ray, and sees nothing else of ``/root`` (no
``/root/.skyshift``). The host's mounts are not touched. If even that fails, ``up`` refuses to
start the heads rather than run them as root.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

RUN_USER = "skyshift-run"


class NoUnprivilegedUser(RuntimeError):
    """Heads would have to run as root; the message says why."""


def _searchable(path: Path, user: pwd.struct_passwd) -> bool:
    st = path.stat()
    if st.st_uid == user.pw_uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == user.pw_gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def hidden_ancestors(user: pwd.struct_passwd) -> list[tuple[Path, str]]:
    """(directory the user cannot enter, the entry below it on the way to this Python)."""
    out: dict[Path, str] = {}
    for prefix in {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}:
        parts = prefix.parts
        for i in range(1, len(parts) - 1):
            above = Path(*parts[:i])
            if not _searchable(above, user):
                out.setdefault(above, parts[i])
                break
    return sorted(out.items())


def mount_prefix(stage: Path, hidden: list[tuple[Path, str]]) -> list[str]:
    """The argv prefix that starts a command in a private mount namespace where each hidden
    directory shows only the entry on the way to the interpreter (empty when none)."""
    if not hidden:
        return []
    lines = ["set -e"]
    for above, entry in hidden:
        lines += [
            f"mount --rbind '{above}' '{stage}'",
            f"mount -t tmpfs -o mode=0755,size=1m skyshift-sim '{above}'",
            f"mkdir '{above / entry}'",
            f"mount --rbind '{stage / entry}' '{above / entry}'",
            f"umount -l '{stage}'",
        ]
    lines.append('exec "$@"')
    unshare = shutil.which("unshare") or "unshare"
    return [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
            "\n".join(lines), "sh"]  # fmt: skip


def head_prefix(home: Path) -> tuple[str, list[str]]:
    """(user, argv prefix) that start a head unprivileged; ("", []) when we are not root.

    Raises NoUnprivilegedUser when we are root and cannot start it as ``skyshift-run``.
    """
    if os.geteuid() != 0:
        return "", []
    from skyshift.devstack.local import ensure_run_user

    try:
        ensure_run_user(RUN_USER)
    except Exception as exc:
        raise NoUnprivilegedUser(f"cannot create {RUN_USER}: {exc}") from None
    user = pwd.getpwnam(RUN_USER)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise NoUnprivilegedUser("setpriv (util-linux) is missing")
    stage = home / ".mnt"
    stage.mkdir(mode=0o700, exist_ok=True)
    prefix = [*mount_prefix(stage, hidden_ancestors(user)), setpriv, f"--reuid={user.pw_uid}",
              f"--regid={user.pw_gid}", "--init-groups", "--no-new-privs", "--"]  # fmt: skip
    check = subprocess.run(
        [*prefix, sys.executable, "-c",
         # Ray's head starts its workers with sys.executable: that must run too
         "import os, subprocess, sys, ray; subprocess.run([sys.executable, '-c', ''], "
         "check=True); sys.exit(0 if os.access(sys.argv[1], os.X_OK) else 3)", str(home)],
        capture_output=True, text=True, cwd="/", timeout=120,
        env={"PATH": os.environ.get("PATH", os.defpath)},
    )  # fmt: skip
    if check.returncode == 3:
        raise NoUnprivilegedUser(f"{RUN_USER} cannot enter {home} (give --home a directory it "
                                 "can reach)")
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["?"])[-1][:160]
        raise NoUnprivilegedUser(f"{RUN_USER} cannot run {sys.executable} with ray ({last})")
    return RUN_USER, prefix
