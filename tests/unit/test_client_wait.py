"""``wait()`` on both clients against httpx.MockTransport: it reads once, then follows the
watch from that resourceVersion (never a second GET), and a timeout names where the job stood."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from skyshift.client import ApiError, AsyncSkyShiftClient, SkyShiftClient
from skyshift.client.waiting import parse_for


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


def job(phase: str, rv: int) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": "train", "namespace": "default",
                                        "resourceVersion": str(rv)}, "status": {"phase": phase}}


class Api:
    """A job at ``phase`` whose watch replays ``events`` (type, phase) after the GET."""

    def __init__(self, phase: str | None, events: list[tuple[str, str]]) -> None:
        self.phase, self.events = phase, events
        self.requests: list[tuple[str, dict[str, str]]] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        params = dict(req.url.params)
        self.requests.append((req.url.path, params))
        if "watch" in params:
            body = "".join(json.dumps({"type": t, "object": job(p, 10 + i)}) + "\n"
                           for i, (t, p) in enumerate(self.events))
            self.events = []  # a second watch sees nothing new
            return httpx.Response(200, text=body)
        if self.phase is None:
            return httpx.Response(404, json={"error": {"code": 404, "reason": "NotFound",
                                                       "message": "job train not found"}})
        return httpx.Response(200, json=job(self.phase, 5))

    @property
    def gets(self) -> int:
        return sum(1 for _, p in self.requests if "watch" not in p)


def sync(api: Api) -> SkyShiftClient:
    return SkyShiftClient(server="http://api", transport=httpx.MockTransport(api))


def test_waits_for_the_phase_by_watch_from_the_read_version() -> None:
    api = Api("Pending", [("MODIFIED", "Running"), ("MODIFIED", "Succeeded"),
                          ("MODIFIED", "Failed")])
    obj = sync(api).wait("job", "train", until="phase=Succeeded", timeout=5)
    assert obj is not None and obj["status"]["phase"] == "Succeeded"
    assert api.gets == 1
    watch = [p for _, p in api.requests if "watch" in p]
    assert watch[0]["resourceVersion"] == "5"


def test_already_there_returns_without_watching() -> None:
    api = Api("Failed", [])
    assert sync(api).wait("jobs", "train", until="phase=failed")["status"]["phase"] == "Failed"
    assert len(api.requests) == 1


def test_delete_waits_for_the_deleted_event_and_a_missing_object_is_done() -> None:
    api = Api("Deleting", [("MODIFIED", "Deleting"), ("DELETED", "Deleting")])
    assert sync(api).wait("job", "train", until="delete", timeout=5) is None
    assert sync(Api(None, [])).wait("job", "train", until="delete") is None


def test_timeout_says_what_was_awaited_and_where_it_stood() -> None:
    api = Api("Pending", [("MODIFIED", "Running")])
    with pytest.raises(ApiError) as info:
        sync(api).wait("job", "train", until="phase=Succeeded", timeout=0.5)
    assert info.value.reason == "Timeout"
    assert str(info.value) == ("timed out after 0.5s waiting for job train to reach "
                               "phase=Succeeded: its phase is Running")


def test_deleted_while_waiting_for_a_phase_is_not_found() -> None:
    api = Api("Running", [("DELETED", "Running")])
    with pytest.raises(ApiError) as info:
        sync(api).wait("job", "train", until="phase=Succeeded", timeout=5)
    assert info.value.not_found
    assert "deleted while waiting for phase=Succeeded" in str(info.value)


def test_missing_object_for_a_phase_is_not_found() -> None:
    with pytest.raises(ApiError) as info:
        sync(Api(None, [])).wait("job", "train", until="phase=Running")
    assert info.value.not_found


def test_async_client_waits_the_same_way() -> None:
    async def go() -> tuple[Any, str]:
        api = Api("Pending", [("MODIFIED", "Running")])
        async with AsyncSkyShiftClient(server="http://api",
                                       transport=httpx.MockTransport(api)) as c:
            reached = await c.wait("job", "train", until="phase=Running", timeout=5)
            api2 = Api("Pending", [])
            c2 = AsyncSkyShiftClient(server="http://api", transport=httpx.MockTransport(api2))
            with pytest.raises(ApiError) as info:
                await c2.wait("job", "train", until="phase=Running", timeout=0.3)
            await c2.aclose()
            return reached, info.value.reason

    reached, reason = asyncio.run(go())
    assert reached["status"]["phase"] == "Running"
    assert reason == "Timeout"


@pytest.mark.parametrize("text", ["phase", "status=Running", "phase=", "deleted", ""])
def test_bad_conditions_name_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"phase=<Phase>.*or delete"):
        parse_for(text)


def test_a_watch_that_ends_early_and_empty_is_not_hammered() -> None:
    api = Api("Pending", [])
    with pytest.raises(ApiError):
        sync(api).wait("job", "train", until="phase=Running", timeout=0.5)
    watches = sum(1 for _, p in api.requests if "watch" in p)
    assert 1 <= watches <= 4  # about one per WATCH_PAUSE, not thousands
