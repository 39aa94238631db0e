"""From ``skyctl create`` arguments to manifests (pure functions, unit-tested without a server).

Each builder returns the manifest that is sent, and validates it locally with the kind's model
first, so a typo in a flag is reported at once as one line naming the field, before any request.
Units follow the original CLI: a job's ``--memory`` is MB, a cluster's ``--memory`` and
``--disk_size`` are GB when no unit is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skyshift.cli.errors import UsageProblem, describe_validation
from skyshift.compat import registry  # noqa: F401  (declares the managers spec.manager accepts)
from skyshift.models import UnknownKind, managers, parse_object
from skyshift.models.cluster import DEFAULT_MANAGER
from skyshift.models.job import CLUSTER_NAME_LABEL

Pairs = Sequence[tuple[str, str]]
RESTART_POLICIES = {"always": "Always", "onfailure": "OnFailure", "never": "Never"}
_PLAIN_NUMBER = re.compile(r"^\s*[0-9]+(\.[0-9]+)?\s*$")


def validated(manifest: dict[str, Any]) -> dict[str, Any]:
    """Check ``manifest`` against its model; :class:`UsageProblem` naming the field if bad."""
    try:
        parse_object(manifest)
    except ValidationError as exc:
        kind = str(manifest.get("kind", "object")).lower()
        raise UsageProblem(f"invalid {kind}: {describe_validation(exc)}") from exc
    except (UnknownKind, ValueError) as exc:
        raise UsageProblem(str(exc)) from exc
    return manifest


def _meta(name: str, namespace: str | None = None, labels: Pairs = ()) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


def _drop_empty(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if v not in (None, "", [], {})}


def restart_policy(value: str) -> str:
    key = value.replace("-", "").replace("_", "").lower()
    if key not in RESTART_POLICIES:
        raise UsageProblem(
            f"invalid restart policy {value!r}: expected Always, OnFailure or Never"
        )
    return RESTART_POLICIES[key]


def parse_ports(values: Iterable[str]) -> list[int]:
    """``("22", "80,443")`` -> ``[22, 80, 443]``."""
    out: list[int] = []
    for value in values:
        for part in str(value).split(","):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit() or not 1 <= int(part) <= 65535:
                raise UsageProblem(f"invalid port {part!r}: expected a number from 1 to 65535")
            out.append(int(part))
    return out


def gb_default(value: str | None) -> str | None:
    """A cluster size given as a bare number means GB (as in the original CLI)."""
    if value is None or value == "":
        return None
    return f"{value.strip()}G" if _PLAIN_NUMBER.fullmatch(value) else value


def placement_spec(clusters: Iterable[str], labels: Pairs) -> dict[str, Any] | None:
    """``--cluster A --cluster B --placement k v``: one filter per cluster (a cluster passes if
    it matches any), each also requiring the ``--placement`` labels; None when neither given."""
    names, match = list(dict.fromkeys(clusters)), dict(labels)
    if not names and not match:
        return None
    filters = [{"name": f"cluster {c}", "matchLabels": {**match, CLUSTER_NAME_LABEL: c}}
               for c in names] or [{"matchLabels": match}]
    return {"filters": filters}


def job_manifest(
    name: str,
    *,
    namespace: str,
    labels: Pairs = (),
    image: str | None = None,
    envs: Pairs = (),
    cpus: str | float = 1,
    gpus: int = 0,
    accelerators: str | None = None,
    memory: str | float = 0,
    run: str = "",
    replicas: int = 1,
    restart: str = "OnFailure",
    volumes: Pairs = (),
    ports: Iterable[str] = (),
    max_restarts: int | None = None,
    priority: int | None = None,
    preemption_policy: str | None = None,
    clusters: Iterable[str] = (),
    placement: Pairs = (),
) -> dict[str, Any]:
    resources: dict[str, Any] = {"cpus": cpus, "gpus": gpus, "memory": memory}
    if accelerators:
        resources["accelerators"] = accelerators
    spec: dict[str, Any] = {
        "image": image,
        "run": run,
        "envs": dict(envs),
        "resources": resources,
        "replicas": replicas,
        "restartPolicy": restart_policy(restart),
        "ports": parse_ports(ports),
        "volumes": [
            {"name": f"vol-{i}", "hostPath": host, "mountPath": mount}
            for i, (host, mount) in enumerate(volumes)
        ],
        "maxRestarts": max_restarts,
        "priority": priority,
        "preemptionPolicy": preemption_policy,
        "placement": placement_spec(clusters, placement),
    }
    meta = _meta(name, namespace, labels)
    manifest = {"kind": "Job", "metadata": meta, "spec": _drop_empty(spec)}
    return validated(manifest)


def provisioned_spec(spec: dict[str, Any], infra: str | None, max_nodes: int | None,
                     idle_minutes: int | None, candidates: list[str]) -> dict[str, Any]:
    """``--provision``: the per-node flags move into ``spec.provision``; ``--cloud/--region``
    (the original's flags) name the infra when ``--infra`` does not."""
    if not infra:
        if not spec.get("cloud"):
            raise UsageProblem("--provision needs --infra (like slurm/sim-1, kubernetes/<context>"
                               " or aws/us-east-1) or --cloud [--region]")
        cloud, region = str(spec["cloud"]).lower(), spec.get("region")
        infra = f"{cloud}/{region}" if region else cloud
    nodes: dict[str, Any] = {"min": spec.pop("num_nodes", 1)}
    if max_nodes is not None:
        nodes["max"] = max_nodes
    provision = _drop_empty({
        "infra": infra, "cpus": spec.pop("cpus", None), "memory": spec.pop("memory", None),
        "accelerators": spec.pop("accelerators", None), "nodes": nodes,
        "idleMinutes": idle_minutes, "candidates": candidates,
    })
    runner = managers.provisioner()
    if managers.resolve(spec.get("manager", DEFAULT_MANAGER)) in (DEFAULT_MANAGER, runner):
        spec["manager"] = runner
    spec["provision"] = provision
    return spec


def cluster_manifest(
    name: str,
    *,
    manager: str = "k8",
    labels: Pairs = (),
    cpus: str | None = None,
    memory: str | None = None,
    disk_size: str | None = None,
    accelerators: str | None = None,
    ports: Iterable[str] = (),
    num_nodes: int = 1,
    cloud: str | None = None,
    region: str | None = None,
    provision: bool = False,
    infra: str | None = None,
    max_nodes: int | None = None,
    idle_minutes: int | None = None,
    candidates: Iterable[str] = (),
    config_path: str | None = None,
    kube_context: str | None = None,
    host: str | None = None,
    username: str | None = None,
    ssh_key_path: str | None = None,
    address: str | None = None,
) -> dict[str, Any]:
    # The workers read the file from another working directory: a relative path is made
    # absolute here ('~' stays for the worker's own home).
    if config_path and not config_path.startswith(("/", "~")):
        config_path = str(Path(config_path).resolve())
    access = _drop_empty({"host": host, "username": username, "ssh_key_path": ssh_key_path})
    spec: dict[str, Any] = {
        "manager": manager,
        "cloud": cloud,
        "region": region,
        # The original accepted "4+" (at least 4 cores); the bound is the number.
        "cpus": cpus.rstrip("+") if cpus else None,
        "memory": gb_default(memory.rstrip("+") if memory else None),
        "disk_size": gb_default(disk_size),
        "accelerators": accelerators,
        "ports": parse_ports(ports),
        "num_nodes": num_nodes,
        "provision": provision or None,
        "config_path": config_path,
        "context": kube_context,
        "access_config": access,
    }
    if provision:
        spec = provisioned_spec(spec, infra, max_nodes, idle_minutes, list(candidates))
    elif num_nodes == 0:
        raise UsageProblem("--min-nodes 0 (scale from zero) is for provisioned clusters: "
                           "add --provision and --max-nodes")
    elif infra or max_nodes or idle_minutes is not None or candidates:
        raise UsageProblem("--infra, --max-nodes, --idle-minutes and --candidate are for "
                           "provisioned clusters: add --provision")
    if address:  # the Ray dashboard (Jobs API) of a ray cluster
        if str(manager).lower() != "ray":
            raise UsageProblem("--address is for Ray clusters: use it with --manager ray")
        spec["config"] = {"address": address}
    manifest = {"kind": "Cluster", "metadata": _meta(name, None, labels), "spec": _drop_empty(spec)}
    return validated(manifest)


def service_manifest(
    name: str,
    *,
    namespace: str,
    service_type: str = "ClusterIP",
    selector: Pairs = (),
    ports: Sequence[tuple[int, int]] = (),
    cluster: str | None = None,
    labels: Pairs = (),
) -> dict[str, Any]:
    spec = {
        "type": service_type,
        "selector": dict(selector),
        "ports": [{"port": p, "targetPort": t, "protocol": "TCP"} for p, t in ports],
        "primaryCluster": "" if cluster in (None, "auto") else cluster,
    }
    manifest = {
        "kind": "Service", "metadata": _meta(name, namespace, labels), "spec": _drop_empty(spec),
    }
    return validated(manifest)


def filter_policy_manifest(
    name: str,
    *,
    namespace: str,
    label_selector: Pairs = (),
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> dict[str, Any]:
    both = sorted(set(include) & set(exclude))
    if both:
        raise UsageProblem(f"clusters cannot be both included and excluded: {', '.join(both)}")
    spec = {
        "clusterFilter": {"include": list(include), "exclude": list(exclude)},
        "labelsSelector": dict(label_selector),
    }
    return validated({"kind": "FilterPolicy", "metadata": _meta(name, namespace), "spec": spec})


def link_manifest(name: str, *, source: str, target: str,
                  gateway: str | None = None) -> dict[str, Any]:
    if source == target:
        raise UsageProblem("source and target clusters of a link must differ")
    spec: dict[str, Any] = {"source_cluster": source, "target_cluster": target}
    if gateway:
        host, _, port = gateway.rpartition(":")
        if not host or not port.isdigit():
            raise UsageProblem(f"--gateway {gateway!r}: expected HOST:PORT")
        spec["gateway"] = {"address": host, "port": int(port)}
    return validated({"kind": "Link", "metadata": _meta(name), "spec": spec})


def endpoints_manifest(
    name: str,
    *,
    namespace: str,
    num_endpoints: int | None = None,
    exposed: bool = False,
    primary_cluster: str | None = None,
    selector: Pairs = (),
) -> dict[str, Any]:
    primary = "" if primary_cluster in (None, "auto") else primary_cluster
    if exposed and not primary:
        raise UsageProblem("--exposed needs --primary_cluster (the cluster they are exposed to)")
    endpoints = (
        {primary: {"num_endpoints": num_endpoints or 0, "exposed_to_cluster": exposed}}
        if primary
        else {}
    )
    spec = {"selector": dict(selector), "primary_cluster": primary, "endpoints": endpoints}
    return validated({"kind": "Endpoints", "metadata": _meta(name, namespace), "spec": spec})


def role_manifest(
    name: str,
    *,
    actions: Sequence[str] = (),
    resources: Sequence[str] = (),
    namespaces: Sequence[str] = (),
    users: Sequence[str] = (),
) -> dict[str, Any]:
    spec = {
        "rules": [{"resources": list(resources), "actions": list(actions)}],
        "namespaces": list(namespaces),
        "users": list(users),
    }
    return validated({"kind": "Role", "metadata": _meta(name), "spec": spec})


def namespace_manifest(name: str) -> dict[str, Any]:
    return validated({"kind": "Namespace", "metadata": _meta(name)})
