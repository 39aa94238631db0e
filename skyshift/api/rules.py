"""What a kind's objects must satisfy on this server beyond their model (pure, no I/O).

One :class:`ObjectRules` per kind, registered in :data:`RULES` beside the kind registry
(:mod:`skyshift.models.registry`); :mod:`skyshift.api.objects` applies them to every write, and
the request-level rules (who may write what, what a delete checks, extra routes) build on them in
:mod:`skyshift.api.policies`. Kinds without an entry have no rules of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skyshift.api.errors import ApiError
from skyshift.config import schedule_min_interval
from skyshift.models.registry import KINDS, KindInfo
from skyshift.models.schedule import parse_duration

Obj = dict[str, Any]

# A namespace named like a kind would make ``/{namespace}/{plural}`` and ``/{plural}/{name}``
# ambiguous (is ``/clusters/jobs`` the cluster "jobs" or the jobs of namespace "clusters"?).
RESERVED_NAMESPACES = frozenset(
    {n for k in KINDS for n in (k.kind.lower(), k.plural, *k.aliases)}
    | {"healthz", "readyz", "docs", "redoc", "token", "register-user", "invite"}
    | {"register_user", "revoke_invite", "audit", "invites"}
)


@dataclass(frozen=True)
class ObjectRules:
    """The per-kind checks of :mod:`skyshift.api.objects` (each raises :class:`ApiError`)."""

    #: every validated object (the model also reads objects stored under an older policy,
    #: which must stay readable, so these checks are the server's, not the model's)
    check: Callable[[Obj], None] | None = None
    #: a new object only
    check_new: Callable[[Obj], None] | None = None
    #: ``(old_spec, new_spec)`` of a write that changes the spec
    check_spec_change: Callable[[Obj, Obj], None] | None = None
    #: the plurals an object's lifecycle creates with the control plane's rights (its creator
    #: must be allowed to create them in the namespace)
    spawns: Callable[[Obj], tuple[str, ...]] | None = None


def _schedule_interval(obj: Obj) -> None:
    interval = str((obj.get("spec") or {}).get("interval") or "")
    try:
        minimum = schedule_min_interval()
    except ValueError as exc:
        raise ApiError(500, f"server misconfigured: {exc}") from None
    if interval and parse_duration(interval) < minimum:
        raise ApiError(
            422,
            f"spec.interval: {interval} is shorter than this server allows ({minimum}s; "
            "the admin sets SKYSHIFT_SCHEDULE_MIN_INTERVAL)",
            field="spec.interval",
        )


def _namespace_name(obj: Obj) -> None:
    if obj["metadata"]["name"] in RESERVED_NAMESPACES:
        raise ApiError(
            422,
            f"namespace name {obj['metadata']['name']!r} is reserved (it names a kind or route)",
            field="metadata.name",
        )


def _pipeline_change(old: Obj, new: Obj) -> None:
    """A pipeline runs the steps it was created with: only ``cancel: true`` may change."""
    for key in ("steps", "parameters"):
        if old.get(key) != new.get(key):
            raise ApiError(
                422,
                f"spec.{key} of a pipeline cannot change once it is created (it runs what it "
                "was created with): create a new pipeline instead",
                field=f"spec.{key}",
            )
    if old.get("cancel") and not new.get("cancel"):
        raise ApiError(
            422, "a cancelled pipeline cannot be resumed: create a new one", field="spec.cancel"
        )


def _pipeline_spawns(obj: Obj) -> tuple[str, ...]:
    return ("jobs",)


def _schedule_spawns(obj: Obj) -> tuple[str, ...]:
    spec = obj.get("spec")
    if isinstance(spec, dict) and spec.get("pipelineTemplate") is not None:
        return ("jobs", "pipelines")
    return ("jobs",)


RULES: dict[str, ObjectRules] = {
    "Namespace": ObjectRules(check_new=_namespace_name),
    "Pipeline": ObjectRules(check_spec_change=_pipeline_change, spawns=_pipeline_spawns),
    "Schedule": ObjectRules(check=_schedule_interval, spawns=_schedule_spawns),
}
_NONE = ObjectRules()


def rules_of(info: KindInfo) -> ObjectRules:
    return RULES.get(info.kind, _NONE)


def spawned(info: KindInfo, obj: Obj) -> tuple[str, ...]:
    """What an object of ``info`` makes its lifecycle create (nothing for most kinds)."""
    spawns = rules_of(info).spawns
    return spawns(obj) if spawns is not None else ()
