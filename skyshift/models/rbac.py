"""Role-based access decisions (pure: role dicts in, yes/no out).

A Role grants its ``rules`` (resources x actions) to its ``users`` in its ``namespaces``:

* ``namespaces`` limit namespaced kinds only; ``"*"`` means every namespace (present and
  future); a role without namespaces grants nothing on namespaced kinds. Cluster-scoped
  resources (clusters, namespaces, links, roles, users, invites, audit) ignore it.
* "every namespace" (:data:`ALL_NAMESPACES`, what ``GET /{plural}`` lists and watches reveal) is
  granted only by a role whose namespaces contain ``"*"``: a grant for the namespaces that exist
  today would not cover one created while a watch is open.
* resources are matched by plural (``jobs``; kind names and aliases in a role are normalised),
  ``"*"`` matches every resource; actions are ``create get list update patch delete watch`` or
  ``"*"``. ``users: ["*"]`` grants to every authenticated user.
* no escalation: a role may be written or granted (invites) only by someone who holds everything
  it grants (:func:`missing_grants`); ``"*"`` is held only through ``"*"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from skyshift.models.registry import UnknownKind, kind_info

WILDCARD = "*"
ALL_NAMESPACES = "*"


def normalize_resource(name: str) -> str:
    if name == WILDCARD:
        return name
    try:
        return kind_info(name).plural
    except UnknownKind:
        return name.lower()


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _spec(role: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = role.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def role_name(role: Mapping[str, Any]) -> str:
    meta = role.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def is_member(role: Mapping[str, Any], user: str) -> bool:
    users = _strings(_spec(role).get("users"))
    return user in users or WILDCARD in users


def _namespace_ok(role: Mapping[str, Any], namespace: str | None) -> bool:
    if namespace is None:
        return True
    namespaces = _strings(_spec(role).get("namespaces"))
    if WILDCARD in namespaces:
        return True
    return namespace != ALL_NAMESPACES and namespace in namespaces


def _rule_ok(rule: Any, action: str, resource: str) -> bool:
    if not isinstance(rule, Mapping):
        return False
    actions = _strings(rule.get("actions"))
    resources = {normalize_resource(r) for r in _strings(rule.get("resources"))}
    return (action in actions or WILDCARD in actions) and (
        resource in resources or WILDCARD in resources
    )


def allowed(
    roles: Iterable[Mapping[str, Any]],
    user: str,
    action: str,
    resource: str,
    namespace: str | None,
) -> bool:
    """May ``user`` do ``action`` on ``resource`` (a plural) in ``namespace``?

    ``namespace``: None for cluster-scoped resources, a name, or :data:`ALL_NAMESPACES`.
    """
    resource = normalize_resource(resource)
    for role in roles:
        if not is_member(role, user) or not _namespace_ok(role, namespace):
            continue
        if any(_rule_ok(rule, action, resource) for rule in _spec(role).get("rules") or []):
            return True
    return False


def roles_of(roles: Iterable[Mapping[str, Any]], user: str) -> list[str]:
    """Names of the roles ``user`` is a member of, sorted."""
    return sorted(role_name(r) for r in roles if is_member(r, user))


def _namespaced(resource: str) -> bool:
    try:
        return kind_info(resource).namespaced
    except UnknownKind:
        return False  # users, invites, audit: cluster-scoped


def _scopes(resource: str, namespaces: list[str]) -> list[str | None]:
    """Where a grant of ``resource`` in a role with ``namespaces`` applies."""
    out: list[str | None] = []
    if resource == WILDCARD or not _namespaced(resource):
        out.append(None)
    if resource == WILDCARD or _namespaced(resource):
        out.extend([ALL_NAMESPACES] if WILDCARD in namespaces else namespaces)
    return out


def missing_grants(
    roles: Iterable[Mapping[str, Any]], user: str, spec: Mapping[str, Any]
) -> list[str]:
    """What a role with ``spec`` grants that ``user`` does not hold itself (empty: nothing).

    Nobody may write or hand out a role granting more than they hold, so holding ``create`` on
    roles, or inviting, never escalates privileges.
    """
    roles = list(roles)
    namespaces = _strings(spec.get("namespaces"))
    missing: list[str] = []
    for rule in spec.get("rules") or []:
        if not isinstance(rule, Mapping):
            continue
        for resource in {normalize_resource(r) for r in _strings(rule.get("resources"))}:
            for action in _strings(rule.get("actions")):
                for ns in _scopes(resource, namespaces):
                    if not allowed(roles, user, action, resource, ns):
                        where = "" if ns is None else (
                            " in every namespace" if ns == ALL_NAMESPACES else f" in {ns}"
                        )
                        missing.append(f"{action} {resource}{where}")
    return sorted(set(missing))
