"""A manager's optional ``prepare()``: the skylet calls it when it builds a cluster's manager, so
what the first call needs is started ahead of it (the ``skypilot`` manager: its SkyPilot runner,
seconds of import, while the Cluster is still provisioning). Best effort: a manager without it,
or one whose prepare fails, is left to its first call."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.compat.base import prepare
from skyshift.compat.skypilot.client import SkyPilotClient
from skyshift.compat.skypilot.process import _SHARED
from tests.fixtures.skypilot_driver import fake_manager


class _Plain:
    """A manager without prepare()."""


class _Failing:
    name = "bad"

    async def prepare(self) -> None:
        raise RuntimeError("cannot start")


@pytest.mark.asyncio
async def test_prepare_is_optional_and_never_raises() -> None:
    await prepare(_Plain())  # type: ignore[arg-type]
    await prepare(_Failing())  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_skypilot_manager_warms_its_runner_without_calling_skypilot(
        tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "prep", sky_clusters=[])
    await prepare(manager)
    assert driver.calls == ["warm"]


def test_warm_without_skypilot_installed_starts_nothing(tmp_path: Path) -> None:
    client = SkyPilotClient(str(tmp_path / "no-venv"), None, 5.0)
    before = dict(_SHARED)
    client.warm()
    assert dict(_SHARED) == before
    client.close()
