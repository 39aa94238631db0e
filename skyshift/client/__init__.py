"""Python client of the SkyShift API: used by ``skyctl``, the tests and users' own scripts.

    from skyshift.client import SkyShiftClient
    with SkyShiftClient() as c:          # server from SKYSHIFT_SERVER or the current context
        c.create({"kind": "Job", "metadata": {"name": "hi"}, "spec": {"run": "echo hi"}})
        for ev in c.watch("jobs", resource_version=c.list("jobs")["metadata"]["resourceVersion"]):
            print(ev.type, ev.object["status"]["phase"])
"""

from skyshift.client.async_client import AsyncSkyShiftClient
from skyshift.client.client import SkyShiftClient
from skyshift.client.errors import ApiError
from skyshift.client.paths import ALL_NAMESPACES
from skyshift.client.types import ApplyResult, DeleteResult, ExecResult, WatchEvent

__all__ = [
    "ALL_NAMESPACES",
    "ApiError",
    "ApplyResult",
    "AsyncSkyShiftClient",
    "DeleteResult",
    "ExecResult",
    "SkyShiftClient",
    "WatchEvent",
]
