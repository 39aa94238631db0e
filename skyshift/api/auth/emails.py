"""A plain syntactic check of the e-mail address given at registration.

Deliberately simple (no DNS, no quoted local parts): one '@', a plain local part and a host name
with at least one dot, within the lengths of RFC 5321. It catches typos and junk before an
invite is used; whether the address receives mail is not the API's business.
"""

from __future__ import annotations

import re

_LOCAL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+")
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def email_problem(email: str) -> str | None:
    """Why ``email`` is not an address, or None when it looks like one."""
    local, at, host = email.rpartition("@")
    if not at or not local or not host:
        return "expected an address like name@example.com"
    if len(email) > 254 or len(local) > 64:
        return "it is too long (at most 64 characters before '@' and 254 in all)"
    if (
        "@" in local
        or not _LOCAL.fullmatch(local)
        or ".." in local
        or local.startswith(".")
        or local.endswith(".")
    ):
        return "the part before '@' has characters an address cannot have"
    labels = host.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels):
        return "the part after '@' is not a domain name (e.g. example.com)"
    return None
