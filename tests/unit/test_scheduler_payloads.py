"""The scheduler's dataclasses must survive Temporal's default payload converter unchanged."""

from typing import Any

import pytest
from temporalio.converter import DataConverter

from skyshift.models.quantity import Resources
from skyshift.scheduler import (
    ClusterInfo,
    Decision,
    Expression,
    Filter,
    FilterPolicyInfo,
    JobRequest,
    NodeInfo,
    Preference,
    schedule_batch,
)

JOB = JobRequest(
    key="ns/train", uid="1234", namespace="ns", labels={"team": "ml"}, priority=3,
    created=1_700_000_000.5, replicas=2, per_replica=Resources(1.5, 2048, 1, {"A100": 1}),
    filters=[Filter("f", {"cloud": "aws"}, [Expression("gpu", "In", ["a100"])])],
    preferences=[Preference("p", {"region": "us"}, [Expression("spot", "Exists")], 40)],
)
CLUSTER = ClusterInfo("aws", {"cloud": "aws", "gpu": "a100"}, True,
                      [NodeInfo("n1", Resources(8, 64000, 4, {"A100": 4}))], manager="k8")
POLICY = FilterPolicyInfo("p1", "ns", {"team": "ml"}, ["aws"], ["gcp"])


async def _roundtrip(value: Any) -> Any:
    converter = DataConverter.default
    [payload] = await converter.encode([value])
    [back] = await converter.decode([payload], [type(value)])
    return back


@pytest.mark.parametrize("value", [
    JOB, CLUSTER, POLICY,
    Decision("ns/train", "1234", {"aws": 2}, {"gcp": "not Ready"}, "placed 2 replicas: aws=2"),
])
async def test_payload_roundtrip(value: Any) -> None:
    assert await _roundtrip(value) == value


async def test_decided_placement_survives_a_roundtrip() -> None:
    [d] = schedule_batch([JOB], [CLUSTER], [POLICY])
    assert d.assignments == {"aws": 2}
    back = await _roundtrip(d)
    assert back == d and list(back.assignments) == ["aws"]
