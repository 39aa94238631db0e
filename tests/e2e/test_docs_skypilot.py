"""The pages whose blocks drive the SkyPilot test bed (``skyshift sim skypilot up``), run as
written like every other page (tests/integration/test_docs_commands.py). They run here, in a
module that sorts before every other user of the bed: the bed is one per machine, and the
session's SkyPilot fixture holds its lock from its first use until the session ends, so a
``skyshift sim skypilot up`` after that would wait for the session to end."""

from __future__ import annotations

import pytest

from tests.fixtures.docs_run import PageRunner
from tests.integration.test_docs_commands import page_names, run_page, runner

pytestmark = pytest.mark.integration
__all__ = ["runner"]  # the fixture: a stack of this module's own


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", page_names(skypilot=True))
def test_skypilot_page_commands_run(runner: PageRunner, page: str) -> None:
    run_page(runner, page)
