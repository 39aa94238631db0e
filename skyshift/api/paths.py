"""Kind aliases in URLs: ``/default/job/x`` and ``/svc`` reach the routes of ``jobs`` and
``services``.

Routes are generated with the plural only (the canonical form, the one OpenAPI shows); this
ASGI middleware rewrites a singular or short alias in the kind position before routing, the
way ``skyctl get`` accepts them. The kind position is unambiguous because namespaces may not be
named like a kind (see ``rules.RESERVED_NAMESPACES``).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from skyshift.models.registry import API_KINDS

_ALIASES: dict[str, str] = {}
for _k in API_KINDS:
    for _n in (_k.kind, _k.plural, *_k.aliases):
        _ALIASES[_n.lower()] = _k.plural


#: Top-level routes that are not kinds (the auth routes): never rewritten.
_NOT_KINDS = frozenset({"users", "audit", "token", "invite", "revoke_invite", "register_user"})


def canonical_path(path: str) -> str:
    """``path`` with the kind segment replaced by the kind's plural (unchanged if none)."""
    segments = path.split("/")
    parts = [s for s in segments if s]
    if not parts or len(segments) - 1 != len(parts):  # odd shapes (``//``): leave to routing
        return path
    if parts[0] in _NOT_KINDS:  # ``/users/job`` is the user "job", not a kind alias
        return path
    kind_first = len(parts) == 1 or (len(parts) == 2 and parts[0].lower() in _ALIASES)
    index = 0 if kind_first else 1
    plural = _ALIASES.get(parts[index].lower())
    if plural is None or plural == parts[index]:
        return path
    parts[index] = plural
    return "/" + "/".join(parts)


class KindPathMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            new = canonical_path(path)
            if new != path:
                scope = dict(scope, path=new, raw_path=new.encode())
        await self.app(scope, receive, send)
