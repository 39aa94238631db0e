"""SkyPilotClient.call ends at its timeout even when a daemon still holds the runner's pipe.

SkyPilot starts daemons (its API server) that inherit the runner's stdout. The read used to
wait for EOF, so a runner killed at its timeout left the call (and the provisioning activity)
waiting on the daemon forever. The "runner" here is a shell script in a throwaway venv,
below the adapter boundary: the subprocess handling is what is tested.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from skyshift.compat.errors import Transient
from skyshift.compat.skypilot.client import MARK, SkyPilotClient


def _venv(tmp_path: Path, body: str) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "python"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return venv


def _call(client: SkyPilotClient, timeout: float) -> BaseException | object:
    """The call's result or error, or a TimeoutError if it has not returned in 30 s."""
    out: list[BaseException | object] = []

    def run() -> None:
        try:
            out.append(client.call("status", {}, timeout=timeout))
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    return out[0] if out else TimeoutError("call did not return in 30 s")


def test_call_ends_at_timeout_while_a_daemon_holds_the_pipe(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    # the daemon: a new session (outside the runner's group, like SkyPilot's API server)
    # keeping stdout open; then the runner hangs without answering
    venv = _venv(tmp_path, f"setsid sleep 120 & echo $! > {pidfile}\necho working\nsleep 120\n")
    try:
        got = _call(SkyPilotClient(venv=str(venv), user=""), timeout=2)
        assert isinstance(got, Transient), got
        assert "did not answer within 2s" in str(got)
    finally:
        if pidfile.exists():
            subprocess.run(["kill", pidfile.read_text().strip()], check=False)


def test_answer_is_read_while_a_daemon_holds_the_pipe(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    venv = _venv(tmp_path, f"setsid sleep 120 & echo $! > {pidfile}\n"
                           f"echo '{MARK}{{\"result\": [1, 2]}}'\n")
    try:
        assert _call(SkyPilotClient(venv=str(venv), user=""), timeout=20) == [1, 2]
        daemon = int(pidfile.read_text())
        os.kill(daemon, 0)  # the daemon is not the runner's to end: it still runs
    finally:
        if pidfile.exists():
            subprocess.run(["kill", pidfile.read_text().strip()], check=False)


def test_runner_dying_without_answer_says_why(tmp_path: Path) -> None:
    venv = _venv(tmp_path, "echo 'Traceback: no module named sky'\nexit 3\n")
    # a deadline far past the 30 s _call waits: the call ends at EOF, not at its deadline
    got = _call(SkyPilotClient(venv=str(venv), user=""), timeout=3600)
    assert isinstance(got, Transient), got
    assert "exit 3" in str(got) and "no module named sky" in str(got)


@pytest.mark.parametrize("size", [1, 200_000])
def test_long_output_lines_are_read_whole(tmp_path: Path, size: int) -> None:
    venv = _venv(tmp_path, f"head -c {size} /dev/zero | tr '\\0' x; echo\n"
                           f"echo '{MARK}{{\"result\": \"ok\"}}'\n")
    assert _call(SkyPilotClient(venv=str(venv), user=""), timeout=20) == "ok"


def test_warm_client_answers_from_the_runner_started_ahead(tmp_path: Path) -> None:
    """A warm client starts the next runner with each call; the next call takes it, and close
    ends the one left waiting."""
    started = tmp_path / "started"
    # each runner notes its pid as it starts, then waits for its request and answers its pid
    venv = _venv(tmp_path, f"echo $$ >> {started}\ncat > /dev/null\n"
                           f"echo '{MARK}{{\"result\": '$$'}}'\n")

    def runners(count: int) -> list[int]:
        for _ in range(300):  # a started runner notes itself within moments
            pids = [int(p) for p in started.read_text().split()] if started.exists() else []
            if len(pids) >= count:
                return pids
            time.sleep(0.1)
        raise AssertionError(f"{count} runners never started")

    client = SkyPilotClient(venv=str(venv), user="", warm=True)
    try:
        first = _call(client, timeout=20)
        ahead = runners(2)
        assert first in ahead
        [spare] = [p for p in ahead if p != first]
        assert _call(client, timeout=20) == spare
        [waiting] = [p for p in runners(3) if p not in ahead]
    finally:
        client.close()
    with pytest.raises(ProcessLookupError):
        os.kill(waiting, 0)
