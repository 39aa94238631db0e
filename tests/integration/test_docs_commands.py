"""Every shell block of README.md and docs/*.md runs as written, in page order, on a real stack
(``skyshift up`` in a tmp home, ``skyctl`` logged in by it), so a page cannot drift from what a
newcomer gets. A failure names the page, the block's line and the command. Blocks that cannot
run here carry a ``<!-- docs-test: ... -->`` annotation (tests/fixtures/docs_blocks.py); the run
prints how many blocks ran and which were skipped, and why."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skyshift.devstack.sim import k8s as sim_k8s
from skyshift.devstack.sim import ray as sim_ray
from skyshift.devstack.sim import slurm as sim_slurm
from tests.fixtures.balancers import stop_balancers_under
from tests.fixtures.docs_blocks import ROOT, directive, pages, parse
from tests.fixtures.docs_run import AfterCommand, PageRunner, Tally
from tests.fixtures.require import strict
from tests.fixtures.stack import stack_up

pytestmark = pytest.mark.integration


def stop_simulators(home: Path) -> None:
    """What ``skyshift sim ray|k8s|slurm down`` do for the stack in ``home``, in this process:
    three CLI runs cost a Python start each (seconds on a loaded machine) for the same calls. A
    failure is printed, not raised, as the CLI's exit status was not checked either."""
    stops: list[tuple[Callable[[Path], object], Path]] = [
        (sim_ray.stop_ray_clusters, sim_ray.default_home(home)),
        (sim_k8s.stop_k8s_clusters, home / "sim" / "k8s"),
        (sim_slurm.stop_slurm_clusters, home / "sim" / "slurm"),
    ]
    for stop, where in stops:
        try:
            stop(where)
        except Exception as exc:  # teardown: report it and go on with the others
            print(f"stopping the simulators under {where} failed: {exc}", file=sys.stderr)


@pytest.fixture(scope="module")
def runner(request: pytest.FixtureRequest) -> Iterator[PageRunner]:
    """One stack for every page, in a short home (Ray's socket paths go under it)."""
    base = Path(tempfile.mkdtemp(prefix="sdoc-", dir="/tmp"))
    base.chmod(0o711)
    home = base / "h"
    home.mkdir(mode=0o711)
    tally = Tally()
    try:
        with stack_up(home) as stack:
            try:
                yield PageRunner.make(stack.env, stack.home, base / "w", tally)
            finally:
                # what a page left running: simulators, replicas of local clusters, HAProxies
                stop_simulators(stack.home)
                shutil.rmtree(sim_ray.default_home(stack.home), ignore_errors=True)
                purge = stack.run_skyshift("down", "--purge")
            assert purge.returncode == 0, purge.stdout + purge.stderr
    finally:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(tally.summary())
        # the pages' own local clusters keep their state under base/w, where `down --purge`
        # does not look: their service balancers (HAProxy) outlive the stack otherwise
        stop_balancers_under(base)
        shutil.rmtree(base, ignore_errors=True)


def page_names(skypilot: bool) -> list[str]:
    """The pages, those with a block that needs the SkyPilot test bed or the others. The bed is
    one per machine and a test session's fixture holds it from its first use to the session's
    end, so tests/e2e/test_docs_skypilot.py runs those pages before anything else takes it."""
    names = []
    for path in pages():
        page = path.relative_to(ROOT).as_posix()
        needs = any("skypilot" in directive(b).needs for b in parse(path.read_text(), page))
        if needs == skypilot:
            names.append(page)
    return names


def run_page(runner: PageRunner, page: str, after: AfterCommand | None = None) -> None:
    """Run the page's blocks in order; ``after`` sees each command that succeeded."""
    cwd = runner.page_dir(page)
    for block in parse((ROOT / page).read_text(), page):
        runner.run_block(block, cwd, strict(), after)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", page_names(skypilot=False))
def test_page_commands_run(runner: PageRunner, page: str) -> None:
    run_page(runner, page)
