"""The Helm chart (deploy/helm/skyshift): helm lints and renders it with the default and the HA
values, the rendered manifests run the three processes against Temporal over mTLS and etcd with
client auth, and a real Kubernetes apiserver (the kube test bed) accepts every object with
server-side apply (dry run: validation and admission, nothing scheduled).

helm comes from scripts/build-helm.sh (built from its Go module once, cached).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config as kube_config
from kubernetes import dynamic
from kubernetes.dynamic.exceptions import NotFoundError

from tests.fixtures.gobuild import built_binary

pytest_plugins = ["tests.fixtures.k8s"]
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "skyshift"
HA_VALUES = CHART / "ci" / "ha-values.yaml"
PROCESSES = {
    "api": "skyshift.api",
    "control": "skyshift.workers.control",
    "skylet-manager": "skyshift.workers.skylet_manager",
}
Manifest = dict[str, Any]
#: the kube test bed's version (scripts/build-k8s.sh), which the chart is rendered for
KUBE_VERSION = re.findall(
    r"^KUBE_VERSION=(\S+)", (ROOT / "scripts" / "build-k8s.sh").read_text(), re.M
)[0]
MANAGER = "skyshift-helm-test"


@pytest.fixture(scope="module")
def helm() -> str:
    return built_binary("build-helm.sh", "helm")


def _helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    if args[0] == "template":  # a helm built by `go install` assumes Kubernetes v1.20
        args = (*args, "--kube-version", KUBE_VERSION)
    # HOME-independent: helm keeps no state for lint and template
    env = {
        **os.environ,
        "HELM_CACHE_HOME": "/tmp/helm-cache",
        "HELM_CONFIG_HOME": "/tmp/helm-config",
    }
    return subprocess.run([helm, *args], capture_output=True, text=True, check=False, env=env)


def render(helm: str, *values: Path, sets: tuple[str, ...] = ()) -> list[Manifest]:
    args = ["template", "sky", str(CHART), "--namespace", "skyshift"]
    for path in values:
        args += ["-f", str(path)]
    for item in sets:
        args += ["--set", item]
    done = _helm(helm, *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def deployments(manifests: list[Manifest]) -> dict[str, Manifest]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == "Deployment"}


def container(deployment: Manifest) -> Manifest:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def env_of(deployment: Manifest) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(deployment).get("env", [])}


def mounted(deployment: Manifest, path: str) -> Manifest:
    """The Secret volume whose mount holds ``path``."""
    pod = deployment["spec"]["template"]["spec"]
    mounts = container(deployment)["volumeMounts"]
    mount = next(m for m in mounts if path.startswith(m["mountPath"].rstrip("/") + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    return dict(volume)


@pytest.mark.parametrize("values", [(), (HA_VALUES,)], ids=["default", "ha"])
def test_helm_lint(helm: str, values: tuple[Path, ...]) -> None:
    args = ["lint", "--strict", str(CHART)]
    for path in values:
        args += ["-f", str(path)]
    done = _helm(helm, *args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_default_values_run_each_process_with_replicas(helm: str) -> None:
    deps = deployments(render(helm))
    commands = {name: container(d)["command"] for name, d in deps.items()}
    assert commands == {
        "sky-skyshift-api": ["python", "-m", PROCESSES["api"]],
        "sky-skyshift-control": ["python", "-m", PROCESSES["control"]],
        "sky-skyshift-skylet-manager-all": ["python", "-m", PROCESSES["skylet-manager"]],
    }
    assert deps["sky-skyshift-api"]["spec"]["replicas"] == 2
    assert deps["sky-skyshift-control"]["spec"]["replicas"] == 2
    assert deps["sky-skyshift-skylet-manager-all"]["spec"]["replicas"] == 1
    for d in deps.values():
        assert container(d)["resources"]["requests"]["cpu"]


def test_every_process_connects_to_temporal_with_a_client_certificate(helm: str) -> None:
    manifests = render(helm, HA_VALUES)
    config = next(m for m in manifests if m["kind"] == "ConfigMap")["data"]
    assert config["SKYSHIFT_TEMPORAL_ADDRESS"] == "temporal.example.internal:7233"
    assert config["SKYSHIFT_TEMPORAL_NAMESPACE"] == "skyshift"
    assert config["SKYSHIFT_ETCD"] == "10.0.0.11:2379,10.0.0.12:2379,10.0.0.13:2379"
    deps = deployments(manifests)
    assert len(deps) == 4  # api, control, two skylet managers
    for name, d in deps.items():
        env = env_of(d)
        assert env["SKYSHIFT_TEMPORAL_TLS_SERVER_NAME"] == "temporal.example.internal", name
        for var in (
            "SKYSHIFT_TEMPORAL_TLS_CERT",
            "SKYSHIFT_TEMPORAL_TLS_KEY",
            "SKYSHIFT_TEMPORAL_TLS_CA",
        ):
            assert mounted(d, env[var])["secret"]["secretName"] == "skyshift-temporal-client", var
        assert env["SKYSHIFT_ETCD_USER"] == "skyshift"
        password = mounted(d, env["SKYSHIFT_ETCD_PASSWORD_FILE"])
        assert password["secret"]["secretName"] == "skyshift-etcd"
        # etcd over TLS with a client certificate (the HA values turn it on)
        for var in ("SKYSHIFT_ETCD_TLS_CERT", "SKYSHIFT_ETCD_TLS_KEY", "SKYSHIFT_ETCD_TLS_CA"):
            assert mounted(d, env[var])["secret"]["secretName"] == "skyshift-etcd-client", var


def test_ha_values_split_clusters_between_managers_and_serve_https(helm: str) -> None:
    deps = deployments(render(helm, HA_VALUES))
    selectors = {n: env_of(d).get("SKYSHIFT_SKYLET_SELECTOR") for n, d in deps.items()
                 if "skylet-manager" in n}  # fmt: skip
    assert selectors == {
        "sky-skyshift-skylet-manager-lab-1": "site=lab-1",
        "sky-skyshift-skylet-manager-lab-2": "site=lab-2",
    }
    for name in selectors:
        assert deps[name]["spec"]["strategy"]["type"] == "Recreate"  # never two managers at once
    api = deps["sky-skyshift-api"]
    assert api["spec"]["replicas"] == 3
    probes = container(api)
    assert probes["readinessProbe"]["httpGet"] == {
        "path": "/readyz?exclude=temporal",
        "port": "http",
        "scheme": "HTTPS",
    }
    assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert (
        mounted(api, env_of(api)["SKYSHIFT_API_TLS_CERT"])["secret"]["secretName"]
        == "skyshift-api-tls"
    )


def test_plaintext_temporal_drops_the_certificate(helm: str) -> None:
    deps = deployments(render(helm, sets=("temporal.tls.enabled=false", "etcd.auth.enabled=false")))
    for d in deps.values():
        assert not any(
            k.startswith(("SKYSHIFT_TEMPORAL_TLS_", "SKYSHIFT_ETCD_USER", "SKYSHIFT_ETCD_TLS_"))
            for k in env_of(d)
        )


def test_a_missing_address_is_refused_by_name(helm: str) -> None:
    done = _helm(helm, "template", "sky", str(CHART), "--set", "temporal.address=")
    assert done.returncode != 0
    assert "temporal.address" in done.stderr


@pytest.fixture(scope="module")
def kube(k8s_clusters: list[Any]) -> Iterator[tuple[dynamic.DynamicClient, str]]:
    cluster = k8s_clusters[0]
    api = kube_config.new_client_from_config(config_file=str(cluster.kubeconfig),
                                             context=cluster.context)  # fmt: skip
    client = dynamic.DynamicClient(api)
    namespace = f"helm-{uuid.uuid4().hex[:8]}"
    namespaces = client.resources.get(api_version="v1", kind="Namespace")
    namespaces.create(body={"metadata": {"name": namespace}})
    try:
        yield client, namespace
    finally:
        with contextlib.suppress(NotFoundError):
            namespaces.delete(name=namespace)
        api.close()


@pytest.mark.parametrize("values", [(), (HA_VALUES,)], ids=["default", "ha"])
def test_the_apiserver_accepts_the_rendered_chart(
    helm: str, kube: tuple[dynamic.DynamicClient, str], values: tuple[Path, ...]
) -> None:
    client, namespace = kube
    manifests = render(helm, *values)
    kinds = sorted({m["kind"] for m in manifests})
    assert kinds == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"]
    for manifest in manifests:
        resource = client.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        applied = client.server_side_apply(
            resource, body=manifest, namespace=namespace, field_manager=MANAGER, dry_run="All"
        )
        assert applied.metadata.name == manifest["metadata"]["name"]
        assert applied.metadata.namespace == namespace
