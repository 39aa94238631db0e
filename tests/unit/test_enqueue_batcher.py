"""The scheduler's placement requests from one process go together while one is on its way
(lifecycle.enqueue.Batcher): one signal event in the scheduler's history for many jobs. A new
job's first request is posted (``send_first``): its POST does not wait for the signal.

Pure unit test: a fake Temporal client that records each signal-with-start and holds it until
the test lets it go.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skyshift.contract.jobs import EnqueueBatch, EnqueueRequest
from skyshift.contract.names import SCHEDULER_ID, SIG_ENQUEUE, SIG_ENQUEUE_MANY
from skyshift.lifecycle.enqueue import MAX_BATCH, Batcher, enqueue, flush, send_first
from skyshift.models.quantity import Resources
from skyshift.scheduler.types import JobRequest

pytestmark = pytest.mark.asyncio


def request(name: str) -> EnqueueRequest:
    req = JobRequest(key=f"ns/{name}", uid=f"uid-{name}", namespace="ns", labels={},
                     priority=0, created=1.0, replicas=1, per_replica=Resources(cpus=1.0))
    return EnqueueRequest(f"job/ns/{name}", 1, req)


class Client:
    """Each start_workflow waits for ``go``; ``fail`` makes the next ones raise."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.go = asyncio.Event()
        self.fail: Exception | None = None

    async def start_workflow(self, workflow: str, arg: Any, *, id: str, task_queue: str,
                             start_signal: str, start_signal_args: list[Any]) -> None:
        assert id == SCHEDULER_ID
        self.sent.append((start_signal, start_signal_args[0]))
        await self.go.wait()
        if self.fail is not None:
            raise self.fail


def keys(arg: Any) -> list[str]:
    reqs = arg.requests if isinstance(arg, EnqueueBatch) else [arg]
    return [r.request.key for r in reqs]


async def until(n: int, client: Client) -> None:
    while len(client.sent) < n:
        await asyncio.sleep(0)


async def test_one_request_goes_at_once_as_a_plain_enqueue() -> None:
    client = Client()
    client.go.set()
    await enqueue(client, request("a"))  # type: ignore[arg-type]
    assert [(sig, keys(arg)) for sig, arg in client.sent] == [(SIG_ENQUEUE, ["ns/a"])]


async def test_those_made_while_one_is_on_its_way_go_in_one_signal() -> None:
    client = Client()
    first = asyncio.create_task(enqueue(client, request("a")))  # type: ignore[arg-type]
    await until(1, client)
    rest = [asyncio.create_task(enqueue(client, request(n)))  # type: ignore[arg-type]
            for n in "bcd"]
    await asyncio.sleep(0.01)
    assert len(client.sent) == 1 and not first.done()  # each caller waits for its signal
    client.go.set()
    await asyncio.gather(first, *rest)
    assert [(sig, keys(arg)) for sig, arg in client.sent] == [
        (SIG_ENQUEUE, ["ns/a"]), (SIG_ENQUEUE_MANY, ["ns/b", "ns/c", "ns/d"]),
    ]


async def test_a_batch_holds_at_most_max_batch_requests() -> None:
    client = Client()
    first = asyncio.create_task(enqueue(client, request("first")))  # type: ignore[arg-type]
    await until(1, client)
    more = [asyncio.create_task(enqueue(client, request(f"r{i}")))  # type: ignore[arg-type]
            for i in range(MAX_BATCH + 1)]
    await asyncio.sleep(0)
    client.go.set()
    await asyncio.gather(first, *more)
    assert [len(keys(arg)) for _, arg in client.sent] == [1, MAX_BATCH, 1]


async def test_every_caller_of_a_failed_signal_gets_its_error_and_the_next_goes_on() -> None:
    client = Client()
    client.fail = RuntimeError("temporal unavailable")
    first = asyncio.create_task(enqueue(client, request("a")))  # type: ignore[arg-type]
    await until(1, client)
    pair = [asyncio.create_task(enqueue(client, request(n)))  # type: ignore[arg-type]
            for n in "bc"]
    client.go.set()
    outcomes = await asyncio.gather(first, *pair, return_exceptions=True)
    assert [str(o) for o in outcomes] == ["temporal unavailable"] * 3
    client.fail = None
    await enqueue(client, request("d"))  # type: ignore[arg-type]
    assert keys(client.sent[-1][1]) == ["ns/d"]


async def test_a_cancelled_caller_leaves_the_others_their_answer() -> None:
    client = Client()
    first = asyncio.create_task(enqueue(client, request("a")))  # type: ignore[arg-type]
    await until(1, client)
    gone = asyncio.create_task(enqueue(client, request("b")))  # type: ignore[arg-type]
    kept = asyncio.create_task(enqueue(client, request("c")))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    gone.cancel()
    client.go.set()
    await asyncio.gather(first, kept)
    assert gone.cancelled()
    assert keys(client.sent[1][1]) == ["ns/b", "ns/c"]  # its request went all the same


async def test_a_first_request_is_posted_without_waiting_and_goes_with_the_others() -> None:
    client = Client()
    send_first(client, request("a"))  # type: ignore[arg-type]  # returns before any signal
    assert client.sent == []
    await until(1, client)
    waiting = asyncio.create_task(enqueue(client, request("b")))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    send_first(client, request("c"))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    client.go.set()
    await waiting
    await flush(client, 5.0)  # type: ignore[arg-type]
    assert [(sig, keys(arg)) for sig, arg in client.sent] == [
        (SIG_ENQUEUE, ["ns/a"]), (SIG_ENQUEUE_MANY, ["ns/b", "ns/c"]),
    ]


async def test_a_posted_request_that_fails_is_logged_and_the_next_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    client = Client()
    client.fail = RuntimeError("temporal unavailable")
    client.go.set()
    send_first(client, request("a"))  # type: ignore[arg-type]
    await flush(client, 5.0)  # type: ignore[arg-type]
    assert "placement request of ns/a not sent (the requeue sweep will)" in caplog.text
    client.fail = None
    send_first(client, request("b"))  # type: ignore[arg-type]
    await flush(client, 5.0)  # type: ignore[arg-type]
    assert [keys(arg) for _, arg in client.sent] == [["ns/a"], ["ns/b"]]


async def test_flush_waits_no_longer_than_its_timeout() -> None:
    client = Client()  # never lets the signal go
    send_first(client, request("a"))  # type: ignore[arg-type]
    await flush(client, 0.05)  # type: ignore[arg-type]
    assert len(client.sent) == 1  # on its way still; the requeue sweep would send it again


async def test_posted_requests_dropped_as_the_process_stops_are_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    client = Client()  # never lets the signal go
    send_first(client, request("a"))  # type: ignore[arg-type]
    await until(1, client)
    send_first(client, request("b"))  # type: ignore[arg-type]
    task = Batcher.of(client).task  # type: ignore[arg-type]
    assert task is not None
    task.cancel()  # what the end of the event loop does
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "placement requests of ns/a, ns/b not sent as this process stops" in caplog.text
