"""Local replicas with ``namespace_users``: two namespaces run as two uids of one group, and
neither can see the other's processes, read its environment or open its working directory.

Needs root (to switch users and to mount a private ``/proc``); it creates ``skyshift-run`` and
the namespace users as ``skyshift up`` would.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.local import tenants as local_tenants
from skyshift.compat.local.adapter import LocalManager
from skyshift.compat.types import ReplicaSpec
from skyshift.devstack.local import ensure_run_user
from tests.fixtures.compat import local_factory, make_spec, wait_state
from tests.fixtures.require import require

__all__ = ["local_factory"]


@pytest.fixture(scope="module")
def run_user() -> str:
    require(os.geteuid() == 0, "root (switching users)")
    require(bool(shutil.which("setpriv") and shutil.which("unshare")),
            "setpriv and unshare (util-linux)")
    return ensure_run_user()


@pytest.fixture
async def tenants(
    local_factory: Callable[..., LocalManager], run_user: str
) -> AsyncIterator[LocalManager]:
    manager = local_factory(run_as=run_user, namespace_users=True)
    await manager.connect()
    yield manager
    for status in await manager.replicas():
        await manager.delete_job(status.job_uid)
    shutil.rmtree(manager._work_root, ignore_errors=True)


def in_namespace(spec: ReplicaSpec, namespace: str) -> ReplicaSpec:
    spec.namespace = namespace
    return spec


async def start(manager: LocalManager, namespace: str, run: str,
                envs: dict[str, str] | None = None) -> ReplicaSpec:
    spec = in_namespace(make_spec(run, envs=envs), namespace)
    await manager.submit([spec])
    await wait_state(manager, spec.name, "Running")
    return spec


async def probe(manager: LocalManager, namespace: str, script: str) -> dict[str, str]:
    spec = in_namespace(make_spec(script), namespace)
    await manager.submit([spec])
    await wait_state(manager, spec.name, "Succeeded", "Failed")
    log = await manager.logs(spec.name)
    return dict(ln.split("=", 1) for ln in log.splitlines() if "=" in ln)


def cwd_of(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def test_user_names_are_per_namespace_and_fit_useradd() -> None:
    a, b = (local_tenants.user_name("skyshift-run", ns) for ns in ("team-a", "team-b"))
    assert a != b and a.startswith("skyshift-run-") and len(a) <= 32
    assert local_tenants.user_name("skyshift-run", "team-a") == a  # stable across stacks
    with pytest.raises(Permanent, match="too long"):
        local_tenants.user_name("x" * 30, "team-a")


async def test_namespaces_run_as_different_users_of_one_group(
    tenants: LocalManager, run_user: str
) -> None:
    script = ('echo "uid=$(id -u)"; echo "gid=$(id -g)"; '
              'echo "nnp=$(grep NoNewPrivs /proc/self/status | cut -f2)"')
    a = await probe(tenants, "team-a", script)
    b = await probe(tenants, "team-b", script)
    again = await probe(tenants, "team-a", script)
    group = pwd.getpwnam(run_user).pw_gid
    assert a["uid"] != b["uid"] and "0" not in (a["uid"], b["uid"])
    assert again["uid"] == a["uid"]
    assert a["gid"] == b["gid"] == str(group)
    assert a["nnp"] == "1"  # no setgid program can take the job out of the firewall's group
    assert pwd.getpwuid(int(a["uid"])).pw_name == local_tenants.user_name(run_user, "team-a")


async def test_a_namespace_cannot_see_or_read_another(tenants: LocalManager) -> None:
    victim = await start(tenants, "team-b", "echo secret >note; sleep 300",
                         envs={"VICTIM_TOKEN": "tok-123"})
    await asyncio.sleep(0.3)
    workdir = (tenants._replicas / victim.name / "work").resolve()
    pids = [p for p in os.listdir("/proc") if p.isdigit() and cwd_of(p) == str(workdir)]
    assert pids, "the victim's process is not running in its working directory"
    script = "; ".join([
        f'if cat /proc/{pids[0]}/environ >/dev/null 2>&1; then echo environ=READ; '
        'else echo environ=denied; fi',
        f'if cat {workdir}/note >/dev/null 2>&1; then echo note=READ; else echo note=denied; fi',
        'echo "seen=$(ls /proc | grep -c "^[0-9]")"',
        'echo "pid1=$(test -e /proc/1 && echo visible || echo hidden)"',
    ])  # fmt: skip
    seen = await probe(tenants, "team-a", script)
    assert (seen["environ"], seen["note"], seen["pid1"]) == ("denied", "denied", "hidden"), seen
    assert 0 < int(seen["seen"]) <= 5, seen  # its own shell and the commands it runs
    assert Path(f"/proc/{pids[0]}/environ").read_bytes().count(b"tok-123") == 1  # control


async def test_exec_runs_as_the_namespace_user_with_its_private_proc(
    tenants: LocalManager, run_user: str
) -> None:
    spec = await start(tenants, "team-a", "sleep 300")
    result = await tenants.exec(spec.name, ["sh", "-c", 'id -un; test -e /proc/1 || echo hid'])
    assert result.exit_code == 0, result
    assert result.stdout.split() == [local_tenants.user_name(run_user, "team-a"), "hid"]


def test_namespace_users_need_run_as(local_factory: Callable[..., LocalManager]) -> None:
    with pytest.raises(Permanent, match="namespace_users needs run_as"):
        local_factory(namespace_users=True)


def test_add_system_user_creates_one_without_login_or_says_why() -> None:
    """The one way SkyShift creates its users (namespace users, HAProxy's): a system user with
    no home and no shell; a name useradd refuses is a Permanent error naming the purpose."""
    require(os.geteuid() == 0 and shutil.which("useradd") is not None,
            "root and useradd (creating users)")
    name = f"skyshift-t{uuid.uuid4().hex[:8]}"
    try:
        entry = local_tenants.add_system_user(name, ["--user-group"], "SkyShift test", "for a test")
        assert entry.pw_name == name and entry.pw_uid != 0
        assert entry.pw_shell == "/usr/sbin/nologin" and entry.pw_dir == "/nonexistent"
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)
    with pytest.raises(Permanent, match="for a test"):
        local_tenants.add_system_user("bad:name", ["--user-group"], "x", "for a test")
