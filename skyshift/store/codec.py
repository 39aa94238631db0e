"""Key layout, value encoding and continue tokens of the object store.

Kept apart from the etcd calls so the on-disk format is written down in one place:

* keys are ``{prefix}/{plural}/{namespace}/{name}`` (namespaced) or ``{prefix}/{plural}/{name}``;
* values are compact JSON of the object *without* ``metadata.resourceVersion``; on every read
  the key's etcd ``mod_revision`` is injected as a string (Kubernetes style), so the stored
  bytes never disagree with the revision etcd reports;
* list continue tokens are urlsafe base64 of ``{"k": last key, "rv": snapshot revision}``.
"""

from __future__ import annotations

import base64
import binascii
import json

from skyshift.models.base import Obj
from skyshift.store.errors import InvalidArgument, StoreError


def normalize_prefix(prefix: str) -> str:
    """``"skyshift/"`` and ``"/skyshift"`` both become ``"/skyshift"`` (``""`` stays ``""``)."""
    stripped = prefix.strip("/")
    return f"/{stripped}" if stripped else ""


def _segment(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or "/" in value or value in (".", ".."):
        raise InvalidArgument(f"{what} must be a non-empty string without '/', got {value!r}")
    return value


def describe(plural: str, name: str, namespace: str | None) -> str:
    """How errors name an object: ``jobs/ns/name`` or ``clusters/name``."""
    return f"{plural}/{namespace}/{name}" if namespace else f"{plural}/{name}"


def object_key(prefix: str, plural: str, name: str, namespace: str | None) -> bytes:
    parts = [prefix, _segment(plural, "plural")]
    if namespace:
        parts.append(_segment(namespace, "metadata.namespace"))
    parts.append(_segment(name, "metadata.name"))
    return "/".join(parts).encode()


def list_prefix(prefix: str, plural: str, namespace: str | None) -> bytes:
    """The key prefix (ending in '/') holding every object listed by (plural, namespace)."""
    parts = [prefix, _segment(plural, "plural")]
    if namespace:
        parts.append(_segment(namespace, "namespace"))
    return ("/".join(parts) + "/").encode()


def prefix_range_end(prefix: bytes) -> bytes:
    """The etcd ``range_end`` covering every key that starts with ``prefix``."""
    b = bytearray(prefix)
    for i in reversed(range(len(b))):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[: i + 1])
    return b"\0"


def identity(obj: Obj) -> tuple[str, str | None]:
    """(name, namespace) of a manifest; raises InvalidArgument when it has no usable name."""
    if not isinstance(obj, dict):
        raise InvalidArgument(f"object must be a dict, not {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise InvalidArgument("object has no metadata")
    name = _segment(meta.get("name"), "metadata.name")
    namespace = meta.get("namespace") or None
    if namespace is not None:
        _segment(namespace, "metadata.namespace")
    return name, namespace


def encode(obj: Obj) -> bytes:
    """JSON bytes as stored: everything but ``metadata.resourceVersion``."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    try:
        return json.dumps({**obj, "metadata": meta}, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"object is not JSON-serializable: {exc}") from exc


def decode(value: bytes, revision: int) -> Obj:
    """A stored value as a fresh dict, with ``metadata.resourceVersion = str(revision)``."""
    try:
        obj: Obj = json.loads(value)
    except ValueError:
        obj = None  # type: ignore[assignment]
    if not isinstance(obj, dict):
        raise StoreError(f"value at revision {revision} is not a JSON object: {value[:60]!r}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(revision)
    return obj


def labels_of(obj: Obj) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return labels if isinstance(labels, dict) else {}


#: etcd revisions are int64: a larger number would overflow the request (a 500, not a 400).
MAX_REVISION = 2**63 - 1


def parse_revision(rv: str | int | None, what: str = "resourceVersion") -> int | None:
    """``None``/``""`` -> None; ``"42"``/``42`` -> 42; anything else -> InvalidArgument.

    Only ASCII digits (``"\u00b2".isdigit()`` is true but ``int`` refuses it) and only
    0..MAX_REVISION; the message names ``what``."""
    if rv is None or rv == "":
        return None
    if isinstance(rv, int) and not isinstance(rv, bool):
        value = rv
    elif isinstance(rv, str) and rv.isascii() and rv.isdigit() and len(rv) <= 19:
        value = int(rv)
    elif isinstance(rv, str) and rv.startswith("-") and rv[1:].isascii() and rv[1:].isdigit():
        raise InvalidArgument(f"{what} must not be negative, got {rv!r}")
    else:
        raise InvalidArgument(f"{what} must be a revision number, got {rv!r:.40}")
    if value < 0:
        raise InvalidArgument(f"{what} must not be negative, got {rv!r}")
    if value > MAX_REVISION:
        raise InvalidArgument(f"{what} {rv!r:.40} is out of range (at most {MAX_REVISION})")
    return value


def encode_continue(key: bytes, revision: int) -> str:
    raw = json.dumps({"k": key.decode(), "rv": revision}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str, list_prefix_: bytes) -> tuple[bytes, int]:
    """(last key, snapshot revision) of a token, checked to belong to this list's prefix."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        key = str(data["k"]).encode()
        revision = parse_revision(data["rv"], "continue")
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError, InvalidArgument):
        raise InvalidArgument(f"invalid continue token {token!r:.80}") from None
    if not key.startswith(list_prefix_) or revision is None or revision <= 0:
        raise InvalidArgument(
            f"continue token {token!r} does not belong to this list; list again without it"
        )
    return key, revision
