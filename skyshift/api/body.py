"""Reading request bodies: size limit, content types, JSON or YAML.

Manifests arrive as JSON from the client library and as YAML from people (``skyctl apply -f``
or curl), so both are accepted on create/replace; the content type decides, and a missing or
generic one is sniffed. Bodies are read incrementally so an oversized upload is refused (413)
without holding it in memory, whatever the Content-Length header claims.

Once read, a body is decoded in a worker thread (a large one takes CPU that the event loop
owes every other request) and checked as decoded against :class:`~skyshift.api.limits.Limits`:
no YAML anchors or aliases, bounded nesting, value count and size (see :mod:`.limits`).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import yaml
from fastapi import Request

from skyshift.api import safeyaml
from skyshift.api.errors import ApiError
from skyshift.api.limits import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_BODY_BYTES,
    Limits,
    check_tree,
    field_path,
    too_deep,
)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "Limits", "parse_json", "parse_yaml", "read_manifest"]

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
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
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


def parse_json(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> Any:
    """A JSON body, bounded by ``limits`` (400 when malformed or too deep, 413 too large)."""
    text = _decode(raw)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"malformed JSON body: {exc}") from exc
    except RecursionError:
        raise too_deep(limits, _deep_json_path(text, limits.max_depth)) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ApiError(400, f"malformed JSON body: {exc}") from exc
    check_tree(data, limits)
    return data


_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:,]')


def _deep_json_path(text: str, max_depth: int) -> str | None:
    """Where JSON ``text`` first nests deeper than ``max_depth`` (for a body the parser itself
    could not descend): a scan of its brackets outside strings."""
    stack: list[list[Any]] = []  # [is_object, current key or index] of each open container
    last: Any = None
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token[0] == '"':
            last = token[1:-1]
        elif token in "[{":
            if len(stack) >= max_depth:
                return field_path([entry[1] for entry in stack])
            stack.append([token == "{", None if token == "{" else 0])
        elif token in "]}":
            if stack:
                stack.pop()
        elif stack and token == ":" and stack[-1][0]:
            stack[-1][1] = last
        elif stack and token == "," and not stack[-1][0]:
            stack[-1][1] += 1
    return None


def parse_yaml(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> Any:
    """One YAML document without anchors or aliases, bounded by ``limits``."""
    try:
        docs = safeyaml.load(_decode(raw), limits)
    except yaml.YAMLError as exc:
        raise ApiError(400, f"malformed YAML body: {exc}") from exc
    except (ValueError, TypeError, RecursionError) as exc:
        raise ApiError(400, f"malformed YAML body: {exc}") from exc
    if len(docs) > 1:
        raise ApiError(400, "YAML body holds several documents: send one object per request")
    data = docs[0] if docs else None
    check_tree(data, limits)
    return data


def _parse_manifest(ctype: str, raw: bytes, limits: Limits) -> Any:
    if ctype in JSON_TYPES:
        return parse_json(raw, limits)
    if ctype in YAML_TYPES:
        return parse_yaml(raw, limits)
    # JSON is a subset of YAML, but try JSON first so its error messages stay precise.
    if raw.lstrip()[:1] in (b"{", b"["):
        return parse_json(raw, limits)
    return parse_yaml(raw, limits)


async def read_manifest(request: Request, limits: Limits) -> dict[str, Any]:
    """One object from a JSON or YAML body (400 when malformed, 415 for other content types)."""
    ctype = media_type(request)
    if ctype not in (*JSON_TYPES, *YAML_TYPES, *SNIFF_TYPES):
        raise ApiError(
            415,
            f"unsupported content type {ctype!r}: send application/json or application/yaml",
        )
    raw = await read_bytes(request, limits.max_bytes)
    if not raw.strip():
        raise ApiError(400, "request body is empty: expected an object manifest")
    data = await asyncio.to_thread(_parse_manifest, ctype, raw, limits)
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be an object (a mapping with kind and metadata)")
    return data


async def read_patch(request: Request, limits: Limits) -> tuple[str, Any]:
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
    raw = await read_bytes(request, limits.max_bytes)
    doc = await asyncio.to_thread(parse_json, raw, limits)
    if ctype == JSON_PATCH or (ctype != MERGE_PATCH and isinstance(doc, list)):
        if not isinstance(doc, list):
            raise ApiError(400, "a JSON Patch body must be a list of operations")
        return "json-patch", doc
    if not isinstance(doc, dict):
        raise ApiError(400, "a merge patch body must be a JSON object")
    return "merge-patch", doc
