"""What listing and watching need of the store, as protocols the ObjectStore satisfies.

The store's modules import one way: ``codec``, ``errors``, ``selectors``, ``transport`` ->
``backend`` (this) -> ``listing``, ``watch`` -> ``etcd`` (the
:class:`~skyshift.store.etcd.ObjectStore`).
So listing and watch work on any object with these members and never import the store class
that calls them.
"""

from __future__ import annotations

from typing import Any, Protocol

import aetcd


class RangeReader(Protocol):
    """Ranges read with the store's retries (consistent, paginated lists)."""

    @property
    def prefix(self) -> str: ...

    @property
    def list_batch(self) -> int: ...

    async def read_range(self, what: str, request: Any) -> Any:
        """One etcd Range request (reads are retried while etcd is unavailable)."""

    async def compacted_revision(self) -> int:
        """The oldest revision etcd still has."""


class WatchSource(Protocol):
    """A client to open watches on, and the store's state a resumable watch follows."""

    @property
    def prefix(self) -> str: ...

    @property
    def timeout(self) -> float: ...

    @property
    def watch_reconnect_attempts(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    async def revision(self) -> int:
        """etcd's current revision."""

    async def watch_client(self) -> aetcd.Client:
        """The client to open a watch on (its token proven current)."""
