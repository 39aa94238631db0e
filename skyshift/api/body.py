"""Reading request bodies: size limit, content types, JSON or YAML.

Manifests arrive as JSON from the client library and as YAML from people (``skyctl apply -f``
or curl), so both are accepted on create/replace; the content type decides, and a missing or
generic one is sniffed. Bodies are read incrementally so an oversized upload is refused (413)
without holding it in memory, whatever the Content-Length header claims.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from fastapi import Request

from skyshift.api.errors import ApiError

DEFAULT_MAX_BODY_BYTES = 1024 * 1024

JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml", "text/yaml", "application/x-yaml", "text/x-yaml")
SNIFF_TYPES = ("", "text/plain", "application/octet-stream")
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_bytes(request: Request, limit: int) -> bytes:
    """The raw body, refusing (413) anything longer than ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body is larger than the limit of {limit} bytes")


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"request body is not UTF-8: {exc}") from exc


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(_decode(raw))
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"malformed JSON body: {exc}") from exc


def parse_yaml(raw: bytes) -> Any:
    try:
        docs = [d for d in yaml.safe_load_all(_decode(raw)) if d is not None]
    except yaml.YAMLError as exc:
        raise ApiError(400, f"malformed YAML body: {exc}") from exc
    if len(docs) > 1:
        raise ApiError(400, "YAML body holds several documents: send one object per request")
    return docs[0] if docs else None


async def read_manifest(request: Request, limit: int) -> dict[str, Any]:
    """One object from a JSON or YAML body (400 when malformed, 415 for other content types)."""
    ctype = media_type(request)
    raw = await read_bytes(request, limit)
    if not raw.strip():
        raise ApiError(400, "request body is empty: expected an object manifest")
    if ctype in JSON_TYPES:
        data = parse_json(raw)
    elif ctype in YAML_TYPES:
        data = parse_yaml(raw)
    elif ctype in SNIFF_TYPES:
        # JSON is a subset of YAML, but try JSON first so its error messages stay precise.
        data = parse_json(raw) if raw.lstrip()[:1] in (b"{", b"[") else parse_yaml(raw)
    else:
        raise ApiError(
            415,
            f"unsupported content type {ctype!r}: send application/json or application/yaml",
        )
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be an object (a mapping with kind and metadata)")
    return data


async def read_patch(request: Request, limit: int) -> tuple[str, Any]:
    """``(kind, document)`` of a PATCH body: ``json-patch`` (a list) or ``merge-patch`` (a dict).

    ``application/json`` is accepted too and decided by shape: a list is a JSON Patch (what
    the original SkyShift took), an object is a merge patch.
    """
    ctype = media_type(request)
    if ctype not in (JSON_PATCH, MERGE_PATCH, *JSON_TYPES, *SNIFF_TYPES[:1]):
        raise ApiError(
            415,
            f"unsupported patch content type {ctype!r}: send {JSON_PATCH} (RFC 6902) "
            f"or {MERGE_PATCH} (RFC 7386)",
        )
    raw = await read_bytes(request, limit)
    doc = parse_json(raw)
    if ctype == JSON_PATCH or (ctype != MERGE_PATCH and isinstance(doc, list)):
        if not isinstance(doc, list):
            raise ApiError(400, "a JSON Patch body must be a list of operations")
        return "json-patch", doc
    if not isinstance(doc, dict):
        raise ApiError(400, "a merge patch body must be a JSON object")
    return "merge-patch", doc
