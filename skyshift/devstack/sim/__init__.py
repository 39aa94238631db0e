"""The simulated clusters of ``skyshift sim``: one module per cluster manager.

:mod:`.cli` is the ``skyshift sim`` group, loading each simulator only when its command runs;
:mod:`.slurm` (slurmctld/slurmd), :mod:`.k8s` (kube-apiserver with kwok), :mod:`.ray`
(``ray start --head``, run as :mod:`.ray_user`) and :mod:`.skypilot` (SkyPilot on a simulated
Slurm cluster, its command in :mod:`.skypilot_cli`). Nothing of the stack imports them but
:mod:`skyshift.devstack.cli` (an import-linter contract in pyproject.toml).
"""
