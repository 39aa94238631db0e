"""A finished workflow's history replays against the current code; with
``SKYSHIFT_RECORD_HISTORIES=1`` it is also written to tests/workflows/histories/ (the corpus
test_replay.py replays without any server), so a later change to the workflow's structure that
issues other commands for the same history fails there."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.worker import Replayer

from skyshift.lifecycle.converter import DATA_CONVERTER
from skyshift.workers.control import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"


async def replays(handle: WorkflowHandle[Any, Any], label: str) -> None:
    history = await handle.fetch_history()
    if os.environ.get("SKYSHIFT_RECORD_HISTORIES") == "1":
        HISTORIES.mkdir(parents=True, exist_ok=True)
        (HISTORIES / f"{label}.json").write_text(history.to_json())
    result = await Replayer(workflows=WORKFLOWS, data_converter=DATA_CONVERTER).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert result.replay_failure is None, (label, result.replay_failure)
