"""wait, label, annotate, patch, --cluster and the refused inputs of issue 31, end to end: the
installed ``skyctl`` against a live API on the real etcd (lifecycles off, so a job's phase stays
where the API put it)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.test_cli import Skyctl, cli_api, skyctl, uniq  # noqa: F401

pytestmark = pytest.mark.integration


def test_wait_times_out_naming_the_phase_then_sees_a_delete(skyctl: Skyctl) -> None:  # noqa: F811
    name = uniq("w")
    skyctl.ok("create", "job", name, "--run", "true")
    assert skyctl.ok("wait", "job", name, "--for", "phase=pending").out.strip() == \
        f"job/{name} condition met (phase=pending)"
    slow = skyctl("wait", "job", name, "--for", "phase=Succeeded", "--timeout", "1.5")
    assert slow.code == 1
    assert slow.err.strip() == (f"error: timed out after 1.5s waiting for job {name} to reach "
                                "phase=Succeeded: its phase is Pending")
    # a delete while waiting is seen through the watch, well before the timeout
    deleter = threading.Timer(1.0, lambda: skyctl.ok("delete", "job", name))
    started = time.monotonic()
    deleter.start()
    gone = skyctl.ok("wait", "job", name, "--for", "delete", "--timeout", "20")
    deleter.join()
    assert gone.out.strip() == f"job/{name} deleted"
    assert time.monotonic() - started < 15


def test_label_annotate_patch_round_trip(skyctl: Skyctl) -> None:  # noqa: F811
    name = uniq("m")
    skyctl.ok("create", "job", name, "--run", "true", "-l", "team", "ml")
    assert skyctl.ok("label", "job", name, "gpu=a100", "team-").out.strip() == \
        f"job/{name} labeled"
    refused = skyctl("label", "job", name, "gpu=h100")
    assert refused.code == 1 and "--overwrite is false" in refused.err
    skyctl.ok("label", "job", name, "gpu=h100", "--overwrite")
    skyctl.ok("annotate", "job", name, "owner=alice")
    skyctl.ok("patch", "job", name, "-p", '{"spec": {"priority": 4}}')
    skyctl.ok("patch", "job", name, "--type", "json", "-p",
              '[{"op": "replace", "path": "/spec/replicas", "value": 2}]')
    obj = yaml.safe_load(skyctl.ok("get", "job", name, "-o", "yaml").out)
    assert obj["metadata"]["labels"] == {"gpu": "h100"}
    assert obj["metadata"]["annotations"] == {"owner": "alice"}
    assert (obj["spec"]["priority"], obj["spec"]["replicas"]) == (4, 2)
    invalid = skyctl("patch", "job", name, "-p", '{"spec": {"replicas": -1}}')
    assert invalid.code == 1 and "spec.replicas" in invalid.err


def test_cluster_flag_and_refused_inputs(skyctl: Skyctl, tmp_path: Path) -> None:  # noqa: F811
    cluster = uniq("c")
    skyctl.ok("create", "cluster", cluster, "--manager", "local", "--cpus", "2")
    job = uniq("p")
    made = skyctl.ok("create", "job", job, "--run", "true", "--cluster", cluster)
    assert made.err == ""
    obj = yaml.safe_load(skyctl.ok("get", "job", job, "-o", "yaml").out)
    assert obj["spec"]["placement"]["filters"][0]["matchLabels"] == {
        "skyshift.io/cluster": cluster}
    missing = skyctl.ok("create", "job", uniq("p"), "--run", "true", "--cluster", "nosuch-x")
    assert "cluster 'nosuch-x' does not exist (yet)" in missing.err

    twice = skyctl("create", "job", uniq("d"), "-l", "k", "v", "-l", "k", "v2")
    assert twice.code == 2 and "key 'k' is given more than once" in twice.err
    future = skyctl("apply", "-f", "-", stdin=f"apiVersion: skyshift.io/v999\nkind: Job\n"
                                                f"metadata: {{name: {uniq('v')}}}\n")
    assert future.code == 2 and "apiVersion 'skyshift.io/v999' is not served" in future.err
    blob = tmp_path / "x.bin"
    blob.write_bytes(b"\x00\xff\xfe binary")
    binary = skyctl("apply", "-f", str(blob))
    assert binary.code == 2 and str(blob) in binary.err and "not a text manifest" in binary.err
