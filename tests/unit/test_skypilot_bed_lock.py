"""The SkyPilot test bed lock: a session waiting for a lock its own process holds fails at once
(``skyshift sim skypilot up`` run by a test whose session fixture holds the bed used to wait for
an hour); a lock held by an unrelated process is waited for until the deadline."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from skyshift.devstack.sim import skypilot


@pytest.fixture()
def lock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lock = tmp_path / "bed.lock"
    monkeypatch.setattr(skypilot, "LOCK_FILE", lock)
    monkeypatch.setattr(skypilot, "HOLDER_FILE", tmp_path / "bed.lock.holder")
    return lock


def test_holder_is_recorded(lock_file: Path) -> None:
    with skypilot.testbed_lock(wait=0):
        assert skypilot.HOLDER_FILE.read_text().strip() == str(os.getpid())


def test_waiting_for_our_own_lock_fails_at_once(lock_file: Path) -> None:
    with (
        skypilot.testbed_lock(wait=0),
        pytest.raises(RuntimeError, match="would wait for itself"),
        skypilot.testbed_lock(wait=3600),
    ):
        pytest.fail("took a lock this process holds")


def test_a_foreign_holder_is_waited_for_until_the_deadline(lock_file: Path) -> None:
    lock_file.touch()
    # blocking, so the probes below cannot make it give up
    holder = subprocess.Popen(["flock", str(lock_file), "sleep", "60"])
    try:
        for _ in range(300):  # until flock(1) holds it
            assert holder.poll() is None
            probe = subprocess.run(["flock", "-n", str(lock_file), "true"], check=False)
            if probe.returncode != 0:
                break
            time.sleep(0.1)
        skypilot.record_holder(holder.pid)
        with (
            pytest.raises(RuntimeError, match="stayed busy"),
            skypilot.testbed_lock(wait=0),
        ):
            pytest.fail("took a lock another process holds")
    finally:
        holder.kill()
        holder.wait()
