"""Metadata every object carries (Kubernetes-style), names and labels validation, conditions.

``resourceVersion`` is the etcd mod revision as a string (set by the store on every read);
``generation`` counts spec changes and ``status.observedGeneration`` says which one was seen.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def no_nul(value: str) -> str:
    """A string that becomes a process argument (a job's command, an exec argv): no argument
    can hold a NUL byte, so one would only fail later, at launch, on every retry."""
    if "\0" in value:
        raise ValueError("must not contain a NUL byte (no process argument can hold one)")
    return value


ArgvStr = Annotated[str, AfterValidator(no_nul)]


def no_nul_text(value: str) -> str:
    """Stored text (annotations): a NUL byte ends a C string in every tool that reads it back
    (shells, HAProxy, Slurm's comments), so what one would show differs from what is stored."""
    if "\0" in value:
        raise ValueError("must not contain a NUL byte")
    return value


TextStr = Annotated[str, AfterValidator(no_nul_text)]


def validate_name(value: str, what: str = "name") -> str:
    """DNS-1123 label: lowercase alphanumerics and '-', starting and ending alphanumeric, <= 63."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    if len(value) > 63:
        raise ValueError(f"{what} {value!r} is longer than 63 characters")
    if not _DNS1123.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} is not a DNS-1123 label: use lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return value


def checked_or_empty(value: str, problem: Callable[[str], str | None], what: str) -> str:
    """``value`` unchanged when empty (none given) or when ``problem`` finds nothing wrong; a
    ValueError saying it is not a valid ``what`` and why otherwise."""
    if value == "":
        return value
    found = problem(value)
    if found:
        raise ValueError(f"{value!r} is not a valid {what}: {found}")
    return value


def validate_label_key(key: str) -> str:
    prefix, _, name = key.rpartition("/")
    if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        raise ValueError(f"invalid label key {key!r}")
    if prefix and (len(prefix) > 253 or not _LABEL_PREFIX.fullmatch(prefix)):
        raise ValueError(f"invalid label key prefix in {key!r}")
    return key


def validate_label_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_NAME.fullmatch(value):
        raise ValueError(
            f"invalid label value {value!r}: <= 63 of [A-Za-z0-9_.-], alphanumeric at both ends"
        )
    return value


def validate_labels(labels: dict[str, str]) -> dict[str, str]:
    for k, v in labels.items():
        validate_label_key(k)
        validate_label_value(v)
    return labels


def not_supported_yet(field: str, why: str) -> ValueError:
    """The error for a field the model knows but nothing implements yet (refused, not ignored)."""
    return ValueError(f"{field} is not supported yet: {why}; leave it out")


def now_iso() -> str:
    """UTC timestamp in RFC 3339 with a Z, as Kubernetes writes them."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StrictModel(BaseModel):
    """Base for every object part: unknown fields are errors (typos must not pass silently)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True)


class ObjectMeta(StrictModel):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[TextStr, TextStr] = Field(default_factory=dict)
    uid: str | None = None
    resourceVersion: str | None = None
    generation: int = 0
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    finalizers: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return validate_name(v)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        return None if v is None else validate_name(v, "namespace")

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        return validate_labels(v)


class Condition(StrictModel):
    type: str
    status: Literal["True", "False", "Unknown"] = "Unknown"
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None


def set_condition(conditions: list[Condition], cond: Condition) -> list[Condition]:
    """Replace the condition of the same type, keeping lastTransitionTime if status is unchanged."""
    out: list[Condition] = []
    replaced = False
    for c in conditions:
        if c.type == cond.type:
            if c.status == cond.status and c.lastTransitionTime:
                cond = cond.model_copy(update={"lastTransitionTime": c.lastTransitionTime})
            elif not cond.lastTransitionTime:
                cond = cond.model_copy(update={"lastTransitionTime": now_iso()})
            out.append(cond)
            replaced = True
        else:
            out.append(c)
    if not replaced:
        if not cond.lastTransitionTime:
            cond = cond.model_copy(update={"lastTransitionTime": now_iso()})
        out.append(cond)
    return out


class Expression(StrictModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelFilter(StrictModel):
    """A cluster matches when all ``matchLabels`` and all ``matchExpressions`` hold."""

    name: str = ""
    matchLabels: dict[str, str] = Field(default_factory=dict)
    matchExpressions: list[Expression] = Field(default_factory=list)


def dump(model: BaseModel) -> dict[str, Any]:
    """JSON-ready dict of a model (what the store and the API keep)."""
    return model.model_dump(mode="json", exclude_none=False)
