"""One uid per namespace on a local cluster, and a ``/proc`` that shows a replica only its own.

With ``run_as`` alone every replica runs as one user, so a job of one namespace can read another
namespace's ``/proc/<pid>/environ``, signal or trace its processes and open its working files.
With ``namespace_users: true`` (what ``skyshift up`` sets) the replicas of namespace ``ns`` run
as the system user ``<run_as>-<first 10 hex of sha256(ns)>``, created on first use with the
``run_as`` user's primary group as its own. Different namespaces are different uids, so the
kernel keeps them apart (``environ`` needs ptrace rights, working directories are 0700); one
shared group keeps them easy to name for the firewall (``meta skgid``, see
:mod:`skyshift.devstack.firewall`). The name is a hash, not an index in a file, so every stack
on a host maps a namespace to the same user and none can hand a uid to a second namespace.

Every replica, and every ``exec`` into one, starts in a mount namespace of its own whose
``/proc`` is a new procfs instance mounted ``hidepid=invisible``: the replica sees only the
processes of its own uid, not the control plane's nor other tenants' (Linux >= 5.8 gives each
procfs mount its own options; the host's ``/proc`` is not touched). ``resolve`` checks once that
this works and refuses the cluster with the reason when it does not.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pwd
import re
import shutil
import subprocess
import threading

from skyshift.compat.errors import Permanent

_MOUNT_PROC = ('mount -t proc -o hidepid=invisible,nosuid,nodev,noexec proc /proc'
               ' && exec "$@"')  # fmt: skip
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_CREATE = threading.Lock()  # one useradd at a time from this process


def user_name(base: str, namespace: str) -> str:
    """The user of ``namespace``'s replicas (at most 32 characters, as useradd wants)."""
    name = f"{base}-{hashlib.sha256(namespace.encode()).hexdigest()[:10]}"
    if len(name) > 32:
        raise Permanent(f"run_as {base!r} is too long for namespace users (at most 21 characters)")
    return name


def ensure_user(base: str, gid: int, namespace: str) -> pwd.struct_passwd:
    """The system user of ``namespace`` (primary group ``gid``), created when missing."""
    if not _NAMESPACE.match(namespace):
        raise Permanent(f"invalid namespace {namespace!r} for a local replica")
    name = user_name(base, namespace)
    with _CREATE:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            entry = _useradd(name, gid, namespace)
    if entry.pw_gid != gid or entry.pw_uid == 0:
        raise Permanent(
            f"user {name} (namespace {namespace}) exists with uid {entry.pw_uid} and group "
            f"{entry.pw_gid}, not as SkyShift creates it (group {gid}); remove it or fix it"
        )
    return entry


def _useradd(name: str, gid: int, namespace: str) -> pwd.struct_passwd:
    return add_system_user(name, ["--gid", str(gid)], f"SkyShift namespace {namespace}",
                           f"for namespace {namespace}")


def add_system_user(name: str, group: list[str], comment: str,
                    purpose: str) -> pwd.struct_passwd:
    """``useradd --system`` without a home or a login shell (``group``: ``--gid N`` or
    ``--user-group``); Permanent naming ``purpose`` when the user still does not exist after."""
    argv = ["useradd", "--system", *group, "--no-create-home", "--home-dir", "/nonexistent",
            "--shell", "/usr/sbin/nologin", "--comment", comment, name]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        detail = (done.stderr or done.stdout).strip()
    except (OSError, subprocess.SubprocessError) as exc:
        detail = str(exc)
    try:
        return pwd.getpwnam(name)  # also when another process created it meanwhile
    except KeyError:
        raise Permanent(f"cannot create the user {name} {purpose}: {detail}") from None


def private_proc_prefix(setpriv: str) -> list[str]:
    """What starts a command in a new mount namespace with a ``hidepid=invisible`` ``/proc``
    (needs root; the command then drops to its user with ``setpriv``). Permanent when this host
    cannot do it: checked once, by an unprivileged probe that must not see pid 1."""
    return list(_private_proc_prefix(setpriv))


@functools.cache
def _private_proc_prefix(setpriv: str) -> tuple[str, ...]:
    unshare = shutil.which("unshare", path=f"{os.defpath}:/usr/bin:/bin") or ""
    if not unshare:
        raise Permanent("namespace users need unshare (util-linux) to hide other processes")
    prefix = (unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
              _MOUNT_PROC, "sh")  # fmt: skip
    try:
        probe = subprocess.run([*prefix, setpriv, "--reuid=65534", "--regid=65534",
                                "--clear-groups", "--", "/bin/sh", "-c", "test ! -e /proc/1"],
                               capture_output=True, text=True, timeout=30)
        ok, detail = probe.returncode == 0, probe.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        ok, detail = False, str(exc)
    if not ok:
        raise Permanent(
            "cannot give local replicas a private /proc (a mount namespace with procfs mounted "
            f"hidepid=invisible, Linux >= 5.8): {detail or 'pid 1 stayed visible'}"
        )
    return prefix
