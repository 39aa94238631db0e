"""The ``skypilot`` cluster manager: the clusters a provisioned Cluster's lifecycle launched
through SkyPilot, replicas as SkyPilot jobs (``adapter.py``; the driver is ``client.py``).

``MANAGER`` is what the manager is (see ``compat/kind.py``): the one that runs ``spec.provision``
clusters."""

from skyshift.compat.kind import ManagerKind, Obj
from skyshift.models.managers import ManagerNames


def _fill(spec: Obj, status: Obj) -> Obj:
    """The SkyPilot clusters its provisioning launched (``status.provision.skyClusters``); a
    provisioned Cluster with none (one that scales from zero) is ``provisioned`` with none."""
    return {"sky_clusters": list((status.get("provision") or {}).get("skyClusters") or []),
            "provisioned": bool(spec.get("provision"))}


MANAGER = ManagerKind(
    names=ManagerNames("skypilot", aliases=("sky",)),
    adapter="skyshift.compat.skypilot.adapter:SkyPilotManager",
    fill=_fill,
    no_services="provisioned SkyPilot clusters have no services here (replicas are SkyPilot "
                "jobs)",
    provisioner="skyshift.compat.skypilot.client:SkyPilotClient",
)
