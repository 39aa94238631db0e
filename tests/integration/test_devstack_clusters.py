"""What `skyshift up` tells the CLI, and what `skyshift down --purge` removes, on a real stack.

One stack of its own on free ports (so its Temporal UI is not on the default 8233):

* ``skyctl describe`` links the job's workflow to the UI where this stack put it: ``up``
  records it in the ``local`` context (the CLI runs without ``SKYSHIFT_TEMPORAL_UI``);
* a second local cluster created with ``skyctl create cluster b --manager local`` (no
  ``state_dir``) keeps its state under the stack's home, runs a job, and ``down --purge`` stops
  that job's replica and removes the cluster's directory, as it does for ``local``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from skyshift.compat.local import proc as local_proc
from tests.fixtures.stack import DevStack, new_stack, require_stack_binaries

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

LABEL = {"skyshift-test": "purge-b"}


def skyctl(
    stack: DevStack, *args: str, stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``skyctl`` as a user of this stack runs it: its home, nothing else pointing anywhere."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SKYSHIFT_TEMPORAL_UI", "SKYSHIFT_SERVER", "SKYSHIFT_TOKEN")}
    env["SKYSHIFT_HOME"] = str(stack.home)
    return subprocess.run([sys.executable, "-m", "skyshift.cli.main", *args], env=env,
                          input=stdin, capture_output=True, text=True, timeout=60)


def get(stack: DevStack, *what: str) -> dict[str, Any]:
    out = skyctl(stack, "get", *what, "-o", "json")
    assert out.returncode == 0, out.stderr
    obj: dict[str, Any] = json.loads(out.stdout)
    return obj


def wait(check: Any, what: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what} after {timeout:g}s")


def job_manifest() -> str:
    return yaml.safe_dump({
        "kind": "Job",
        "metadata": {"name": "on-b"},
        "spec": {"image": "alpine", "run": "sleep 600", "replicas": 1,
                 "resources": {"cpus": 0.5, "memory": 0},
                 "placement": {"filters": [{"matchLabels": LABEL}]}},
    })


def test_describe_links_the_stacks_ui_and_purge_removes_a_second_local_cluster(
    tmp_path: Path,
) -> None:
    require_stack_binaries()
    stack = new_stack(tmp_path / "home")
    assert stack.ports["ui"] != 8233
    up = stack.run_skyshift("up")
    assert up.returncode == 0, up.stdout + up.stderr
    pid_files: list[Path] = []
    try:
        (key, value), = LABEL.items()
        made = skyctl(stack, "create", "cluster", "b", "--manager", "local", "--cpus", "2",
                      "--memory", "1", "-l", key, value)
        assert made.returncode == 0, made.stderr
        wait(lambda: (get(stack, "cluster", "b").get("status") or {}).get("phase") == "Ready",
             "cluster b not Ready")
        applied = skyctl(stack, "apply", "-f", "-", stdin=job_manifest())
        assert applied.returncode == 0, applied.stderr
        b_dir = stack.home / "clusters" / "b"
        pid_files = wait(lambda: list(b_dir.glob("replicas/*/pid")), "no replica on b")
        info = local_proc.read_pid(pid_files[0].parent)
        assert info is not None and local_proc.alive(info)

        wait(lambda: (get(stack, "job", "on-b").get("status") or {}).get("workflowId"),
             "job on-b has no workflow id")
        described = skyctl(stack, "describe", "job", "on-b")
        assert described.returncode == 0, described.stderr
        ui = f"http://127.0.0.1:{stack.ports['ui']}/namespaces/default/workflows/job%2Fdefault%2Fon-b"
        assert ui in described.stdout, described.stdout
        assert ":8233" not in described.stdout
    finally:
        purge = stack.run_skyshift("down", "--purge")
    assert purge.returncode == 0, purge.stdout + purge.stderr
    assert not (stack.home / "clusters").exists()
    if pid_files:
        assert not local_proc.alive(info), "the replica on b outlived down --purge"
        assert "local replicas: stopped" in purge.stdout
