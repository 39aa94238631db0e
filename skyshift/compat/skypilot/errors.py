"""SkyPilot's failures, sorted into the compat errors the control plane acts on.

The runner reports an exception by class name (and its base classes' names) and message,
since SkyPilot's exception types cannot be imported on SkyShift's side. The classes decide
first; a few messages refine ``ResourcesUnavailableError``, which SkyPilot raises both for "no
room right now" (retry later or elsewhere: ``Capacity``) and for a request no enabled infra can
ever satisfy (``Permanent``). SkyPilot's message is kept in every error.
"""

from __future__ import annotations

import re
from typing import Any

from skyshift.compat.errors import CompatError, NotFound, Permanent, Transient
from skyshift.compat.provision_types import Capacity

# the request, the credentials or the configuration is wrong: retrying cannot help
_PERMANENT = {
    "InvalidSkyPilotConfigError", "InvalidCloudConfigs", "InvalidCloudCredentials",
    "NoCloudAccessError", "NotSupportedError", "ProvisionUnsupportedError",
    "InvalidClusterNameError", "CloudUserIdentityError", "ClusterOwnerIdentityMismatchError",
    "PermissionDeniedError", "UserRequestRejectedByPolicy", "ResourcesMismatchError",
    "APIVersionMismatchError", "ApiServerAuthenticationError", "ValueError", "TypeError",
    "KeyError", "ModuleNotFoundError", "ImportError",
}
_NOT_FOUND = {"ClusterDoesNotExist"}
# ResourcesUnavailableError messages meaning "never", not "not now"
_NEVER = (
    "no launchable resource", "not enabled", "is disabled", "infeasible", "does not exist",
    "not found in", "not supported", "no cloud access", "not in the list of",
    "catalog does not contain", "invalid",
)


def classify(error: dict[str, Any], what: str) -> CompatError:
    """The compat error for a runner's ``{"type", "mro", "message"}``."""
    kind = str(error.get("type") or "Exception")
    mro = {str(c) for c in error.get("mro") or [kind]}
    message = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", str(error.get("message") or kind)).strip()
    text = f"SkyPilot {what} failed: {kind}: {message}"[:4000]
    lowered = message.lower()
    if mro & _NOT_FOUND:
        return NotFound(text)
    if "ResourcesUnavailableError" in mro:
        if "KubeAPIUnreachableError" not in mro and any(n in lowered for n in _NEVER):
            return Permanent(text)
        return Capacity(text)
    if "ClusterNotUpError" in mro or "ClusterStatusFetchingError" in mro:
        return Transient(text)
    if mro & _PERMANENT:
        return Permanent(text)
    return Transient(text)
