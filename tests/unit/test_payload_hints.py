"""The payload type-hint cache: same answers as typing.get_type_hints, looked up once per class,
and temporalio decodes payloads exactly as before once it is installed."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any

from temporalio.converter import DataConverter

from skyshift.contract.jobs import EnqueueRequest, JobStatusPatch
from skyshift.models.quantity import Resources
from skyshift.scheduler.types import JobRequest
from skyshift.workers import payload_hints


@dataclass
class Sample:
    name: str
    counts: dict[str, int] = field(default_factory=dict)


def test_cached_returns_the_same_hints_and_calls_once() -> None:
    calls: list[object] = []

    def counting(obj: object, **kwargs: Any) -> dict[str, Any]:
        calls.append(obj)
        return typing.get_type_hints(obj, **kwargs)

    hints = payload_hints.cached(counting)
    assert hints(Sample) == typing.get_type_hints(Sample)
    assert hints(Sample) is hints(Sample)
    assert calls == [Sample]
    assert hints(Sample, include_extras=True) == typing.get_type_hints(Sample)  # passed through
    assert len(calls) == 2


async def test_payloads_round_trip_with_the_cache_installed() -> None:
    assert payload_hints.install() and payload_hints.install()  # idempotent
    conv = DataConverter.default
    req = EnqueueRequest("job/ns/a", 3, JobRequest(key="ns/a", uid="u", namespace="ns",
                                                  labels={"x": "y"}, priority=2, created=1.5,
                                                  replicas=2, per_replica=Resources(cpus=0.5)))
    patch = JobStatusPatch("ns", "a", "u", message="m", restarts=1)
    for value in (req, patch, req):
        [payload] = await conv.encode([value])
        [back] = await conv.decode([payload], [type(value)])
        assert back == value
