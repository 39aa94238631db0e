"""The ``slurm`` cluster manager: replicas are Slurm jobs (``adapter.py``).

``MANAGER`` is what the manager is (see ``compat/kind.py``)."""

from skyshift.compat.kind import ManagerKind, Obj
from skyshift.models.managers import ManagerNames


def _fill(spec: Obj, status: Obj) -> Obj:
    """``spec.config_path`` is ``slurm.conf``; ``spec.access_config`` (host, username,
    ssh_key_path) the login node."""
    return {"slurm_conf": spec.get("config_path"), **(spec.get("access_config") or {})}


MANAGER = ManagerKind(
    names=ManagerNames("slurm"),
    adapter="skyshift.compat.slurm.adapter:SlurmManager",
    fill=_fill,
    no_services="Slurm clusters have no services",
)
