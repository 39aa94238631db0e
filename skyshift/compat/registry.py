"""The built-in cluster managers: one line each. Adding a manager is one subpackage that exports
``MANAGER`` (see ``compat/kind.py``) and one line here; a plugin calls ``add_manager`` itself.

The order is the order messages list them in ("expected local, k8 (kubernetes), ...")."""

from skyshift.compat import kubernetes, local, ray, skypilot, slurm
from skyshift.compat.kind import ManagerKind, add_manager

BUILTIN: tuple[ManagerKind, ...] = (
    local.MANAGER,
    kubernetes.MANAGER,
    slurm.MANAGER,
    ray.MANAGER,
    skypilot.MANAGER,
)

for _kind in BUILTIN:
    add_manager(_kind)
