"""Workflow tests share one time-skipping server: every workflow a test starts is terminated
when the test ends, so a leftover timer can never hold up time skipping in the next test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.client import WorkflowHandle

from tests.workflows import fakes


@pytest_asyncio.fixture(autouse=True)
async def terminate_leftovers() -> AsyncIterator[None]:
    yield
    handles: list[WorkflowHandle[object, object]] = list(fakes.STARTED)
    fakes.STARTED.clear()
    for h in handles:
        with contextlib.suppress(Exception):
            await h.terminate("test over")
