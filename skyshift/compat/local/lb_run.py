"""Who a local cluster's HAProxy runs as, and where its runtime files live.

A skylet running as root used to start HAProxy (and ``haproxy -c``) as root, so a configuration
that HAProxy executes (a Lua file, an external check) ran with the control plane's rights. Now,
when the skylet is root, both run as the system user ``skyshift-lb`` (its own group; neither
root nor a tenant's uid nor in the replicas' group), started through ``setpriv`` with only
``CAP_NET_BIND_SERVICE`` (ambient), so services may still listen on ports below 1024.

That user cannot enter the cluster's 0700 state dir, so the configuration, the pid file and the
runtime socket live in ``/run/skyshift/lb/<cluster>-<hash of the lb dir>``, a 0700 directory
owned by ``skyshift-lb`` (its parents are 0711: nobody can list them). Replicas cannot enter it,
so they cannot reach the runtime socket. ``services.json`` and the lock stay in the state dir.
Not as root, nothing changes: HAProxy runs as the skylet's user with its files in the state dir.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
from dataclasses import dataclass
from pathlib import Path

from skyshift.compat.errors import Permanent
from skyshift.compat.local import tenants as local_tenants

LB_USER = "skyshift-lb"
RUN_BASE = Path("/run/skyshift/lb")


@dataclass(frozen=True)
class LbRun:
    """Where HAProxy's cfg, pid file and socket go, and the argv prefix that starts it."""

    dir: Path
    prefix: tuple[str, ...] = ()


def run_dir(cluster: str, lb_dir: Path) -> Path:
    """The runtime directory when the skylet is root; ``lb_dir`` itself otherwise."""
    if os.geteuid() != 0:
        return lb_dir
    digest = hashlib.sha256(str(lb_dir.absolute()).encode()).hexdigest()[:10]
    return RUN_BASE / f"{cluster}-{digest}"


def prepare(cluster: str, lb_dir: Path) -> LbRun:
    """Make the runtime directory and the user (as root); the prefix drops to that user."""
    where = run_dir(cluster, lb_dir)
    if where == lb_dir:
        return LbRun(where)
    user = ensure_lb_user()
    for parent in (RUN_BASE.parent, RUN_BASE):
        parent.mkdir(mode=0o711, exist_ok=True)
        os.chown(parent, 0, 0)
        os.chmod(parent, 0o711)
    where.mkdir(mode=0o700, exist_ok=True)
    os.chown(where, user.pw_uid, user.pw_gid)
    os.chmod(where, 0o700)
    setpriv = shutil.which("setpriv", path=f"{os.defpath}:/usr/bin:/bin")
    if setpriv is None:
        raise Permanent(f"cluster {cluster}: HAProxy needs setpriv (util-linux) to drop root")
    prefix = (setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
              "--inh-caps=+net_bind_service", "--ambient-caps=+net_bind_service", "--")
    return LbRun(where, prefix)


def ensure_lb_user() -> pwd.struct_passwd:
    """The system user ``skyshift-lb`` (group of the same name), created when missing."""
    try:
        return pwd.getpwnam(LB_USER)
    except KeyError:
        pass
    return local_tenants.add_system_user(LB_USER, ["--user-group"], "SkyShift HAProxy",
                                         "for HAProxy")
