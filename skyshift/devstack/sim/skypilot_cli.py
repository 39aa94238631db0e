"""``skyshift sim skypilot up|down|status``: the offline SkyPilot target from the command line.

``up`` starts the bed of :mod:`skyshift.devstack.sim.skypilot` (a simulated Slurm cluster behind
an sshd login node for SkyPilot's user) and leaves it running, enables SkyPilot's ``slurm``
infra (which starts SkyPilot's API server, so the first launch does not pay for it) and prints
the ``--infra`` value and a ``skyctl create cluster ... --provision`` line to paste. The bed is
the machine's one SkyPilot test bed: a process of ``flock(1)`` holds the test bed lock for as long
as it runs, so a test session waits for ``down`` rather than rewriting SkyPilot's user's
``~/.slurm/config`` under it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import click

from skyshift.compat.errors import Permanent, Transient
from skyshift.compat.skypilot.client import SkyPilotClient, stop_api_server
from skyshift.devstack.sim.skypilot import (
    INFRA,
    LOCK_FILE,
    BedMissing,
    SkySlurm,
    missing,
    record_holder,
    running_bed,
    start_bed,
    stop_bed,
    testbed_lock,
)
from skyshift.devstack.sim.slurm import SimSlurmError, _running_pid, _spawn, _stop

HOLDER_PID = "lock-holder.pid"
EXAMPLE = "sky1"


def default_root() -> Path:
    """Under the temporary directory, not $SKYSHIFT_HOME: SkyPilot's user must read it."""
    return Path(tempfile.gettempdir()) / "skyshift-sim-skypilot"


def create_line(name: str = EXAMPLE, infra: str = INFRA) -> str:
    """The ``skyctl create cluster`` line ``up`` prints (docs/provisioning.md uses it)."""
    return f"skyctl create cluster {name} --provision --infra {infra} --cpus 2 --memory 2 --wait"


def _hold_lock(root: Path, wait: float) -> None:
    """Take the test bed lock for as long as a ``flock`` process under ``root`` lives."""
    flock = shutil.which("flock")
    if flock is None:
        raise click.ClickException("`flock` (util-linux) is missing")
    click.echo(
        f"taking the SkyPilot test bed lock ({LOCK_FILE}; a test session using the bed "
        f"holds it: waiting up to {wait:g}s)"
    )
    try:
        with testbed_lock(wait):
            pass
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    root.mkdir(parents=True, exist_ok=True)
    holder = _spawn(
        [flock, "-n", str(LOCK_FILE), "sleep", "infinity"],
        root / "lock-holder.log",
        root / HOLDER_PID,
        {},
    )
    record_holder(holder)
    time.sleep(0.3)
    if _running_pid(root / HOLDER_PID) is None:
        raise click.ClickException("another process took the SkyPilot test bed lock; try again")


def _announce(bed: SkySlurm) -> None:
    click.echo(
        f"SkyPilot target ready: simulated Slurm cluster {bed.cluster.name} "
        f"({', '.join(bed.cluster.nodes)}) behind an ssh login on 127.0.0.1:{bed.ssh_port}"
        f" for user {bed.user}"
    )
    click.echo(f"infra: {bed.infra}")
    click.echo("provision a cluster on it (with `skyshift up` running):")
    click.echo(f"  {create_line(infra=bed.infra)}")


@click.group("skypilot")
def skypilot() -> None:
    """The offline SkyPilot target: SkyPilot against a simulated Slurm cluster (infra
    slurm/skysim1), for provisioned clusters (docs/provisioning.md)."""


_root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where its configs, state and logs live [default: /tmp/skyshift-sim-skypilot].",
)


@skypilot.command("up")
@_root_option
@click.option(
    "--lock-wait",
    type=click.FloatRange(0),
    default=600.0,
    show_default=True,
    help="Seconds to wait for a test session that holds the test bed.",
)
def up(root: Path | None, lock_wait: float) -> None:
    """Start it (a second `up` reuses the running one) and print the --infra to use."""
    root = (root or default_root()).absolute()
    bed = running_bed(root)
    if bed is not None:
        click.echo("already running (reused)")
        _announce(bed)
        return
    lack = missing()
    if lack is not None:
        raise click.ClickException(f"the SkyPilot target needs {lack}")
    _down(root)  # leftovers of a crashed run (its lock holder too)
    _hold_lock(root, lock_wait)
    try:
        click.echo(f"starting munged, slurmctld and 2 slurmd, and the login sshd under {root}")
        bed = start_bed(root)
        click.echo(
            "enabling SkyPilot's slurm infra (`sky check slurm`; starts SkyPilot's API server)"
        )
        SkyPilotClient(user=bed.user).check([bed.infra.split("/")[0]])
    except (BedMissing, SimSlurmError, Permanent, Transient, OSError) as exc:
        _down(root)
        raise click.ClickException(f"the SkyPilot target did not start: {exc}") from exc
    _announce(bed)


def _down(root: Path) -> bool:
    ours = _running_pid(root / HOLDER_PID) is not None
    client = SkyPilotClient()
    if ours and client.python.exists():  # else the API server may be a test session's
        stop_api_server(client)
    was_up = stop_bed(root)
    _stop(root / HOLDER_PID)
    shutil.rmtree(root, ignore_errors=True)
    return was_up


@skypilot.command("down")
@_root_option
def down(root: Path | None) -> None:
    """Stop SkyPilot's API server, cancel the Slurm jobs, stop every daemon. Delete the
    provisioned clusters first (`skyctl delete cluster NAME --wait`): SkyPilot still lists
    clusters whose allocations this ends."""
    was_up = _down((root or default_root()).absolute())
    click.echo("stopped" if was_up else "was not running")


@skypilot.command("status")
@_root_option
def status(root: Path | None) -> None:
    """Say whether it runs, its infra and its Slurm jobs (one per SkyPilot node)."""
    bed = running_bed((root or default_root()).absolute())
    if bed is None:
        click.echo("not running (`skyshift sim skypilot up`)")
        return
    jobs = bed.squeue()
    click.echo(
        f"running: infra {bed.infra}, login 127.0.0.1:{bed.ssh_port}, {len(jobs)} Slurm job(s)"
    )
    for line in jobs:
        click.echo(f"  {line}")
