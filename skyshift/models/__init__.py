"""Object model: one module per kind (pydantic v2), metadata, quantities and the kind registry."""

from skyshift.models.base import API_VERSION, SkyObject
from skyshift.models.cluster import Cluster, ClusterSpec, ClusterStatus
from skyshift.models.endpoints import Endpoints
from skyshift.models.filterpolicy import FilterPolicy
from skyshift.models.job import Job, JobSpec, JobStatus
from skyshift.models.link import Link
from skyshift.models.meta import Condition, ObjectMeta
from skyshift.models.namespace import Namespace
from skyshift.models.pipeline import Pipeline
from skyshift.models.registry import (
    API_KINDS,
    KINDS,
    KindInfo,
    UnknownKind,
    kind_info,
    load_manifests,
    parse_object,
)
from skyshift.models.role import Role
from skyshift.models.schedule import Schedule
from skyshift.models.service import Service
from skyshift.models.user import User

__all__ = [
    "API_KINDS",
    "API_VERSION",
    "KINDS",
    "Cluster",
    "ClusterSpec",
    "ClusterStatus",
    "Condition",
    "Endpoints",
    "FilterPolicy",
    "Job",
    "JobSpec",
    "JobStatus",
    "KindInfo",
    "Link",
    "Namespace",
    "ObjectMeta",
    "Pipeline",
    "Role",
    "Schedule",
    "Service",
    "SkyObject",
    "UnknownKind",
    "User",
    "kind_info",
    "load_manifests",
    "parse_object",
]
