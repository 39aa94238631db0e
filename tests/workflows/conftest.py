"""Each workflow test has a time-skipping server of its own (tests/fixtures/temporal.py,
``workflow_env``), stopped when the test ends with whatever workflows the test left running:
no timer, task or lock on time skipping of one test reaches the next."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.workflows import fakes


@pytest.fixture(autouse=True)
def forget_started() -> Iterator[None]:
    yield
    fakes.STARTED.clear()
