"""A request whose answer is lost: the client says the outcome is unknown, and creates retry.

Below the real client (and ``skyctl`` on top of it) sits a transport that plays a server with
an object store and a flaky connection: it can process a request and then drop the connection
(``httpx.RemoteProtocolError``, as when a proxy or the server dies mid-answer), time out the
read, or refuse the connection before anything is sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from skyshift.cli.main import cli
from skyshift.cli.state import CliState
from skyshift.client import ApiError, SkyShiftClient
from skyshift.client.errors import OUTCOME_UNKNOWN


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


class FlakyServer:
    """Jobs in memory; ``drop_after`` answers are lost after the request took effect,
    ``refuse`` requests fail to connect, and ``read_timeout`` POSTs time out once processed."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.drop_after = 0
        self.refuse = 0
        self.read_timeout = 0
        self.posts = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if self.refuse:
            self.refuse -= 1
            raise httpx.ConnectError("[Errno 111] Connection refused", request=req)
        resp = self._answer(req)
        if self.drop_after:
            self.drop_after -= 1
            raise httpx.RemoteProtocolError("peer closed connection without sending complete "
                                            "message body", request=req)
        if self.read_timeout and req.method == "POST":
            self.read_timeout -= 1
            raise httpx.ReadTimeout("timed out", request=req)
        return resp

    def _answer(self, req: httpx.Request) -> httpx.Response:
        name = req.url.path.rsplit("/", 1)[-1]
        if req.method == "GET":
            if name in self.jobs:
                return httpx.Response(200, json=self.jobs[name])
            return httpx.Response(404, json={"error": {"code": 404, "reason": "NotFound",
                                                       "message": f"Job {name} not found"}})
        self.posts += 1
        obj = json.loads(req.content)
        name = obj["metadata"]["name"]
        if name in self.jobs:
            return httpx.Response(409, json={"error": {
                "code": 409, "reason": "AlreadyExists",
                "message": f"Job {name} already exists in namespace default"}})
        obj["metadata"].update(uid=f"uid-{len(self.jobs)}", resourceVersion="1")
        obj["status"] = {"phase": "Pending"}
        self.jobs[name] = obj
        return httpx.Response(201, json=obj)


def job(name: str, run: str = "echo hi", **labels: str) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"image": "alpine", "run": run}}


def client(server: FlakyServer) -> SkyShiftClient:
    return SkyShiftClient(server="http://api", transport=httpx.MockTransport(server))


def skyctl(server: FlakyServer, *args: str) -> Result:
    state = CliState(client_factory=lambda _: client(server))
    result = CliRunner().invoke(cli, list(args), obj=state)
    assert "Traceback" not in result.output
    return result


def test_a_create_whose_answer_was_lost_is_retried_and_reported_created() -> None:
    server = FlakyServer()
    server.drop_after = 1  # the first POST creates the job; its answer never arrives
    created = client(server).create(job("train", team="ml"))
    assert created["metadata"]["uid"] == "uid-0"  # the object the first POST made
    assert server.posts == 2 and list(server.jobs) == ["train"]


def test_a_lost_answer_then_someone_elses_object_is_a_conflict() -> None:
    server = FlakyServer()
    server.jobs["train"] = {**job("train", run="other"), "status": {}}
    server.drop_after = 1
    with pytest.raises(ApiError) as info:
        client(server).create(job("train"))
    assert info.value.status == 409
    assert "not created by this request" in str(info.value)


def test_a_lost_answer_and_a_failed_retry_leave_the_outcome_unknown() -> None:
    server = FlakyServer()
    server.drop_after = 2
    with pytest.raises(ApiError) as info:
        client(server).create(job("train"))
    assert info.value.reason == OUTCOME_UNKNOWN
    text = str(info.value)
    assert "may or may not have taken effect" in text and "skyshift up" not in text


def test_an_error_answer_to_the_retry_is_reported_as_is() -> None:
    server = FlakyServer()
    server.drop_after = 1
    answer = server._answer

    def expired(req: httpx.Request) -> httpx.Response:
        if server.posts:  # the retry: the token expired meanwhile
            return httpx.Response(401, json={"error": {"code": 401, "reason": "Unauthorized",
                                                       "message": "token expired"}})
        return answer(req)

    server._answer = expired  # type: ignore[method-assign]
    with pytest.raises(ApiError) as info:
        client(server).create(job("train"))
    assert info.value.status == 401


def test_a_read_timeout_after_a_post_is_an_unknown_outcome_not_a_missing_server() -> None:
    server = FlakyServer()
    server.read_timeout = 2  # the first POST and its retry
    with pytest.raises(ApiError) as info:
        client(server).create(job("train"))
    assert info.value.reason == OUTCOME_UNKNOWN
    assert "outcome of POST is unknown" in str(info.value)
    assert "did not answer in time after the request was sent" in str(info.value)


def test_refused_connections_still_say_how_to_start_a_stack() -> None:
    server = FlakyServer()
    server.refuse = 1
    with pytest.raises(ApiError) as info:
        client(server).create(job("train"))
    assert "skyshift up" in str(info.value) and server.posts == 0


def test_a_lost_answer_to_a_get_says_so_and_to_try_again() -> None:
    server = FlakyServer()
    server.jobs["train"] = job("train")
    server.drop_after = 1
    with pytest.raises(ApiError) as info:
        client(server).get("jobs", "train")
    assert "dropped the connection before answering" in str(info.value)
    assert "skyshift up" not in str(info.value)


def test_apply_after_a_lost_answer_reports_what_it_did() -> None:
    server = FlakyServer()
    server.drop_after = 1
    result = client(server).apply(job("train"))
    assert list(server.jobs) == ["train"]
    assert result.action in ("created", "unchanged")


def test_skyctl_create_reports_created_after_a_lost_answer() -> None:
    server = FlakyServer()
    server.drop_after = 1
    result = skyctl(server, "create", "job", "train", "--run", "echo hi")
    assert result.exit_code == 0, result.output
    assert result.stdout == "job/train created\n"


def test_skyctl_says_when_the_outcome_is_unknown() -> None:
    server = FlakyServer()
    server.drop_after = 2
    result = skyctl(server, "create", "job", "train", "--run", "echo hi")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: the outcome of POST is unknown")
    assert "cannot reach" not in result.stderr and "skyshift up" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
