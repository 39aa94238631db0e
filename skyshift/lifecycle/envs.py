"""Job env values stay out of Temporal: workflow inputs carry env names, the skylet reads values.

Everything a workflow is given or gets back (its input, activity inputs and results) is stored in
its Temporal history, which anyone with access to the Temporal UI or API can read. A job's
``spec.envs`` often carries credentials, so the lifecycle payloads built from a Job carry each
env name with :data:`IN_STORE` as its value, and the skylet's ``submit_replicas`` activity fills
in the values from the Job object in etcd just before it hands the replicas to the cluster. The
values then exist only in etcd (behind the API's RBAC), in the skylet's memory and on the
cluster, as they do in Kubernetes.

A value read at submit time is the stored spec's current one: a replica restarted after an
``envs`` edit gets the edited value. A name no longer in the stored spec is left out. (Pure
functions: the skylet's read is ``activities.clusters.with_env_values``; workflow code imports
this module through ``convert``, so it must not reach the store.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from skyshift.compat.types import ReplicaSpec

#: The value every env var has in workflow payloads; replaced from etcd at submit.
IN_STORE = "<value in etcd: spec.envs of the job>"


def redact(envs: Mapping[str, str]) -> dict[str, str]:
    """The env names of a job with :data:`IN_STORE` for every value."""
    return dict.fromkeys(envs, IN_STORE)


def needs_values(replicas: list[ReplicaSpec]) -> bool:
    return any(v == IN_STORE for r in replicas for v in r.envs.values())


def filled(replicas: list[ReplicaSpec], stored: Mapping[str, object]) -> list[ReplicaSpec]:
    """``replicas`` with every :data:`IN_STORE` value replaced by the stored one."""
    out = []
    for r in replicas:
        envs = {
            k: str(stored[k]) if v == IN_STORE else v
            for k, v in r.envs.items()
            if v != IN_STORE or k in stored
        }
        out.append(dataclasses.replace(r, envs=envs))
    return out
