"""Login throttling: too many failed logins for one user name, or from one client address,
within a window get 429 with Retry-After until the oldest failure leaves the window.

State is in memory per API replica: with N replicas behind a load balancer an attacker gets at
most N times the budget, which still turns an online brute force into a hopeless one. Throttled
attempts are refused before the password is checked, so a correct guess during a lockout is
refused too. A successful login clears its user name's failures (not its address's, or one
valid account would reset the budget for guessing others).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

_MAX_KEYS = 100_000


class Throttle:
    """Counts failures per key in a sliding window."""

    def __init__(
        self, limit: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window = window
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, key: str) -> deque[float] | None:
        q = self._failures.get(key)
        if q is None:
            return None
        horizon = self.clock() - self.window
        while q and q[0] <= horizon:
            q.popleft()
        if not q:
            del self._failures[key]
            return None
        return q

    def retry_after(self, key: str) -> int:
        """Seconds until ``key`` may try again (0: now)."""
        q = self._recent(key)
        if q is None or len(q) < self.limit:
            return 0
        return max(1, math.ceil(q[len(q) - self.limit] + self.window - self.clock()))

    def failed(self, key: str) -> None:
        if len(self._failures) >= _MAX_KEYS:
            for stale in [k for k in self._failures if self._recent(k) is None]:
                self._failures.pop(stale, None)
            if len(self._failures) >= _MAX_KEYS:  # still full: drop the oldest entries
                for old in list(self._failures)[: _MAX_KEYS // 10]:
                    del self._failures[old]
        self._failures.setdefault(key, deque()).append(self.clock())

    def clear(self, key: str) -> None:
        self._failures.pop(key, None)


class LoginThrottle:
    """One throttle per user name and one per client address."""

    def __init__(
        self,
        per_user: int,
        per_address: int,
        window: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users = Throttle(per_user, window, clock)
        self.addresses = Throttle(per_address, window, clock)

    def retry_after(self, username: str, address: str) -> int:
        return max(self.users.retry_after(username), self.addresses.retry_after(address))

    def failed(self, username: str, address: str) -> None:
        self.users.failed(username)
        self.addresses.failed(address)

    def succeeded(self, username: str) -> None:
        self.users.clear(username)
