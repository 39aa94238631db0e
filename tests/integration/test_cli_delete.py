"""``skyctl delete`` of an object that is already being torn down says so (the original's CLI
tests: a second ``delete service`` printed a bare "deleting"), and ``get svc`` shows the phase."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skyshift.cli.main import cli
from tests.fixtures.api import MakeApi, RecordingLifecycle, uvicorn_server

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


async def test_second_delete_of_a_service_says_it_is_already_being_deleted(
    make_api: MakeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the lifecycle records the hooks and never finishes the teardown: the service stays Deleting
    app = make_api(lifecycle=RecordingLifecycle())
    async with uvicorn_server(app) as url:
        monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("SKYSHIFT_SERVER", url)
        monkeypatch.setenv("SKYSHIFT_TOKEN", "unused-auth-is-off")

        async def skyctl(*args: str) -> Any:
            return await asyncio.to_thread(CliRunner().invoke, cli, list(args))

        created = await skyctl("create", "svc", "web", "-s", "app", "web", "-p", "80", "8080")
        assert created.exit_code == 0, created.output
        first = await skyctl("delete", "svc", "web")
        assert first.exit_code == 0 and first.stdout == "service/web deleting\n"
        second = await skyctl("delete", "svc", "web")
        assert second.exit_code == 0, second.output
        assert "service/web is already being deleted (since " in second.stdout
        table = await skyctl("get", "svc")
        header, row = table.stdout.splitlines()[:2]
        status = header.split().index("STATUS")
        assert row.split()[status] == "Deleting"
