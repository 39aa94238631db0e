"""``skyshift replay-check``: bad arguments and an unreachable Temporal are one clear line and
exit code 2 (the gate did not run), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from skyshift.devstack.cli import main
from skyshift.workers.replay import queries
from tests.fixtures.ports import free_port


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["replay-check", *args], env=env)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_help_explains_the_gate_and_exit_codes() -> None:
    code, out = run("--help")
    assert code == 0
    for words in (
        "before restarting any worker",
        "--since",
        "--limit",
        "Exits 0",
        "1 when",
        "2 when the check cannot run",
    ):
        assert words in " ".join(out.split()), words


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--limit", "0"], "--limit"),
        (["--since", "-1"], "--since"),
        (["--concurrency", "0"], "--concurrency"),
        (["--since", "a day"], "--since"),
        (["--bogus"], "--bogus"),
    ],
)
def test_bad_arguments_name_the_option(args: list[str], named: str) -> None:
    code, out = run(*args)
    assert code == 2
    assert named in out


def test_unreachable_temporal_is_exit_2_naming_the_address() -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    code, out = run("--address", address)
    assert code == 2
    assert f"error: cannot reach Temporal at {address}" in out


def test_half_a_client_certificate_is_exit_2_naming_the_variables(tmp_path: Path) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("not used")
    code, out = run(
        "--address", f"127.0.0.1:{free_port()}", env={"SKYSHIFT_TEMPORAL_TLS_CERT": str(cert)}
    )
    assert code == 2
    assert "SKYSHIFT_TEMPORAL_TLS_KEY" in out


def test_lists_the_control_queue_open_and_recently_closed() -> None:
    from datetime import UTC, datetime

    open_q, closed_q = queries(datetime(2026, 11, 27, 16, 0, tzinfo=UTC))
    assert open_q == "TaskQueue = 'skyshift-control' AND ExecutionStatus = 'Running'"
    assert closed_q.endswith("CloseTime > '2026-11-27T16:00:00Z'")
