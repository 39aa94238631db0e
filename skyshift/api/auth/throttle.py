"""Login throttling: too many failed logins within a window get 429 with Retry-After until the
oldest failure leaves the window. Failures are counted three ways:

* per user name *and* client address (``SKYSHIFT_LOGIN_MAX_FAILURES``, default 5): guessing one
  user's password from one address. This is the lockout people meet, and it locks the user out
  only from that address, so nobody can lock ``admin`` out everywhere by failing on purpose;
* per client address (default 20): guessing many users' passwords from one address;
* per user name from all addresses together (``SKYSHIFT_LOGIN_MAX_FAILURES_TOTAL``, default 100):
  a distributed guess at one account. This total does not lock the user out of the addresses it
  logged in from successfully in the last 30 days (at most 16 per user): failing on purpose from
  many addresses (issue 26: 110 failures from 22 addresses) must not lock the real user out
  everywhere. Those addresses keep their own per-(user, address) limit, so guessing stays
  bounded overall: the total for every other address, 5 per window for each known one.

State is in memory per API replica: with N replicas behind a load balancer an attacker gets at
most N times the budget, which still turns an online brute force into a hopeless one. Throttled
attempts are refused before the password is checked, so a correct guess during a lockout is
refused too. A successful login clears its user name's failures (not its address's, or one
valid account would reset the budget for guessing others). Client addresses are what
:mod:`skyshift.api.clientaddr` decided (X-Forwarded-For only from trusted proxies).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

_MAX_KEYS = 100_000
KNOWN_FOR = 30 * 86400.0  # seconds a successful login's address stays known for its user
KNOWN_PER_USER = 16


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
    """Failed logins per (user, address), per address and per user (see the module docstring).

    ``per_user`` bounds a user name's failures from all addresses together; ``per_user_address``
    (default: ``per_user``) its failures from one address.
    """

    def __init__(
        self,
        per_user: int,
        per_address: int,
        window: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        per_user_address: int | None = None,
    ) -> None:
        self.users = Throttle(per_user, window, clock)
        self.addresses = Throttle(per_address, window, clock)
        self.pairs = Throttle(
            per_user if per_user_address is None else per_user_address, window, clock
        )
        self.clock = clock
        #: user -> address -> when it last logged in successfully from there
        self.known: dict[str, dict[str, float]] = {}

    def is_known(self, username: str, address: str) -> bool:
        seen = self.known.get(username, {}).get(address)
        return seen is not None and self.clock() - seen < KNOWN_FOR

    def _remember(self, username: str, address: str) -> None:
        if username not in self.known and len(self.known) >= _MAX_KEYS:
            self.known.pop(next(iter(self.known)))  # the user remembered longest ago
        mine = self.known.setdefault(username, {})
        mine.pop(address, None)
        mine[address] = self.clock()
        while len(mine) > KNOWN_PER_USER:
            mine.pop(next(iter(mine)))  # the oldest success

    @staticmethod
    def _pair(username: str, address: str) -> str:
        return f"{username}\x00{address}"

    def retry_after(self, username: str, address: str) -> int:
        total = 0 if self.is_known(username, address) else self.users.retry_after(username)
        return max(
            self.pairs.retry_after(self._pair(username, address)),
            self.addresses.retry_after(address),
            total,
        )

    def failed(self, username: str, address: str) -> None:
        self.pairs.failed(self._pair(username, address))
        self.users.failed(username)
        self.addresses.failed(address)

    def succeeded(self, username: str, address: str | None = None) -> None:
        self.users.clear(username)
        if address is not None:
            self.pairs.clear(self._pair(username, address))
            self._remember(username, address)
