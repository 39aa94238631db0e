"""Named points where the fault suite stops a process on purpose (like etcd's gofail).

Off unless ``SKYSHIFT_FAILPOINTS`` names a directory. Then, when the code reaches a point
``<name>`` and the file ``<dir>/<name>.armed`` exists, the process claims it (renames it to
``<name>.hit``, so one arming stops one pass) and waits ``<dir>/<name>.pause`` seconds (default
30) before it goes on. A test arms a point, waits for ``.hit`` and then kills what it wants to kill
at exactly that moment: Temporal right after a scheduler round has told its jobs their placement
but before the round's completion is recorded, say. Without the variable a point costs one dict
lookup; nothing in a deployment sets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)
ENV = "SKYSHIFT_FAILPOINTS"
DEFAULT_PAUSE = 30.0
PLACE_BATCH_SIGNALLED = "place_batch.signalled"  # every placement of a round told its job
PREEMPT_SIGNALLED = "place_batch.preempted"  # a round told a preemptor's victims to go


async def reached(name: str) -> None:
    """Pause here if the fault suite armed ``name`` (see the module docstring)."""
    where = os.environ.get(ENV)
    if not where:
        return
    base = Path(where)
    try:
        (base / f"{name}.armed").rename(base / f"{name}.hit")
    except OSError:
        return  # not armed (or another pass claimed it)
    pause = DEFAULT_PAUSE
    with contextlib.suppress(OSError, ValueError):
        pause = float((base / f"{name}.pause").read_text())
    log.warning("failpoint %s reached: pausing %.1fs", name, pause)
    await asyncio.sleep(pause)
