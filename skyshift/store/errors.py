"""Errors raised by the object store.

They exist so that nothing above the store ever sees a gRPC or aetcd exception: the API maps
each class to one HTTP status (NotFound 404, AlreadyExists/Conflict 409, Expired 410,
TooLarge 413, InvalidArgument 400, Unavailable 503) and activities decide retryability from
the class alone. The vendor error, when there is one, is chained as ``__cause__``.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error the store raises."""


class NotFound(StoreError):
    """The object does not exist (the message names it)."""


class AlreadyExists(StoreError):
    """A create found the key already present; the stored value was left untouched."""


class Conflict(StoreError):
    """A compare-and-swap precondition failed: the object changed since it was read."""

    def __init__(self, message: str, current_resource_version: str | None = None) -> None:
        super().__init__(message)
        self.current_resource_version = current_resource_version


class Expired(StoreError):
    """A list page or watch asked for a revision that etcd has compacted away."""

    def __init__(self, message: str, compact_revision: int = 0) -> None:
        super().__init__(message)
        self.compact_revision = compact_revision


class Unavailable(StoreError):
    """etcd could not be reached (or did not answer) within the store timeout."""


class TooLarge(StoreError):
    """The encoded object exceeds what etcd accepts in one request (1.5 MiB by default)."""


class InvalidArgument(StoreError, ValueError):
    """A malformed argument: object without a name, bad resourceVersion, bad continue token."""


class InvalidSelector(InvalidArgument):
    """A label selector that does not parse."""
