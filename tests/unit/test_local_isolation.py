"""Local replicas with ``run_as``: the job runs as an unprivileged user and cannot read what the
control plane keeps private (a 0700 ``SKYSHIFT_HOME``-like directory, the cluster's state dir).

What a user would check by hand: ``id -u`` in a job prints a non-zero uid, ``cat`` of the admin
password fails, the job can write in its working directory, ``skyctl exec`` is the same user.
The tests need root (to switch users); they create the system user ``skyshift-run`` as
``skyshift up`` does.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.local import user as local_user
from skyshift.compat.local.adapter import LocalManager
from skyshift.devstack.local import ensure_run_user
from tests.fixtures.compat import local_config, local_factory, make_spec, wait_state

__all__ = ["local_factory"]  # a fixture, imported explicitly (see test_compat_local.py)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


@pytest.fixture(scope="module")
def run_user() -> str:
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    return ensure_run_user()


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    """A SKYSHIFT_HOME-like directory: 0700 with a 0600 admin password in a 0700 auth/."""
    home = tmp_path / "home"
    (home / "auth").mkdir(parents=True)
    os.chmod(home, 0o700)
    os.chmod(home / "auth", 0o700)
    password = home / "auth" / "admin-password"
    password.write_text("s3cret\n")
    os.chmod(password, 0o600)
    return home


@pytest.fixture
def work_roots() -> Iterator[list[Path]]:
    """Work roots the test's managers used, removed afterwards."""
    roots: list[Path] = []
    yield roots
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def isolated(
    local_factory: Callable[..., LocalManager], run_user: str, work_roots: list[Path]
) -> AsyncIterator[LocalManager]:
    manager = local_factory(run_as=run_user)
    work_roots.append(manager._work_root)
    await manager.connect()
    yield manager
    for status in await manager.replicas():
        await manager.delete_job(status.job_uid)


async def run_to_end(manager: LocalManager, run: str) -> tuple[str, str]:
    """(final state, log) of a replica running ``run``."""
    spec = make_spec(run)
    await manager.submit([spec])
    status = await wait_state(manager, spec.name, "Succeeded", "Failed")
    return status.state, await manager.logs(spec.name)


async def test_job_runs_as_the_unprivileged_user(isolated: LocalManager, run_user: str) -> None:
    state, log = await run_to_end(isolated, 'id -u; id -un; echo "home=$HOME user=$USER"')
    uid = pwd.getpwnam(run_user).pw_uid
    assert state == "Succeeded", log
    lines = log.splitlines()
    assert lines[0] == str(uid) and uid != 0
    assert lines[1] == run_user
    assert f"user={run_user}" in lines[2]


async def test_job_cannot_read_the_admin_password(isolated: LocalManager, secrets: Path) -> None:
    password = secrets / "auth" / "admin-password"
    state, log = await run_to_end(isolated, f"cat {password}")
    assert state == "Failed"
    assert "Permission denied" in log
    assert "s3cret" not in log
    state, log = await run_to_end(isolated, f"ls {secrets}")
    assert state == "Failed" and "Permission denied" in log


async def test_job_cannot_read_the_cluster_state(isolated: LocalManager) -> None:
    other = make_spec("sleep 30", envs={"TOKEN": "other-jobs-secret"})
    await isolated.submit([other])
    spec_file = isolated.config.state_dir / "replicas" / other.name / "spec.json"
    assert "other-jobs-secret" in spec_file.read_text()  # there, for root
    state, log = await run_to_end(isolated, f"cat {spec_file}")
    assert state == "Failed" and "other-jobs-secret" not in log
    assert oct(isolated.config.state_dir.stat().st_mode & 0o777) == "0o700"


async def test_job_writes_in_its_own_working_directory(isolated: LocalManager) -> None:
    state, log = await run_to_end(
        isolated, 'echo hi > out.txt && cat out.txt && cd "$PWD" && touch "$HOME/h" && pwd'
    )
    assert state == "Succeeded", log
    lines = log.splitlines()
    assert lines[0] == "hi"
    workdir = Path(lines[1])
    assert workdir.parent == isolated._work_root
    assert workdir.stat().st_uid != 0
    assert (workdir / "h").exists()


async def test_exec_runs_as_the_same_user(isolated: LocalManager, run_user: str) -> None:
    spec = make_spec("sleep 30")
    await isolated.submit([spec])
    await wait_state(isolated, spec.name, "Running")
    result = await isolated.exec(spec.name, ["sh", "-c", 'id -u; echo "$HOME"; pwd'])
    uid, home, cwd = result.stdout.splitlines()
    assert uid == str(pwd.getpwnam(run_user).pw_uid)
    assert home == cwd and Path(cwd).parent == isolated._work_root


async def test_delete_removes_the_working_directory(isolated: LocalManager) -> None:
    spec = make_spec("pwd; sleep 30")
    await isolated.submit([spec])
    await wait_state(isolated, spec.name, "Running")
    link = isolated.config.state_dir / "replicas" / spec.name / "work"
    workdir = link.resolve()
    assert workdir.is_dir() and workdir != link
    await isolated.delete([spec.name])
    assert not workdir.exists()


async def test_restart_keeps_the_working_directory(isolated: LocalManager) -> None:
    spec = make_spec("echo run >> runs; cat runs")
    await isolated.submit([spec])
    await wait_state(isolated, spec.name, "Succeeded")
    again = make_spec(spec.run, job=(spec.job_name, spec.job_uid), attempt=1)
    await isolated.submit([again])
    await wait_state(isolated, spec.name, "Succeeded")
    assert (await isolated.logs(spec.name)).split() == ["run", "run"]


# --- configuration ------------------------------------------------------------------------------


def test_unknown_user_is_a_permanent_config_error(tmp_path: Path) -> None:
    with pytest.raises(Permanent, match="no user 'no-such-user-here'"):
        LocalManager("c", local_config(tmp_path, run_as="no-such-user-here"))


def test_run_as_another_user_without_root_is_a_permanent_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_user.os, "geteuid", lambda: 4242)
    with pytest.raises(Permanent, match="needs the skylet to run as root"):
        LocalManager("c", local_config(tmp_path, run_as="root"))


def test_run_as_ourselves_needs_no_switch(tmp_path: Path) -> None:
    me = pwd.getpwuid(os.geteuid()).pw_name
    manager = LocalManager("c", local_config(tmp_path, run_as=me))
    assert manager._user is None


def test_bad_run_as_values_are_rejected(tmp_path: Path) -> None:
    for bad in (5, "a:b", " x"):
        with pytest.raises(Permanent, match="run_as"):
            LocalManager("c", local_config(tmp_path, run_as=bad))
    with pytest.raises(Permanent, match="work_root"):
        LocalManager("c", local_config(tmp_path, work_root="relative/dir"))


@needs_root
def test_root_without_run_as_warns_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=local_user.__name__):
        LocalManager("c", local_config(tmp_path))
    assert any("run as ROOT" in r.getMessage() for r in caplog.records)


async def test_work_root_the_user_cannot_reach_is_a_permanent_error(
    run_user: str, tmp_path: Path
) -> None:
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    manager = LocalManager(
        "c", local_config(tmp_path / "state", run_as=run_user, work_root=str(hidden / "w"))
    )
    with pytest.raises(Permanent, match="cannot reach work_root"):
        await manager.connect()
