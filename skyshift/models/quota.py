"""Quota: a hard bound on what one namespace's admitted jobs may hold over the whole super-cluster.

A Quota is enforced when the scheduler admits a job, not when the API creates it: a job that
would take its namespace over any quota of that namespace waits Pending with a reason naming the
quota and what is short, and is admitted when room frees (a job ends, the quota is raised).

``spec.hard`` keys (values are quantities as on a job's resources, summed over replicas):

* ``cpus`` (cores or millicores), ``memory`` (MB or ``32Gi``), ``gpus``;
* ``accelerator/<TYPE>`` (e.g. ``accelerator/A100: 4``), per accelerator type;
* ``jobs``: admitted jobs that have not ended; ``replicas``: their replicas.

Quotas naming the same ``cohort`` lend each other what they leave unused: a namespace may go
over its ``hard`` while the cohort as a whole stays within the sum of its members' ``hard`` (and
the namespace within ``hard + borrowingLimit``); among jobs of equal priority the namespace
furthest below its share, weighted by ``weight``, is admitted first.

``status.used`` is what the namespace's admitted jobs hold now, in the same keys and units
(memory in MB), written by the control worker as jobs are admitted and end.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel, validate_name
from skyshift.models.quantity import parse_cpus, parse_memory

ACCELERATOR_PREFIX = "accelerator/"
COUNT_KEYS = ("gpus", "jobs", "replicas")
PLAIN_KEYS = ("cpus", "memory", *COUNT_KEYS)
MAX_HARD = 1e12  # far above any super-cluster; keeps sums and messages finite
MAX_KEYS = 64


def quota_key_error(key: str) -> str | None:
    """Why ``key`` is not a quota key, or None when it is one."""
    if key in PLAIN_KEYS:
        return None
    if key.startswith(ACCELERATOR_PREFIX):
        name = key[len(ACCELERATOR_PREFIX) :]
        if name and len(name) <= 63 and all(c.isalnum() or c in "-_." for c in name):
            return None
        return f"invalid accelerator type in quota key {key[:80]!r}"
    return (
        f"unknown quota key {key[:80]!r}: use cpus, memory, gpus, jobs, replicas or "
        f"{ACCELERATOR_PREFIX}<TYPE>"
    )


def parse_hard_value(key: str, value: object) -> float:
    """One limit in the scheduler's units: cores, MB, or a whole count."""
    if key == "cpus":
        number = parse_cpus(value)
    elif key == "memory":
        number = parse_memory(value)
    else:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"{key} must be a whole number")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{key} must be a whole number, not {str(value)[:40]!r}") from None
        if not math.isfinite(number) or number != int(number):
            raise ValueError(f"{key} must be a whole number")
    if number < 0 or number > MAX_HARD:
        raise ValueError(f"{key} must be between 0 and {MAX_HARD:g}")
    return number


def parse_limits(v: object, what: str) -> dict[str, float]:
    if not isinstance(v, dict):
        raise ValueError(f"{what} must be a mapping of quota keys to limits")
    if len(v) > MAX_KEYS:
        raise ValueError(f"{what} has {len(v)} keys; at most {MAX_KEYS}")
    out: dict[str, float] = {}
    for key, value in v.items():
        if not isinstance(key, str) or (why := quota_key_error(key)) is not None:
            raise ValueError(why or "quota keys are strings")
        out[key] = parse_hard_value(key, value)
    return out


class QuotaSpec(StrictModel):
    hard: dict[str, float] = Field(default_factory=dict)
    #: Quotas sharing a cohort lend each other what they leave unused (see the module doc).
    cohort: str = ""
    #: This namespace's weight in fair sharing (twice the weight: twice the share).
    weight: float = Field(default=1.0, gt=0, le=1e6)
    #: At most this much over ``hard`` may be borrowed from the cohort, per key (missing: no
    #: bound but what the cohort leaves unused).
    borrowingLimit: dict[str, float] = Field(default_factory=dict)

    @field_validator("hard", mode="before")
    @classmethod
    def _hard(cls, v: object) -> dict[str, float]:
        return parse_limits(v, "hard")

    @field_validator("borrowingLimit", mode="before")
    @classmethod
    def _borrow(cls, v: object) -> dict[str, float]:
        return parse_limits(v, "borrowingLimit")

    @field_validator("cohort")
    @classmethod
    def _cohort(cls, v: str) -> str:
        return validate_name(v, "cohort") if v else v


class QuotaStatus(StrictModel):
    used: dict[str, float] = Field(default_factory=dict)
    borrowed: dict[str, float] = Field(default_factory=dict)  # used over hard, from the cohort
    observedGeneration: int = 0


class Quota(SkyObject):
    KIND: ClassVar[str] = "Quota"
    PLURAL: ClassVar[str] = "quotas"
    NAMESPACED: ClassVar[bool] = True

    kind: Literal["Quota"] = "Quota"
    spec: QuotaSpec = Field(default_factory=QuotaSpec)
    status: QuotaStatus = Field(default_factory=QuotaStatus)
