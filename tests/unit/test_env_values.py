"""Env values out of workflow payloads (temporal/envs.py): names kept, values filled at submit."""

from __future__ import annotations

from skyshift.compat.types import ReplicaSpec
from skyshift.lifecycle.convert import template_from_job
from skyshift.lifecycle.envs import IN_STORE, filled, needs_values, redact
from skyshift.models.job import Job


def job(envs: dict[str, str]) -> Job:
    return Job.model_validate({"metadata": {"name": "j"}, "spec": {"run": "true", "envs": envs}})


def spec(envs: dict[str, str]) -> ReplicaSpec:
    return ReplicaSpec("j-1-0", "j", "default", "uid", 0, envs=envs)


def test_the_lifecycle_template_has_env_names_only() -> None:
    t = template_from_job(job({"TOKEN": "s3cret", "EMPTY": ""}))
    assert t.envs == {"TOKEN": IN_STORE, "EMPTY": IN_STORE}
    assert "s3cret" not in repr(t)


def test_values_filled_from_the_stored_spec() -> None:
    replicas = [spec(redact({"TOKEN": "x", "GONE": "y"})), spec({"OLD": "literal"})]
    assert needs_values(replicas) and not needs_values(replicas[1:])
    out = filled(replicas, {"TOKEN": "s3cret", "NEW": "z"})
    # a name removed from the spec since is left out; values from old histories stay as they were
    assert [r.envs for r in out] == [{"TOKEN": "s3cret"}, {"OLD": "literal"}]
    assert replicas[0].envs["TOKEN"] == IN_STORE  # the input is not changed in place
