"""Who a local cluster's replicas run as (``run_as``), and working directories that user can use.

A skylet running as root that starts replicas as root hands every job the control plane's
secrets (the admin password and signing key under ``$SKYSHIFT_HOME``, etcd's password). With
``run_as: <user>`` in the cluster's config the command of each replica runs as that user: the
supervisor, which must write the replica's state files, stays root, and starts the command through
``setpriv --reuid --regid --init-groups`` (util-linux). ``exec`` into a replica drops to the same
user.

That user must not read the cluster's ``state_dir`` (it holds every replica's spec, env values
included, and every replica's log), so the state dir is made 0700 and each replica's working
directory lives elsewhere: ``<work_root>/<replica>.<random>``, owned by the user and 0700, linked
from the replica directory as ``work``. ``work_root`` defaults to
``/var/lib/skyshift/work/<cluster>-<hash of state_dir>``; every directory above it must be
searchable by the user, which is checked on connect. The replica's ``HOME`` is its working
directory and ``USER``/``LOGNAME`` name the user.

With ``namespace_users`` each namespace gets a user of its own in ``run_as``'s group, and every
replica a private ``/proc`` (:mod:`skyshift.compat.local.tenants`); :meth:`RunAs.for_namespace`
gives the user of a namespace.

Without ``run_as`` nothing changes (the command runs as the skylet's user, in
``<replica>/work``); a skylet running as root says loudly that its jobs run as root too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import shutil
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from skyshift.compat.errors import Permanent
from skyshift.compat.local import tenants as local_tenants

log = logging.getLogger(__name__)

WORK_BASE = Path("/var/lib/skyshift/work")
WORK_LINK = "work"  # the replica directory's link to (or, without run_as, its) working directory


@dataclass(frozen=True)
class RunAs:
    """The user replicas run as; ``drop`` when we are root and must switch to it."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    drop: bool
    setpriv: str = ""
    per_namespace: bool = False  # namespace_users: for_namespace() gives each its own user
    prefix: tuple[str, ...] = ()  # what starts the command before setpriv (a private /proc)
    no_new_privs: bool = False  # no setuid/setgid program may change the job's uid or group

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` started as this user (the caller stays who it is)."""
        if not self.drop:
            return list(argv)
        # with namespace users no setuid or setgid program may change the job's uid or group
        # (the firewall matches the group): no_new_privs for everything the job starts
        nnp = ["--no-new-privs"] if self.no_new_privs else []
        return [*self.prefix, self.setpriv, f"--reuid={self.uid}", f"--regid={self.gid}",
                "--init-groups", *nnp, "--", *argv]  # fmt: skip

    def for_namespace(self, namespace: str) -> RunAs:
        """Who the replicas of ``namespace`` run as: this user, or with ``per_namespace`` the
        namespace's own user in this user's group (created when missing)."""
        if not self.per_namespace:
            return self
        entry = local_tenants.ensure_user(self.name, self.gid, namespace)
        groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
        return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, drop=True,
                     setpriv=self.setpriv, prefix=self.prefix, no_new_privs=self.no_new_privs)

    def env(self, env: dict[str, str], workdir: Path) -> dict[str, str]:
        """The replica's environment as this user sees it: its own HOME, USER and LOGNAME."""
        return {**env, "HOME": str(workdir), "USER": self.name, "LOGNAME": self.name}

    def searchable(self, path: Path) -> bool:
        """Whether this user may pass through directory ``path`` (root may pass anywhere)."""
        if self.uid == 0:
            return True
        st = path.stat()
        if st.st_uid == self.uid:
            return bool(st.st_mode & stat.S_IXUSR)
        if st.st_gid == self.gid or st.st_gid in self.groups:
            return bool(st.st_mode & stat.S_IXGRP)
        return bool(st.st_mode & stat.S_IXOTH)


def resolve(cluster: str, run_as: str | None, per_namespace: bool = False) -> RunAs | None:
    """The user of ``run_as`` on this host, checked against who we are; None without it.

    Raises Permanent when the user does not exist, when switching to it needs root and we are
    not root, when ``setpriv`` is missing, or with ``per_namespace`` when the skylet is not root
    or this host cannot give replicas a private ``/proc``.
    """
    euid = os.geteuid()
    if run_as is None:
        if euid == 0:
            log.warning(
                "local cluster %s: replicas run as ROOT because its config has no run_as: any "
                "job can read SkyShift's secrets (admin password, signing key, etcd password) "
                "and act as admin; set run_as to an unprivileged user (skyshift up uses "
                "skyshift-run)", cluster,
            )
        return None
    try:
        entry = pwd.getpwnam(run_as)
    except KeyError:
        raise Permanent(
            f"local cluster {cluster}: run_as: there is no user {run_as!r} on this host"
        ) from None
    groups = tuple(os.getgrouplist(run_as, entry.pw_gid))
    if per_namespace and euid != 0:
        raise Permanent(
            f"local cluster {cluster}: namespace_users needs the skylet to run as root (it "
            f"runs as uid {euid}); remove namespace_users or run the skylet as root"
        )
    if entry.pw_uid == euid:
        return RunAs(run_as, entry.pw_uid, entry.pw_gid, groups, drop=False)
    if euid != 0:
        raise Permanent(
            f"local cluster {cluster}: run_as: starting replicas as {run_as!r} needs the skylet "
            f"to run as root, and it runs as uid {euid}; remove run_as or run the skylet as root"
        )
    setpriv = shutil.which("setpriv", path=f"{os.defpath}:/usr/bin:/bin") or ""
    if not setpriv:
        raise Permanent(
            f"local cluster {cluster}: run_as needs setpriv (util-linux) to start replicas "
            f"as {run_as!r}; install util-linux"
        )
    prefix = tuple(local_tenants.private_proc_prefix(setpriv)) if per_namespace else ()
    return RunAs(run_as, entry.pw_uid, entry.pw_gid, groups, drop=True, setpriv=setpriv,
                 per_namespace=per_namespace, prefix=prefix, no_new_privs=per_namespace)


def default_work_root(cluster: str, state_dir: Path) -> Path:
    """One directory per cluster and state dir, so two stacks on a host never share one."""
    digest = hashlib.sha256(str(state_dir.absolute()).encode()).hexdigest()[:10]
    return WORK_BASE / f"{cluster}-{digest}"


def prepare(cluster: str, user: RunAs, state_dir: Path, work_root: Path) -> None:
    """Make ``state_dir`` private and ``work_root`` reachable (not listable) by ``user``."""
    os.chmod(state_dir, 0o700)
    work_root.mkdir(parents=True, exist_ok=True)
    os.chown(work_root, os.geteuid(), os.getegid())
    os.chmod(work_root, 0o711)
    for path in (work_root, *work_root.parents):
        if not user.searchable(path):
            raise Permanent(
                f"local cluster {cluster}: user {user.name!r} (run_as) cannot reach work_root "
                f"{work_root}: {path} is not searchable by it; set work_root to a directory "
                "it can reach (every directory above it needs o+x)"
            )


def ensure_workdir(rdir: Path, user: RunAs, work_root: Path) -> Path:
    """The real path of the replica's working directory, created for ``user`` when missing.

    A replica made before run_as was set has a ``work`` directory of its own (unreachable by the
    user inside the private state dir): it is kept as ``work.before-run-as``.
    """
    link = rdir / WORK_LINK
    if link.is_symlink() and link.resolve().is_dir():
        target = link.resolve()
        if target.stat().st_uid != user.uid:  # made for another user (before namespace_users)
            os.chown(target, user.uid, user.gid)
        return target
    if link.is_symlink():
        link.unlink()
    elif link.exists():
        os.replace(link, rdir / f"{WORK_LINK}.before-run-as")
    target = work_root / f"{rdir.name}.{uuid.uuid4().hex[:8]}"
    target.mkdir(mode=0o700)
    os.chown(target, user.uid, user.gid)
    os.chmod(target, 0o700)
    os.symlink(target, link)
    return target


def remove_workdir(rdir: Path) -> None:
    """Remove the working directory ``rdir`` links to (a detached replica, before ``rdir``
    itself goes); a no-op when ``work`` is a plain directory inside ``rdir``."""
    link = rdir / WORK_LINK
    if not link.is_symlink():
        return
    target = Path(os.readlink(link))
    # the link is ours (the state dir is private), but never remove anything but a replica's
    # directory: "<replica>.<8 hex>", and rdir is "<replica>" or "<replica>.<8 hex>" in trash/
    replica = rdir.name.split(".", 1)[0]
    if target.is_absolute() and target.name.split(".", 1)[0] == replica:
        shutil.rmtree(target, ignore_errors=True)  # does not follow the job's symlinks
    link.unlink(missing_ok=True)
