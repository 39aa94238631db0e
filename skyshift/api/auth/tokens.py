"""Bearer tokens: HS256 JWTs naming the user (and its uid), with an expiry.

The uid claim ties a token to one incarnation of an account: deleting a user and registering the
name again does not revive old tokens. Only HS256 is accepted on the way in (no ``alg: none``,
no algorithm confusion), and ``exp``/``iat``/``sub`` are required.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

import jwt

ISSUER = "skyshift"
ALGORITHM = "HS256"
#: Clock skew tolerated between API replicas (seconds).
LEEWAY = 10


class InvalidToken(Exception):
    """The token is malformed, tampered with, signed with another key, or expired."""


@dataclass(frozen=True)
class Claims:
    username: str
    uid: str
    expires_at: int


@dataclass(frozen=True)
class IssuedToken:
    token: str
    expires_at: int
    expires_in: int


class TokenIssuer:
    def __init__(self, key: bytes, ttl_seconds: int) -> None:
        self._key = key
        self.ttl_seconds = ttl_seconds

    def issue(self, username: str, uid: str, ttl_seconds: int | None = None) -> IssuedToken:
        now = int(time.time())
        ttl = self.ttl_seconds if ttl_seconds is None else ttl_seconds
        claims = {
            "iss": ISSUER,
            "sub": username,
            "uid": uid,
            "iat": now,
            "nbf": now,
            "exp": now + ttl,
            "jti": secrets.token_hex(8),  # two logins in one second still differ
        }
        return IssuedToken(jwt.encode(claims, self._key, algorithm=ALGORITHM), now + ttl, ttl)

    def verify(self, token: str) -> Claims:
        try:
            data = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                issuer=ISSUER,
                leeway=LEEWAY,
                options={"require": ["exp", "iat", "sub", "iss"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise InvalidToken("token expired") from exc
        except jwt.PyJWTError as exc:
            raise InvalidToken("invalid token") from exc
        sub, uid, exp = data.get("sub"), data.get("uid"), data.get("exp")
        if not isinstance(sub, str) or not sub or not isinstance(uid, str):
            raise InvalidToken("invalid token")
        if not isinstance(exp, int | float):
            raise InvalidToken("invalid token")
        return Claims(username=sub, uid=uid, expires_at=int(exp))
