"""The ``ray`` cluster manager: replicas are Ray jobs, through the dashboard's Jobs API
(``adapter.py``, the only module that imports ``ray``).

``MANAGER`` is what the manager is (see ``compat/kind.py``). Its whole config is in
``spec.config``, and ``config.address`` (the dashboard) is required."""

from typing import Any

from skyshift.compat.kind import ManagerKind
from skyshift.models.managers import ManagerNames


def _check(config: dict[str, Any]) -> str:
    """A Ray cluster is reached through its dashboard: refuse one without its URL."""
    address = config.get("address")
    if (not isinstance(address, str) or len(address) > 2048
            or not address.startswith(("http://", "https://"))):
        return ("config.address: a ray cluster needs its dashboard URL, "
                "like http://127.0.0.1:8265 (skyctl: --address)")
    return ""


MANAGER = ManagerKind(
    names=ManagerNames("ray", check=_check),
    adapter="skyshift.compat.ray.adapter:RayManager",
    no_services="Ray clusters have no services (the Jobs API runs batch entrypoints)",
)
