"""A create whose answer is lost, against the real API on real etcd: the client's retry gets a
409, reads the object back and recognises the one its first request made (server-side defaults
and all), or reports the conflict when the name holds another object.

The connection drop is a transport between the client and the in-process API app that forwards
the request (so it takes effect) and then raises ``httpx.RemoteProtocolError`` instead of
handing the answer back.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from skyshift.client import ApiError, AsyncSkyShiftClient
from tests.fixtures.api import MakeApi, sample

pytest_plugins = ["tests.fixtures.api"]
pytestmark = pytest.mark.integration


class DropAnswers(httpx.AsyncBaseTransport):
    """Forwards every request to the app; loses the answer of the first ``drops`` POSTs."""

    def __init__(self, inner: httpx.AsyncBaseTransport, drops: int) -> None:
        self.inner, self.drops = inner, drops

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        if request.method == "POST" and self.drops:
            self.drops -= 1
            await resp.aclose()
            raise httpx.RemoteProtocolError("server disconnected", request=request)
        return resp


async def _create(make_api: MakeApi, obj: dict[str, Any], drops: int) -> dict[str, Any]:
    app = make_api()
    async with app.router.lifespan_context(app):
        inner = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with AsyncSkyShiftClient("http://api", transport=DropAnswers(inner, drops)) as c:
            return await c.create(obj)


async def test_a_lost_create_answer_is_recognised_on_the_real_server(make_api: MakeApi) -> None:
    obj = sample("jobs", "lost-answer", team="ml")
    created = await _create(make_api, obj, drops=1)
    assert created["metadata"]["name"] == "lost-answer"
    assert created["metadata"]["labels"] == {"team": "ml"}
    assert created["metadata"]["uid"]


async def test_another_object_under_the_name_is_a_conflict(make_api: MakeApi) -> None:
    await _create(make_api, sample("jobs", "taken"), drops=0)
    other = sample("jobs", "taken")
    other["spec"]["replicas"] = 7
    with pytest.raises(ApiError) as info:
        await _create(make_api, other, drops=1)
    assert info.value.status == 409 and "not created by this request" in str(info.value)
