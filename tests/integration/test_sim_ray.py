"""``skyshift sim ray up/status/down`` as a user runs them: a real Ray head comes up, its Jobs
API answers at the address ``up`` prints, and ``down`` leaves no Ray process behind."""

from __future__ import annotations

import grp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from skyshift.devstack.sim.ray import existing_clusters
from tests.fixtures.ports import _ephemeral_low
from tests.fixtures.ray import _require_ray

pytestmark = pytest.mark.integration


def sim(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skyshift.devstack", "sim", "ray", *args, "--home", str(home)],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        env={**os.environ, "SKYSHIFT_HOME": str(home / "sk")},
    )


def test_up_prints_the_attach_line_and_down_stops_everything() -> None:
    _require_ray()
    home = Path(tempfile.mkdtemp(prefix="sks-", dir="/tmp"))
    home.chmod(0o711)
    try:
        up = sim(home, "up", "--clusters", "1", "--cpus", "1")
        assert up.returncode == 0, up.stdout + up.stderr
        m = re.search(r"skyctl create cluster r1 --manager ray --address (http://\S+)", up.stdout)
        assert m, up.stdout
        [cluster] = existing_clusters(home)
        assert cluster.address == m.group(1)
        assert cluster.jobs_api_ready()
        # all its ports below the ephemeral range, the workers' too (sim/ray_ports.py says why)
        ports = [cluster.gcs_port, cluster.dashboard_port, *cluster.ports.values(),
                 *cluster.worker_ports]
        assert len(set(ports)) == len(ports) and max(ports) < _ephemeral_low(), ports
        pids = cluster.processes()
        assert pids
        if os.geteuid() == 0:  # issue 26: never root, so neither are the jobs' entrypoints
            uids = {pid: _ids(pid, "Uid") for pid in pids}
            assert 0 not in uids.values(), uids
            assert cluster.user == "skyshift-run"
            # the group `skyshift up`'s firewall refuses the control plane to
            group = grp.getgrnam("skyshift-run").gr_gid
            assert {_ids(pid, "Gid") for pid in pids} <= {group, -1}
        status = sim(home, "status")
        assert f"r1: running on {cluster.address} (Jobs API ready" in status.stdout
        # what the docs put into `--address "$(skyshift sim ray address r1)"`
        assert sim(home, "address", "r1").stdout == f"{cluster.address}\n"
        other = sim(home, "address", "r9")
        assert other.returncode == 1 and "no running simulated Ray cluster 'r9'" in other.stderr
        assert "running: r1" in other.stderr and "Traceback" not in other.stderr
        again = sim(home, "up", "--clusters", "1", "--cpus", "1")
        assert "already running" in again.stdout and cluster.processes()
    finally:
        down = sim(home, "down")
        status = sim(home, "status")
        shutil.rmtree(home, ignore_errors=True)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped 1 running cluster(s)" in down.stdout
    assert cluster.processes() == []
    assert all(not Path(f"/proc/{pid}").exists() or _zombie(pid) for pid in pids)
    assert "r1: stopped" in status.stdout


def _zombie(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return raw[raw.rindex(")") + 2:].split()[0] in ("Z", "X")


def _ids(pid: int, field: str) -> int:
    """The real uid or gid (``field``: "Uid" or "Gid") of ``pid``; -1 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return -1
    return int(status.split(f"{field}:")[1].split()[0])
