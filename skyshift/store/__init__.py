"""The etcd object store: Kubernetes-style objects with resourceVersion CAS, lists and watches.

Import from here; the submodules are an implementation detail.
"""

from skyshift.store.auth import enable_auth
from skyshift.store.errors import (
    AlreadyExists,
    Conflict,
    Expired,
    InvalidArgument,
    InvalidSelector,
    NotFound,
    StoreError,
    TooLarge,
    Unavailable,
)
from skyshift.store.etcd import ObjectStore
from skyshift.store.listing import Changes, ListResult, changed_since, list_in_pages
from skyshift.store.selectors import Requirement, Selector, parse_selector
from skyshift.store.watch import WatchEvent

__all__ = [
    "AlreadyExists",
    "Changes",
    "Conflict",
    "Expired",
    "InvalidArgument",
    "InvalidSelector",
    "ListResult",
    "NotFound",
    "ObjectStore",
    "Requirement",
    "Selector",
    "StoreError",
    "TooLarge",
    "Unavailable",
    "WatchEvent",
    "changed_since",
    "enable_auth",
    "list_in_pages",
    "parse_selector",
]
