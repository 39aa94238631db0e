"""Password hashing with argon2id; only hashes are stored, and checks take the same time whether
or not the user exists (a dummy hash is verified for unknown names)."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

MIN_LENGTH = 8
MAX_LENGTH = 1024


class Passwords:
    def __init__(self, time_cost: int = 3, memory_kib: int = 65536) -> None:
        self._hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_kib)
        self._dummy = self._hasher.hash("skyshift-dummy-password")

    def hash(self, password: str) -> str:
        return self._hasher.hash(password)

    def verify(self, encoded: str | None, password: str) -> bool:
        """True if ``password`` matches ``encoded``; None (no such user) costs the same."""
        try:
            return self._hasher.verify(encoded or self._dummy, password) and encoded is not None
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False


def password_problem(password: str) -> str | None:
    """Why ``password`` is not acceptable for a new account, or None."""
    if len(password) < MIN_LENGTH:
        return f"password must have at least {MIN_LENGTH} characters"
    if len(password) > MAX_LENGTH:
        return f"password must have at most {MAX_LENGTH} characters"
    return None
