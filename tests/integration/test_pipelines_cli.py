"""Pipelines and schedules the way a user drives them: ``skyctl`` against ``skyshift up`` (API,
workers, etcd, the Temporal dev server and its Schedules, the local cluster)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.stack import DevStack
from tests.integration.test_local_isolation_stack import skyctl

pytestmark = pytest.mark.integration

PIPELINE = {
    "kind": "Pipeline",
    "metadata": {"name": "template", "labels": {"team": "ml"}},
    "spec": {
        "parameters": {"word": "hello", "fail": "0"},
        "steps": [
            {"name": "prep", "job": {"run": "echo prep {{ params.word }}"}},
            {"name": "train", "dependsOn": ["prep"], "retries": 1,
             "job": {"run": "echo train; exit {{ params.fail }}"}},
            {"name": "report", "dependsOn": ["train"], "job": {"run": "echo report"}},
        ],
    },
}


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def get_json(stack: DevStack, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(ok(skyctl(stack, "get", *args, "-o", "json")))
    return out


def until(what: str, check: Callable[[], Any], timeout: float = 120) -> Any:
    end, last = time.monotonic() + timeout, None
    while time.monotonic() < end:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


@pytest.fixture
def pipeline_file(tmp_path: Path) -> Path:
    doc = json.loads(json.dumps(PIPELINE))
    for step in doc["spec"]["steps"]:
        step["job"] = {"run": step["job"]["run"], "resources": {"cpus": 0.1},
                       "restartPolicy": "Never"}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_pipeline_with_parameters_get_describe_logs(devstack: DevStack,
                                                    pipeline_file: Path) -> None:
    name = f"pl-{uuid.uuid4().hex[:6]}"
    out = ok(skyctl(devstack, "create", "pipeline", name, "-f", str(pipeline_file),
                    "--param", "word", "bonjour"))
    assert f"pipeline/{name} created" in out
    bad = skyctl(devstack, "create", "pipeline", f"{name}-x", "-f", str(pipeline_file),
                 "--param", "nope", "1")
    assert bad.returncode == 2 and "declares no such parameter" in bad.stderr
    assert "Traceback" not in bad.stderr

    def done() -> dict[str, Any] | None:
        obj = get_json(devstack, "pipeline", name)
        return obj if obj["status"].get("phase") in ("Succeeded", "Failed") else None

    obj = until(f"pipeline {name} finished", done)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    table = ok(skyctl(devstack, "get", "pipelines"))
    assert name in table and "3/3 done" in table
    described = ok(skyctl(devstack, "describe", "pipeline", name))
    assert "Steps:" in described and "DEPENDS ON" in described
    assert f"{name}-train" in described and "pipeline%2Fdefault%2F" in described
    logs = ok(skyctl(devstack, "logs", f"{name}-prep"))
    assert "prep bonjour" in logs
    ok(skyctl(devstack, "delete", "pipeline", name, "--wait"))
    gone = skyctl(devstack, "get", "job", f"{name}-prep")
    assert gone.returncode != 0


def test_failed_step_retried_and_cancel(devstack: DevStack, pipeline_file: Path) -> None:
    name = f"pf-{uuid.uuid4().hex[:6]}"
    ok(skyctl(devstack, "create", "pipeline", name, "-f", str(pipeline_file),
              "--param", "fail", "3"))

    def failed() -> dict[str, Any] | None:
        obj = get_json(devstack, "pipeline", name)
        return obj if obj["status"].get("phase") == "Failed" else None

    obj = until(f"pipeline {name} failed", failed)
    assert obj["status"]["steps"]["train"]["attempts"] == 2
    assert obj["status"]["steps"]["report"]["phase"] == "Skipped"
    described = ok(skyctl(devstack, "describe", "pipeline", name))
    assert "2/2" in described and "Skipped" in described

    slow = pipeline_file.parent / "slow.yaml"
    slow.write_text(yaml.safe_dump({"kind": "Pipeline", "metadata": {"name": "s"}, "spec": {
        "steps": [{"name": "wait", "job": {"run": "sleep 300", "resources": {"cpus": 0.1}}}]}}))
    cname = f"pc-{uuid.uuid4().hex[:6]}"
    ok(skyctl(devstack, "create", "pipeline", cname, "-f", str(slow)))
    until("the step running", lambda: get_json(devstack, "pipeline", cname)["status"].get(
        "steps", {}).get("wait", {}).get("phase") == "Running")
    assert "cancelling" in ok(skyctl(devstack, "cancel", "pipeline", cname))
    until("pipeline cancelled", lambda: get_json(devstack, "pipeline", cname)["status"].get(
        "phase") == "Cancelled")


def test_schedule_from_flags_pause_trigger_backfill(devstack: DevStack) -> None:
    name = f"sc-{uuid.uuid4().hex[:6]}"
    ok(skyctl(devstack, "create", "schedule", name, "--every", "3s", "--run", "echo tick",
              "--history-limit", "3", "--max-active-runs", "8"))
    until("3 runs", lambda: get_json(devstack, "schedule", name)["status"].get("runs", 0) >= 3)
    table = ok(skyctl(devstack, "get", "schedules"))
    assert name in table and "every 3s" in table and "Active" in table
    assert "paused" in ok(skyctl(devstack, "pause", "schedule", name))
    obj = until("paused", lambda: (o := get_json(devstack, "schedule", name))["status"].get(
        "phase") == "Paused" and o)
    runs = obj["status"]["runs"]
    assert obj["spec"]["maxActiveRuns"] == 8
    assert "triggered" in ok(skyctl(devstack, "trigger", "schedule", name))
    until("the triggered run", lambda: get_json(devstack, "schedule", name)["status"].get(
        "runs") == runs + 1)
    bad = skyctl(devstack, "backfill", "schedule", name, "--from", "last week", "--to", "now")
    assert bad.returncode == 2 and "is not a time" in bad.stderr
    ok(skyctl(devstack, "backfill", "schedule", name, "--from", "2026-01-01T00:00:00Z",
              "--to", "2026-01-01T00:00:09Z"))
    backfilled = {f"{name}-20260101-0000{s:02d}" for s in (0, 3, 6, 9)}  # both ends included

    def names() -> set[str]:
        jobs = get_json(devstack, "jobs", "-l", f"skyshift.io/schedule={name}")["items"]
        return {j["metadata"]["name"] for j in jobs}

    until("4 backfilled runs", lambda: backfilled <= names())
    assert get_json(devstack, "schedule", name)["status"]["runs"] == runs + 5
    assert "resumed" in ok(skyctl(devstack, "resume", "schedule", name))
    bad = skyctl(devstack, "create", "schedule", f"{name}-b", "--cron", "0 25 * * *",
                 "--run", "date")
    assert bad.returncode == 2 and "hour 25 is out of range" in bad.stderr
    ok(skyctl(devstack, "delete", "schedule", name, "--wait"))
    until("the runs deleted", lambda: not get_json(
        devstack, "jobs", "-l", f"skyshift.io/schedule={name}")["items"])
