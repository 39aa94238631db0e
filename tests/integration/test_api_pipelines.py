"""Pipelines and Schedules through the API (real etcd, a recording lifecycle): what is refused
and with which field, what may change after creation, and the schedule actions."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from skyshift.store import ObjectStore
from tests.fixtures.api import RecordingLifecycle, sample
from tests.integration.test_api_crud import _refused

pytest_plugins = ["tests.fixtures.api"]
pytestmark = pytest.mark.integration


def pipeline(*steps: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"kind": "Pipeline", "metadata": {"name": "p"}, "spec": {"steps": list(steps), **spec}}


def st(name: str, *deps: str, **job: Any) -> dict[str, Any]:
    return {"name": name, "dependsOn": list(deps), "job": {"run": "true", **job}}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (pipeline(st("a", "b"), st("b", "a")), "spec.steps", "a -> b -> a"),
        (pipeline(st("a", "zz")), "spec.steps[0].dependsOn", "no step named 'zz'"),
        (pipeline(st("a"), st("a")), "spec.steps[1].name", "appears twice"),
        (pipeline(st("a", run="echo {{ params.nope }}")), "spec.steps[0].job.run",
         "unknown parameter 'nope'"),
        (pipeline(st("a", image="{{ params.img }}"), parameters={"img": "bad image!"}),
         "spec.steps[0].job.image", "image"),
        (pipeline(st("a", replicas=-1)), "spec.steps[0].job.replicas", "greater than"),
        (pipeline(), "spec.steps", "at least 1"),
        (pipeline(st("a", cpus=2)), "spec.steps[0].job.cpus", "Extra inputs"),
        (pipeline(st("x" * 60)), "metadata.name", "at most 63"),
    ],
)
async def test_bad_pipelines_name_the_field(
    api_client: httpx.AsyncClient, store: ObjectStore, body: dict[str, Any], field: str,
    words: str,
) -> None:
    err = await _refused(api_client, store, "POST", "/default/pipelines", 422, json=body)
    assert err["field"] == field, err
    assert words in err["message"], err


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"cron": "0 25 * * *"}, "spec.cron", "hour 25 is out of range 0-23"),
        ({"cron": "every day"}, "spec.cron", "expected 5 fields"),
        ({"interval": "5 minutes"}, "spec.interval", "not a duration"),
        ({"cron": "0 2 * * *", "interval": "5m"}, "spec", "exactly one of cron"),
        ({"cron": "0 2 * * *", "timezone": "Mars/Olympus"}, "spec.timezone", "time zone"),
        ({"cron": "0 2 * * *", "overlapPolicy": "TerminateOther"}, "spec.overlapPolicy", ""),
        ({"cron": "0 2 * * *", "historyLimit": 0}, "spec.historyLimit", ""),
        ({"cron": "0 2 * * *", "maxActiveRuns": 0}, "spec.maxActiveRuns", ""),
        ({"cron": "0 2 * * *", "maxActiveRuns": 51}, "spec.maxActiveRuns", ""),
    ],
)
async def test_bad_schedules_name_the_field(
    api_client: httpx.AsyncClient, store: ObjectStore, spec: dict[str, Any], field: str,
    words: str,
) -> None:
    body = {"kind": "Schedule", "metadata": {"name": "s"},
            "spec": {"jobTemplate": {"spec": {"run": "date"}}, **spec}}
    err = await _refused(api_client, store, "POST", "/default/schedules", 422, json=body)
    assert err["field"] == field, err
    assert words in err["message"], err


async def test_schedule_interval_under_the_servers_minimum_is_refused(
    api_client: httpx.AsyncClient, store: ObjectStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-second schedule would make 86,400 objects a day: by default the API takes 60 s
    at least, and the admin's SKYSHIFT_SCHEDULE_MIN_INTERVAL moves that floor."""
    monkeypatch.delenv("SKYSHIFT_SCHEDULE_MIN_INTERVAL", raising=False)
    body = {"kind": "Schedule", "metadata": {"name": "often"},
            "spec": {"interval": "1s", "jobTemplate": {"spec": {"run": "date"}}}}
    err = await _refused(api_client, store, "POST", "/default/schedules", 422, json=body)
    assert err["field"] == "spec.interval", err
    assert "shorter than this server allows (60s" in err["message"], err
    r = await api_client.post("/default/schedules", json={**body, "spec": {
        **body["spec"], "interval": "1m"}})
    assert r.status_code == 201, r.text
    merge = {"Content-Type": "application/merge-patch+json"}
    err = await _refused(api_client, store, "PATCH", "/default/schedules/often", 422,
                         headers=merge, content='{"spec": {"interval": "10s"}}')
    assert err["field"] == "spec.interval", err
    assert (await store.get("schedules", "often", "default"))["spec"]["interval"] == "1m"
    monkeypatch.setenv("SKYSHIFT_SCHEDULE_MIN_INTERVAL", "5")
    r = await api_client.patch("/default/schedules/often", headers=merge,
                               content='{"spec": {"interval": "10s"}}')
    assert r.status_code == 200, r.text


