"""Process plumbing shared by the control worker and the skylet manager.

Both are long-running processes started by ``skyshift up`` (or a production supervisor): they
read Settings from the environment, connect to Temporal and etcd with retries while those are
still starting, write a ready file once they poll, and stop cleanly on SIGTERM/SIGINT (the
original's per-cluster process ignored SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.runtime import Runtime

from skyshift.config import Settings
from skyshift.lifecycle.client import connect
from skyshift.store import ObjectStore, StoreError

log = logging.getLogger(__name__)


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    try:
        return float(value) if value else default
    except ValueError:
        log.warning("ignoring %s=%r: not a number", name, value)
        return default


def env_flag(name: str, default: bool = False) -> bool:
    """A boolean setting: 1/true/yes/on (any case) is true, anything else is false; unset or
    empty is ``default``."""
    value = os.environ.get(name, "").strip().lower()
    return default if not value else value in ("1", "true", "yes", "on")


def ready_path(settings: Settings, name: str) -> Path:
    """``$SKYSHIFT_READY_FILE`` when set (``skyshift up`` sets it), else
    ``$SKYSHIFT_HOME/run/<name>.ready``."""
    explicit = os.environ.get("SKYSHIFT_READY_FILE")
    return Path(explicit) if explicit else settings.home / "run" / f"{name}.ready"


def mark_ready(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{os.getpid()}\n")


def clear_ready(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


async def cancel_and_wait(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has finished cancelling."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def first_to_end(*coros: Coroutine[Any, Any, None]) -> None:
    """Run ``coros`` together until the first ends (or raises: that is re-raised), then cancel
    the others. ``asyncio.gather`` would leave them running when one raises."""
    tasks = [asyncio.create_task(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        await cancel_and_wait(tasks)


def stop_event() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (installed on the running loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def connect_temporal(
    settings: Settings, stop: asyncio.Event, retry: float = 1.0, runtime: Runtime | None = None,
) -> Client:
    while True:
        try:
            return await connect(
                settings.temporal_address, settings.temporal_namespace, runtime=runtime
            )
        except Exception as exc:  # server still starting: keep trying until told to stop
            log.warning("temporal at %s not reachable yet: %s", settings.temporal_address, exc)
        await _pause(stop, retry)


async def connect_store(settings: Settings, stop: asyncio.Event, retry: float = 1.0) -> ObjectStore:
    while True:
        store = ObjectStore(settings.etcd_endpoints, settings.store_prefix)
        try:
            await store.connect()
            return store
        except StoreError as exc:
            log.warning("etcd at %s not reachable yet: %s", settings.etcd_endpoints, exc)
            await store.close()
        await _pause(stop, retry)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    if stop.is_set():
        raise asyncio.CancelledError("stopping")
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    if stop.is_set():
        raise asyncio.CancelledError("stopping")


def setup_logging() -> None:
    level = os.environ.get("SKYSHIFT_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
