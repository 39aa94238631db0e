"""The ``k8`` cluster manager: replicas are pods, services are v1 Services (``adapter.py``).

``MANAGER`` is what the manager is (see ``compat/kind.py``); the adapter, and with it the
Kubernetes client, is imported only when a Kubernetes cluster is built."""

from skyshift.compat.kind import ManagerKind, Obj
from skyshift.models.managers import ManagerNames


def _fill(spec: Obj, status: Obj) -> Obj:
    """``spec.config_path``/``spec.context``: the kubeconfig and its context."""
    return {"kubeconfig": spec.get("config_path"), "context": spec.get("context")}


MANAGER = ManagerKind(
    names=ManagerNames("k8", aliases=("k8s", "kubernetes"), label="k8 (kubernetes)"),
    adapter="skyshift.compat.kubernetes.adapter:KubernetesManager",
    fill=_fill,
)
