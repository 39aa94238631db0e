"""Container image references, checked when a Job is created rather than when a cluster pulls it.

A malformed image (``invalid-image-format-#``) used to be accepted and only failed, much later,
on the cluster that tried to pull it. The grammar is the one Docker and Kubernetes accept:
``[registry[:port]/]path[:tag][@algorithm:hex]``, where path components are lowercase
alphanumerics joined by ``.``, ``_``, ``__`` or dashes, a tag is at most 128 word characters,
dots and dashes (not starting with either), and the name part is at most 255 characters.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from skyshift.models.meta import checked_or_empty

MAX_NAME_LENGTH = 255

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = rf"(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9A-Fa-f:]+\])"
_REGISTRY = rf"{_HOST}(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"

_REFERENCE = re.compile(
    rf"^(?P<name>(?:{_REGISTRY}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)

EXAMPLES = "e.g. ubuntu:22.04, ghcr.io/org/app:1.2 or registry:5000/team/app@sha256:<hex>"


def image_problem(image: str) -> str | None:
    """Why ``image`` is not a valid reference, or None when it is."""
    if image != image.strip() or any(c.isspace() for c in image):
        return "must not contain whitespace"
    match = _REFERENCE.fullmatch(image)
    if match is None:
        hint = ""
        path = image.split("@", 1)[0]
        if "/" in path:
            path = path.split("/", 1)[1]
        if any(c.isupper() for c in path.split(":", 1)[0]):
            hint = "repository names must be lowercase; "
        return (
            f"{hint}expected [registry[:port]/]name[:tag][@digest] with lowercase name "
            f"components of letters, digits, '.', '_' and '-' ({EXAMPLES})"
        )
    name = match.group("name")
    first, slash, _ = name.partition("/")
    if slash and not ("." in first or ":" in first or first == "localhost") and (
        first != first.lower()
    ):  # not a registry (Docker's rule): a path component, which must be lowercase
        return "repository names must be lowercase"
    if len(name) > MAX_NAME_LENGTH:
        return f"the repository name is longer than {MAX_NAME_LENGTH} characters"
    return None


def validate_image(image: str) -> str:
    """``image`` unchanged when valid; a ValueError saying what is wrong otherwise.

    The empty string is allowed: it means "the cluster manager's default image".
    """
    return checked_or_empty(image, image_problem, "image reference")


#: A string field holding an image reference, checked by :func:`validate_image`.
ImageRef = Annotated[str, AfterValidator(validate_image)]
