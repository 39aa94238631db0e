"""The SkyPilot driver's long-lived runner: one process serves many calls, side by side, each
call's progress going to it alone; a call ends at its deadline; a runner that dies, freezes or
piles up abandoned requests is replaced, and the calls in flight get Transient, not a hang.

The runner is the real ``runner.py``; ``sky`` is a fake (tests/fixtures/fake_sky.py, below the
adapter boundary) whose cluster names choose how a SkyPilot request behaves.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skyshift.compat.errors import Permanent, Transient
from skyshift.compat.skypilot import process
from skyshift.compat.skypilot.client import SkyPilotClient
from tests.fixtures.fake_sky import fake_venv


@pytest.fixture
def client(tmp_path: Path) -> Iterator[SkyPilotClient]:
    made = SkyPilotClient(venv=str(fake_venv(tmp_path, sys.executable)), user="")
    yield made
    made.end_runner()
    made.close()


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run ``fn`` in a thread; its result or error lands in the list."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _pid(client: SkyPilotClient, cluster: str = "any", timeout: float = 60) -> int:
    """The pid of the runner that answered (the fake's status says it as head_ip)."""
    return int(client.call("status", {"clusters": [cluster]}, timeout=timeout)[0]["head_ip"])


def _gone(pid: int) -> bool:
    for _ in range(300):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _log(tmp_path: Path) -> list[str]:
    log = tmp_path / "fakesky.log"
    return log.read_text().splitlines() if log.exists() else []


def test_one_runner_serves_the_calls_of_all_clients(client: SkyPilotClient, tmp_path: Path) -> None:
    first = _pid(client)
    assert _pid(client) == first
    other = SkyPilotClient(venv=str(client.venv), user="")
    assert _pid(other) == first  # same venv and user: the same process
    other.close()
    assert _pid(client) == first  # another client still holds it
    client.close()
    assert _gone(first)  # the last client closed: the runner ended


def test_a_client_that_holds_keeps_the_runner_through_a_swap(client: SkyPilotClient) -> None:
    """A rebuilt manager's client holds before the old one closes: the runner lives on."""
    first = _pid(client)
    successor = SkyPilotClient(venv=str(client.venv), user="")
    successor.hold()  # built, no call yet
    client.close()  # the manager it replaces lets go
    assert _pid(successor) == first  # same process: SkyPilot not imported again
    successor.close()
    assert _gone(first)  # the last holder closed: the runner ended


def test_calls_run_side_by_side_with_their_own_progress(client: SkyPilotClient) -> None:
    seen: dict[str, list[str]] = {"slow": [], "quick": []}

    def down(cluster: str) -> object:
        return client.call("down", {"cluster": cluster}, timeout=60, progress=seen[cluster].append)

    slow, slow_out = _in_thread(lambda: down("slow"))
    quick, quick_out = _in_thread(lambda: down("quick"))
    quick.join(60)
    assert quick_out == [{"absent": False}]
    slow.join(60)
    assert slow_out == [{"absent": False}]
    for cluster, lines in seen.items():
        # SkyPilot's stream and what its logger printed, of that call only
        assert sorted(lines) == sorted(
            [f"{cluster} streamed {i}" for i in range(3)]
            + [f"{cluster} logged {i}" for i in range(3)]
        )


def test_a_slow_call_does_not_hold_up_the_next(client: SkyPilotClient) -> None:
    slow, out = _in_thread(lambda: client.call("status", {"clusters": ["hang"]}, timeout=60))
    try:
        assert _pid(client)  # answered while the first call still waits
        assert slow.is_alive() and out == []
    finally:
        client.end_runner()
    slow.join(30)
    assert isinstance(out[0], Transient)


def test_a_call_past_its_deadline_is_transient_and_its_request_cancelled(
    client: SkyPilotClient, tmp_path: Path
) -> None:
    pid = _pid(client)
    with pytest.raises(Transient, match="did not answer within 2s"):
        client.call("status", {"clusters": ["hang"]}, timeout=2)
    for _ in range(300):
        if "cancel hang" in _log(tmp_path):
            break
        time.sleep(0.1)
    assert "cancel hang" in _log(tmp_path)  # SkyPilot's request cancelled, not left running
    assert _pid(client) == pid  # and the runner goes on serving


def test_a_dying_runner_fails_the_calls_in_flight_and_is_replaced(
    client: SkyPilotClient, tmp_path: Path
) -> None:
    pid = _pid(client)
    waiting, out = _in_thread(lambda: client.call("status", {"clusters": ["hang"]}, timeout=3600))
    with pytest.raises(Transient, match=r"ended without an answer.*exit 3"):
        client.call("status", {"clusters": ["die"]}, timeout=3600)
    waiting.join(30)  # far before its deadline: the runner is gone
    assert isinstance(out[0], Transient) and "exit 3" in str(out[0])
    daemon = int(next(line.split()[1] for line in _log(tmp_path) if line.startswith("daemon")))
    try:
        os.kill(daemon, 0)  # the daemon SkyPilot started is not the runner's: it still runs
        assert _pid(client) != pid
    finally:
        os.kill(daemon, 9)


def test_a_frozen_runner_is_killed_and_replaced(
    client: SkyPilotClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "BEAT", 0.5)
    monkeypatch.setattr(process, "STALL", 3.0)
    pid = _pid(client)
    with pytest.raises(Transient, match="no word from the runner"):
        client.call("status", {"clusters": ["stop"]}, timeout=3600)
    assert _gone(pid)
    assert _pid(client) != pid


def test_too_many_abandoned_calls_replace_the_runner(
    client: SkyPilotClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "MAX_ABANDONED", 1)
    pid = _pid(client)
    for _ in range(2):  # a down is not cancelled: it runs on, as a one-shot process's did
        with pytest.raises(Transient, match="did not answer"):
            client.call("down", {"cluster": "hang"}, timeout=1)
    assert _pid(client) != pid
    assert _gone(pid)  # the retired runner served nothing else: ended


def test_long_answers_are_read_whole(client: SkyPilotClient) -> None:
    [record] = client.call("status", {"clusters": ["big"]}, timeout=60)
    assert record["head_ip"] == "x" * 200_000


def test_without_skypilot_every_call_is_permanent(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path, sys.executable, with_sky=False)
    bare = SkyPilotClient(venv=str(venv), user="")
    try:
        for _ in range(2):
            with pytest.raises(Permanent, match="No module named 'sky'"):
                bare.call("status", {"clusters": ["x"]}, timeout=60)
    finally:
        bare.close()


def test_a_runner_that_cannot_start_says_why(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(
        "#!/bin/sh\necho 'Traceback: no module named sky'\nexit 3\n"
    )
    (venv / "bin" / "python").chmod(0o755)
    broken = SkyPilotClient(venv=str(venv), user="")
    try:
        # a deadline far past the test's: the call ends when the runner does
        with pytest.raises(Transient, match=r"exit 3.*no module named sky"):
            broken.call("status", {}, timeout=3600)
    finally:
        broken.close()
