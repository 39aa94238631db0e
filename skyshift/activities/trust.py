"""A workflow's input is not trusted: the checks every activity runs before it acts on one.

Anyone who can reach Temporal can start a workflow or an activity with any input, bypassing the
API that validated the objects (issue 26: a job reached the dev server and started a
ServiceWorkflow whose service name carried newlines and HAProxy directives, which the skylet wrote
into haproxy.cfg). So every activity that writes a config file, builds a command line, names a
path or an etcd key checks the names, namespaces, ports, labels and addresses of its input again,
with the models' own validators, before it does anything. A failed check is permanent: retrying
the same forged input cannot help, so it ends the activity with a non-retryable
``ApplicationError`` of type ``InvalidInput`` and nothing is written or run.

Use :func:`untrusted` around the checks of one activity; the ``check_*`` functions raise
ValueError and :func:`untrusted` turns it into the ApplicationError.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from temporalio.exceptions import ApplicationError

from skyshift.compat.types import ReplicaSpec, ServicePort, ServiceSpec
from skyshift.contract.pipelines import DeleteOwnedInput
from skyshift.models.envs import validate_env_name, validate_env_value
from skyshift.models.image import validate_image
from skyshift.models.meta import no_nul, validate_labels, validate_name
from skyshift.models.quantity import parse_accelerators
from skyshift.models.registry import KINDS

INVALID_INPUT = "InvalidInput"
RESTART_POLICIES = ("Always", "OnFailure", "Never")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PLURALS = frozenset(k.plural for k in KINDS)
# a uid as the API makes them (uuid4) or as the tests spell them: no path or key separators
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
# a DNS host name (labels of letters, digits and '-') or an IP address checked by ipaddress
_HOST = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}"
                   r"[A-Za-z0-9])?)*")
# a workflow id as contract.names makes them: kind/namespace/name, a time of a scheduled run
_WORKFLOW_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9/._:+-]{0,254}")


@contextlib.contextmanager
def untrusted(activity: str) -> Iterator[None]:
    """Run the checks of ``activity``'s input: a ValueError/TypeError becomes a non-retryable
    ApplicationError (``InvalidInput``) naming the activity and what was wrong."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise ApplicationError(f"{activity}: refused a forged or invalid input: {exc}",
                               type=INVALID_INPUT, non_retryable=True) from None


def check_name(value: Any, what: str = "name") -> str:
    """A DNS-1123 label (object, cluster and replica names)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string")
    return validate_name(value, what)


def check_namespace(value: Any, what: str = "namespace") -> str:
    return check_name(value, what)


def check_uid(value: Any, what: str = "uid", empty: bool = False) -> str:
    if empty and value == "":
        return ""
    if not isinstance(value, str) or not _UID.fullmatch(value):
        raise ValueError(f"{what} {str(value)[:80]!r} is not a uid")
    return value


def check_port(value: Any, what: str = "port", zero: bool = False) -> int:
    """A TCP/UDP port 1-65535 (``zero``: 0 too, meaning "unset")."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an integer")
    if not (0 if zero else 1) <= value <= 65535:
        raise ValueError(f"{what} {value} is out of range 1-65535")
    return value


def check_labels(value: Any, what: str = "labels") -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{what}: keys and values must be strings")
    try:
        return validate_labels(dict(value))
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def check_host(value: Any, what: str = "host") -> str:
    """An IP address or a DNS host name: nothing a config line or a command could split on."""
    if not isinstance(value, str) or not value or len(value) > 253:
        raise ValueError(f"{what} {str(value)[:80]!r} is not a host")
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(value)
        return value
    if not _HOST.fullmatch(value):
        raise ValueError(f"{what} {value[:80]!r} is not an IP address or a host name")
    return value


