"""The pages whose blocks drive the SkyPilot test bed (``skyshift sim skypilot up``), run as
written like every other page (tests/integration/test_docs_commands.py). They run here, in a
module that sorts before every other user of the bed: the bed is one per machine, and the
session's SkyPilot fixture holds its lock from its first use until the session ends, so a
``skyshift sim skypilot up`` after that would wait for the session to end.

docs/provisioning.md is also the newcomer's path to a provisioned cluster: its run is checked
as a user would check it (tests/e2e/newcomer_checks.py), so the suite launches one SkyPilot
cluster for both instead of walking the same path twice."""

from __future__ import annotations

import pytest

from tests.e2e.newcomer_checks import PAGE, NewcomerChecks
from tests.fixtures.docs_run import PageRunner, component_missing
from tests.integration.test_docs_commands import page_names, run_page, runner

pytestmark = pytest.mark.integration
__all__ = ["runner"]  # the fixture: a stack of this module's own


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", page_names(skypilot=True))
def test_skypilot_page_commands_run(runner: PageRunner, page: str) -> None:
    if page != PAGE:
        run_page(runner, page)
        return
    checks = NewcomerChecks(runner, runner.page_dir(page))
    run_page(runner, page, after=checks)
    if component_missing("skypilot") is None:  # else its block was skipped (not ./dev test)
        checks.done()
