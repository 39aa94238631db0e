"""``skyshift sim``: simulated clusters (Slurm daemons, kube-apiserver with kwok, Ray heads) here.

Each simulator lives in its own module exporting a click group; they are loaded lazily so that
``skyshift up`` never pays for (or breaks on) a simulator's imports.
"""

from __future__ import annotations

import importlib

import click

_SIMULATORS = {
    "slurm": ("skyshift.devstack.sim.slurm", "slurm", "Simulated Slurm clusters."),
    "k8s": ("skyshift.devstack.sim.k8s", "k8s", "Simulated Kubernetes clusters (kwok)."),
    "ray": ("skyshift.devstack.sim.ray", "ray", "Simulated Ray clusters (ray start --head)."),
    "skypilot": ("skyshift.devstack.sim.skypilot_cli", "skypilot",
                 "The offline SkyPilot target (SkyPilot on a simulated Slurm cluster)."),
}


class _LazySims(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_SIMULATORS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _SIMULATORS.get(cmd_name)
        if entry is None:
            return None
        module, attr, help_text = entry
        try:
            command = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            why = str(exc)

            @click.command(name=cmd_name, help=help_text)
            def unavailable() -> None:
                raise click.ClickException(f"the {cmd_name} simulator is not available: {why}")

            return unavailable
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazySims)
def sim() -> None:
    """Start and stop simulated clusters for trying multi-cluster SkyShift on one machine.

    \b
    skyshift sim slurm up --clusters 2 --nodes 4
    skyshift sim k8s up --clusters 3 --nodes 100
    skyshift sim ray up --clusters 2 --cpus 2
    skyshift sim skypilot up
    """
