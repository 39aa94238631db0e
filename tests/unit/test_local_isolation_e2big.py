"""A replica whose environment the kernel refuses (E2BIG) fails once, permanently.

Retrying cannot make ``execve`` accept it, so the local adapter must say Permanent (which the
skylet's activities turn into a non-retryable ApplicationError) instead of Transient, which
Temporal would retry for as long as the job lives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from temporalio.exceptions import ApplicationError

from skyshift.activities.clusters import compat_errors
from skyshift.compat.errors import Permanent
from skyshift.compat.local.adapter import LocalManager
from tests.fixtures.compat import local_factory, make_spec

__all__ = ["local_factory"]  # a fixture, imported explicitly (see test_compat_local.py)

# Linux refuses any single "NAME=value" string longer than 32 pages (MAX_ARG_STRLEN, 128 KiB).
TOO_BIG = "x" * (256 * 1024)


@pytest.fixture
async def local(local_factory: Callable[..., LocalManager]) -> AsyncIterator[LocalManager]:
    manager = local_factory()
    await manager.connect()
    yield manager
    for status in await manager.replicas():
        await manager.delete_job(status.job_uid)


async def test_env_value_too_big_for_execve_is_permanent(local: LocalManager) -> None:
    spec = make_spec("echo never", envs={"BIG": TOO_BIG})
    with pytest.raises(Permanent) as err:
        await local.submit([spec])
    assert "Argument list too long" in str(err.value)
    assert spec.name in str(err.value)
    # what the skylet's submit activity makes of it: an error Temporal will not retry
    with pytest.raises(ApplicationError) as app_err, compat_errors():
        await local.submit([spec])
    assert app_err.value.non_retryable
    assert app_err.value.type == "Permanent"


async def test_run_command_too_big_for_execve_is_permanent(local: LocalManager) -> None:
    spec = make_spec(f": {TOO_BIG}")
    with pytest.raises(Permanent, match="too big"):
        await local.submit([spec])


async def test_a_normal_replica_still_starts_after_one_was_refused(local: LocalManager) -> None:
    with pytest.raises(Permanent):
        await local.submit([make_spec("true", envs={"BIG": TOO_BIG})])
    [status] = await local.submit([make_spec("sleep 5", envs={"SMALL": "x" * 1000})])
    assert status.state == "Running"