async def test_schedule_needs_exactly_one_template(
    api_client: httpx.AsyncClient, store: ObjectStore,
) -> None:
    body = {"kind": "Schedule", "metadata": {"name": "s"}, "spec": {"cron": "@daily"}}
    err = await _refused(api_client, store, "POST", "/default/schedules", 422, json=body)
    assert "exactly one of jobTemplate and pipelineTemplate" in err["message"]


async def test_a_pipeline_runs_what_it_was_created_with(
    api_client: httpx.AsyncClient, store: ObjectStore, api_lifecycle: RecordingLifecycle,
) -> None:
    c = api_client
    r = await c.post("/default/pipelines", json=sample("pipelines", "fixed"))
    assert r.status_code == 201, r.text
    merge = {"Content-Type": "application/merge-patch+json"}
    err = await _refused(c, store, "PATCH", "/default/pipelines/fixed", 422,
                         content=json.dumps({"spec": {"parameters": {"who": "you"}}}),
                         headers=merge)
    assert err["field"] == "spec.parameters" and "create a new pipeline" in err["message"]
    r = await c.patch("/default/pipelines/fixed", content=json.dumps({"spec": {"cancel": True}}),
                      headers=merge)
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["cancel"] is True and r.json()["metadata"]["generation"] == 2
    assert api_lifecycle.hooks("fixed") == ["created", "spec_changed"]
    err = await _refused(c, store, "PATCH", "/default/pipelines/fixed", 422,
                         content=json.dumps({"spec": {"cancel": False}}), headers=merge)
    assert err["field"] == "spec.cancel"


async def test_trigger_and_backfill(
    api_client: httpx.AsyncClient, store: ObjectStore, api_lifecycle: RecordingLifecycle,
) -> None:
    c = api_client
    assert (await c.post("/default/schedules", json=sample("schedules", "nightly"))).status_code \
        == 201
    r = await c.post("/default/schedules/nightly/trigger")
    assert r.status_code == 202, r.text
    assert api_lifecycle.hooks("nightly") == ["created", "trigger"]

    body = {"start": "2026-11-01T00:00:00Z", "end": "2026-11-08T00:00:00Z"}
    r = await c.post("/default/schedules/nightly/backfill", json=body)
    assert r.status_code == 202, r.text
    start, end, overlap = api_lifecycle.backfills[-1]
    assert (start.day, end.day, overlap) == (1, 8, "AllowAll")

    too_much = {"start": "2020-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}
    err = await _refused(c, store, "POST", "/default/schedules/nightly/backfill", 422,
                         json=too_much)
    assert "at most 1000" in err["message"]
    backwards = {"start": "2026-11-08T00:00:00Z", "end": "2026-11-01T00:00:00Z"}
    err = await _refused(c, store, "POST", "/default/schedules/nightly/backfill", 422,
                         json=backwards)
    assert err["field"] == "end"
    err = await _refused(c, store, "POST", "/default/schedules/nightly/backfill", 422,
                         json={"start": "yesterday"})
    assert err["field"] in ("start", "end")
    err = await _refused(c, store, "POST", "/default/schedules/nope/trigger", 404)
    assert "nope" in err["message"]


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        ("0001-01-01T00:00:00+01:00", "0001-01-01T01:00:00+01:00", "start"),  # year 0 in UTC
        ("9999-12-31T20:00:00-01:00", "9999-12-31T23:00:00-01:00", "end"),  # year 10000 in UTC
    ],
)
async def test_backfill_times_out_of_range_in_utc_name_the_field(
    api_client: httpx.AsyncClient, store: ObjectStore, api_lifecycle: RecordingLifecycle,
    start: str, end: str, field: str,
) -> None:
    """Temporal takes UTC timestamps: a time that has none is a 422 naming it, not a 502 from
    the lifecycle plane."""
    c = api_client
    assert (await c.post("/default/schedules", json=sample("schedules", "edge"))).status_code \
        == 201
    err = await _refused(c, store, "POST", "/default/schedules/edge/backfill", 422,
                         json={"start": start, "end": end})
    assert err["field"] == field
    assert f"{field}: " in err["message"] and "out of range" in err["message"]
    assert api_lifecycle.backfills == []
