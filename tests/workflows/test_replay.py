"""Replay the committed histories (tests/workflows/histories/*.json) against the current code.

Job, Service, scheduler and Cluster histories were recorded on the real dev server by
tests/integration/test_lifecycle_replay.py and test_provision_lifecycle.py; Pipeline, Schedule,
scheduled run, Link and provisioned Cluster ones by the workflow tests of this folder
(time-skipping server, fake activities; :mod:`tests.workflows.record`). All with
``SKYSHIFT_RECORD_HISTORIES=1``. A change that makes a workflow issue different commands for the
same history (non-determinism) fails here: such a change needs ``workflow.patched`` instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from skyshift.lifecycle.converter import DATA_CONVERTER
from skyshift.workers.control import WORKFLOWS

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


@pytest.mark.asyncio
@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await Replayer(workflows=WORKFLOWS, data_converter=DATA_CONVERTER).replay_workflow(history)


def test_corpus_is_there() -> None:
    assert len(HISTORIES) >= 4, "record with SKYSHIFT_RECORD_HISTORIES=1 (see module docstring)"
