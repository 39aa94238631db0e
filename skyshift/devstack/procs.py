"""Detached processes: start in their own session, find them again by pid file, stop by group.

``up`` exits while the stack keeps running, so every component gets ``start_new_session`` (its
own process group, immune to the terminal's Ctrl-C) and a pid file. A later command recognises
the process by pid *and* start time (``/proc/<pid>/stat``), so a pid reused by an unrelated
process is treated as a stale pid file, never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from skyshift.compat.local.proc import pid_exists

_PROC = Path("/proc")


def read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def write_pid(pid_file: Path, pid: int) -> None:
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = pid_file.with_suffix(".pid.tmp")
    tmp.write_text(f"{pid}\n")
    os.replace(tmp, pid_file)


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0], pgrp [2])."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks since boot, or None where /proc is unavailable."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not count)."""
    if not pid_exists(pid):
        return False
    fields = _stat_fields(pid)
    return not (fields and fields[0] in ("Z", "X"))


def is_ours(pid: int, recorded_ticks: int | None) -> bool:
    """Alive and, when we know its start time, the same process we started."""
    if not alive(pid):
        return False
    if recorded_ticks is None:
        return True
    ticks = start_ticks(pid)
    return ticks is None or ticks == recorded_ticks


def group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in process group ``pgid``."""
    if not _PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def spawn(
    argv: list[str], env: dict[str, str], log: Path, cwd: Path, drop: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """Start ``argv`` detached, with stdout and stderr appended to ``log``.

    The child inherits this environment plus ``env``, minus variables starting with ``drop``.
    """
    inherited = {k: v for k, v in os.environ.items() if not (drop and k.startswith(drop))}
    log.parent.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        stamp = datetime.now().isoformat(timespec="seconds")
        fh.write(f"\n=== {stamp} skyshift up: {' '.join(argv)}\n".encode())
        fh.flush()
        return subprocess.Popen(
            argv,
            env={**inherited, **env},
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )


def stop_group(pid: int, grace: float) -> str:
    """SIGTERM the process group led by ``pid``, SIGKILL after ``grace`` seconds.

    Returns ``"stopped"``, ``"killed"`` or ``"gone"`` (nothing was left to signal).
    """

    def signal_group(sig: signal.Signals) -> bool:
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return False
        except PermissionError:
            os.kill(pid, sig)
        return True

    if not signal_group(signal.SIGTERM):
        return "gone"
    if _wait(lambda: not group_alive(pid), grace):
        return "stopped"
    signal_group(signal.SIGKILL)
    _wait(lambda: not group_alive(pid), 5.0)
    return "killed"


def _wait(done: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if done():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file (empty when missing)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])