def check_address(value: Any, what: str = "address") -> str:
    """``host:port`` (a replica's address behind a service)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string")
    host, sep, port = value.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit():
        raise ValueError(f"{what} {value[:80]!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):  # [IPv6]:port
        host = str(ipaddress.IPv6Address(host[1:-1]))
    check_host(host, what)
    check_port(int(port), what)
    return value


def check_plural(value: Any) -> str:
    if value not in PLURALS:
        raise ValueError(f"kind {str(value)[:40]!r} is not one SkyShift stores")
    return str(value)


def check_names(values: Iterable[Any], what: str = "name") -> list[str]:
    return [check_name(v, what) for v in values]


def check_replica(spec: ReplicaSpec) -> ReplicaSpec:
    """Everything of a replica that becomes a path, a file, an object name or a command line."""
    check_name(spec.name, "replica name")
    check_name(spec.job_name, "job name")
    check_namespace(spec.namespace)
    check_uid(spec.job_uid, "job uid")
    for what, number in (("rank", spec.rank), ("attempt", spec.attempt)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"replica {spec.name}: {what} must be a non-negative integer")
    validate_image(spec.image)
    no_nul(spec.run)
    for key, val in spec.envs.items():
        validate_env_name(key)
        validate_env_value(val)
    for port in spec.ports:
        check_port(port, f"replica {spec.name}: port")
    check_labels(spec.labels, f"replica {spec.name}: labels")
    parse_accelerators(spec.resources.accelerators)  # names reach --gres, a node selector
    if spec.restart_policy not in RESTART_POLICIES:
        raise ValueError(f"replica {spec.name}: restart policy {spec.restart_policy!r} is not "
                         f"one of {', '.join(RESTART_POLICIES)}")
    return spec


def check_service_port(port: ServicePort, what: str) -> ServicePort:
    check_port(port.port, f"{what}: port")
    check_port(port.target_port, f"{what}: target port", zero=True)
    check_port(port.node_port, f"{what}: node port", zero=True)
    if port.protocol not in PROTOCOLS:
        raise ValueError(f"{what}: protocol {port.protocol!r} is not one of "
                         f"{', '.join(PROTOCOLS)}")
    return port


def check_backends(backends: Any, what: str) -> None:
    """``target port (text) -> ["host:port", ...]``."""
    if not isinstance(backends, Mapping):
        raise TypeError(f"{what} must be a mapping")
    for target, addresses in backends.items():
        if not isinstance(target, str) or not target.isascii() or not target.isdigit():
            raise ValueError(f"{what}: target port {str(target)[:20]!r} is not a number")
        check_port(int(target), f"{what}: target port")
        for address in addresses:
            check_address(address, f"{what}[{target}]")


def check_service(spec: ServiceSpec) -> ServiceSpec:
    """Everything of a service that becomes a config line (HAProxy) or an object (Kubernetes)."""
    check_name(spec.name, "service name")
    check_namespace(spec.namespace)
    check_uid(spec.uid, "service uid", empty=True)
    if spec.type not in SERVICE_TYPES:
        raise ValueError(f"service type {spec.type!r} is not one of {', '.join(SERVICE_TYPES)}")
    check_labels(spec.selector, "service selector")
    for i, port in enumerate(spec.ports):
        check_service_port(port, f"service port {i}")
    if spec.cluster_ip and spec.cluster_ip != "None":  # "None": Kubernetes' headless service
        try:
            ipaddress.ip_address(spec.cluster_ip)
        except ValueError:
            raise ValueError(f"cluster IP {spec.cluster_ip[:80]!r} is not an IP address") from None
    check_backends(spec.backends, "backends")
    check_backends(spec.remote_backends, "remote backends")
    return spec


def check_ref(name: Any, namespace: Any = None, uid: Any = "", what: str = "name") -> None:
    """An object's name, its namespace (None: cluster-scoped) and its uid ("" : not given):
    what becomes its etcd key, a Temporal query or a workflow id."""
    check_name(name, what)
    if namespace is not None:
        check_namespace(namespace)
    check_uid(uid, "uid", empty=True)



def check_workflow_id(value: Any, what: str = "owner") -> str:
    """A workflow id that is written into an annotation (no control characters, no spaces)."""
    if not isinstance(value, str) or not _WORKFLOW_ID.fullmatch(value):
        raise ValueError(f"{what} {str(value)[:80]!r} is not a workflow id")
    return value


def check_owned(inp: DeleteOwnedInput) -> None:
    """What a delete of an owner's objects lists by: kind, namespace, owner label and names."""
    if inp.plural not in ("jobs", "pipelines"):  # what pipelines and schedules create
        raise ValueError(f"kind {str(inp.plural)[:40]!r} is not jobs or pipelines")
    check_namespace(inp.namespace)
    check_uid(inp.owner_uid, "owner uid")
    check_labels({inp.label: inp.owner}, "owner label")
    check_names(inp.only, "name")


def check_job_request(key: Any, uid: Any, workflow_id: Any, empty_uid: bool = False) -> None:
    """A job as the scheduler is asked about it: ``namespace/name``, its uid, and the workflow
    its answer is signalled to, which must be that job's own (a forged request must not make
    the scheduler signal another workflow, or write another job's status)."""
    if not isinstance(key, str) or key.count("/") != 1:
        raise ValueError(f"job key {str(key)[:80]!r} is not namespace/name")
    namespace, name = key.split("/")
    check_ref(name, namespace, uid, "job name")
    if not empty_uid and not uid:
        raise ValueError("the job's uid is missing")
    if workflow_id is not None and workflow_id != f"job/{namespace}/{name}":
        raise ValueError(f"workflow {str(workflow_id)[:80]!r} is not job {key}'s")
