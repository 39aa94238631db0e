"""Issue 26 on Ray, attacked from inside: a non-admin user's job placed on a simulated Ray
cluster attached to a root ``skyshift up`` tries every port of the control plane.

The stack, the users and the probe are those of :mod:`tests.integration.test_workload_isolation`
(root ``skyshift up`` with metrics on, alice with a role on ``iso-a`` only, a job submitted
through the API); the Ray head is started with ``skyshift sim ray up`` and attached as an admin
does, and the job's placement filter sends it there. The probe runs twice inside Ray: as the
job's entrypoint (a child of the head's job supervisor) and as a Ray task in a worker the
raylet starts, and from each it connects to every port the stack listens on (Temporal gRPC and
UI, the dev server's internal ports, etcd client and peer, the API's and workers' metrics).
Every verdict comes from the probe's own output; the API answering the same probe is the
positive control. Ray's own head must keep working (the job runs at all, the skylet reads its
Jobs API), and ``skyshift sim ray down`` must leave no Ray process behind.
"""

from __future__ import annotations

import grp
import json
import pwd
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyshift.contract.jobs import replica_name
from skyshift.devstack.sim.ray import SimRayCluster, existing_clusters
from skyshift.devstack.sim.ray_user import RUN_USER
from tests.fixtures.auth import admin_token
from tests.fixtures.ray import _require_ray
from tests.fixtures.stack import DevStack
from tests.integration.test_sim_ray import sim
from tests.integration.test_workload_isolation import (
    Tenants,
    logs,
    ok,
    port_probe,
    probe_output,
    stack,  # noqa: F401 (a fixture: root `skyshift up` with metrics on)
    stack_ports,
    submit,
    tenants,  # noqa: F401 (a fixture: alice may run jobs in iso-a, bob in iso-b)
    wait_phase,
)

pytestmark = pytest.mark.integration
CLUSTER = "iso-ray"


@pytest.fixture(scope="module")
def ray_head(stack: DevStack) -> Iterator[SimRayCluster]:  # noqa: F811
    """One Ray head (1 CPU) from ``skyshift sim ray up``, ``sim ray down`` afterwards (before
    the stack's ``down``); fails when ``down`` leaves a process of it."""
    _require_ray()
    home = Path(tempfile.mkdtemp(prefix="skw-", dir="/tmp"))  # short: Ray's socket paths
    home.chmod(0o711)  # skyshift-run, whom the head runs as, must enter it
    found: list[SimRayCluster] = []
    try:
        up = sim(home, "up", "--clusters", "1", "--cpus", "1")
        assert up.returncode == 0, up.stdout + up.stderr
        found = existing_clusters(home)
        assert len(found) == 1, up.stdout
        yield found[0]
    finally:
        down = sim(home, "down")
        left = [p for c in found for p in c.processes()]
        shutil.rmtree(home, ignore_errors=True)
    assert down.returncode == 0, down.stdout + down.stderr
    assert left == [], f"sim ray down left Ray processes {left}"


def worker_probe(ports: dict[str, int], api: int) -> str:
    """Shell lines running a Ray task (in a worker the raylet starts, not the entrypoint)
    that prints ``worker_<name>=OPEN`` or the error for each port, the API's included."""
    code = f"""
import json, os, socket, ray
ray.init(logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=0)
def probe(ports):
    out = [f"worker_uid={{os.getuid()}}", f"worker_gid={{os.getgid()}}",
           f"worker_pid={{os.getpid()}}"]
    for name, port in ports.items():
        s = socket.socket()
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", port))
            out.append(f"worker_{{name}}=OPEN")
        except OSError as e:
            out.append(f"worker_{{name}}={{e.strerror or e}}")
        finally:
            s.close()
    return out

print("\\n".join(ray.get(probe.remote(json.loads({json.dumps(json.dumps(ports))})))))
print(f"entrypoint_pid={{os.getpid()}}")
"""
    # the head's own Python (the one with Ray): `python3` on PATH may be another
    return "\n".join([f"{sys.executable} - <<'PY'", code.strip(), "PY"])


def test_a_tenants_ray_job_reaches_no_port_of_the_control_plane(
    stack: DevStack,  # noqa: F811
    tenants: Tenants,  # noqa: F811
    ray_head: SimRayCluster,
) -> None:
    admin = {"Authorization": f"Bearer {admin_token(stack.api_url, stack.home)}"}
    ok(tenants.http.post("/clusters", headers=admin, json={
        "kind": "Cluster", "metadata": {"name": CLUSTER, "labels": {"iso": "ray"}},
        "spec": {"manager": "ray", "config": ray_head.adapter_config()}}))  # fmt: skip
    phase, end = "", time.monotonic() + 120
    while phase != "Ready" and time.monotonic() < end:  # the skylet (root) reads Ray's API
        got = ok(tenants.http.get(f"/clusters/{CLUSTER}", headers=admin))
        phase = (got.get("status") or {}).get("phase", "")
        time.sleep(0.5)
    assert phase == "Ready", got
    ports = stack_ports(stack)
    api = stack.ports["api"]
    probe = "\n".join([*port_probe(ports, api), worker_probe({**ports, "api": api}, api)])

    name = submit(tenants, "alice", "iso-a", probe,
                  placement={"filters": [{"matchLabels": {"iso": "ray"}}]})
    done = wait_phase(tenants, "alice", "iso-a", name, "Succeeded", "Failed")
    seen = probe_output(logs(tenants, "alice", "iso-a", name))
    print("probe output:", json.dumps(seen, indent=1, sort_keys=True))  # shown with -s
    job = ok(tenants.http.get(f"/iso-a/jobs/{name}", headers=admin))
    assert done == "Succeeded", (seen, job.get("status"))
    assert job["status"]["placement"] == {CLUSTER: 1}, job["status"]
    # Ray itself ran it: its Jobs API knows the replica by name, as succeeded
    from ray.job_submission import JobSubmissionClient

    replica = replica_name(name, job["metadata"]["uid"], 0)
    status = JobSubmissionClient(ray_head.address).get_job_status(replica)
    assert str(status.value) == "SUCCEEDED", status

    run_user, run_group = pwd.getpwnam(RUN_USER), grp.getgrnam(RUN_USER)
    for who in ("", "worker_"):  # the entrypoint, then a Ray worker
        assert seen[f"{who}uid"] == str(run_user.pw_uid) != "0", seen
        assert seen[f"{who}gid"] == str(run_group.gr_gid), seen
    assert seen["groups"].split() == [str(run_group.gr_gid)], seen  # no other group
    assert seen["worker_pid"] != seen["entrypoint_pid"], seen  # the task ran in a worker
    # positive control: the probe can connect, the API answers, from both
    assert seen["api"].startswith("HTTP/1.1 200"), seen
    assert seen["worker_api"] == "OPEN", seen
    for who in ("", "worker_"):
        refused = {k: seen.get(f"{who}{k}") for k in ports}
        assert set(refused.values()) == {"Connection refused"}, (who or "entrypoint", refused)
