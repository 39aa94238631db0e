"""``skyctl create/get/describe quota`` through the real API and etcd."""

from __future__ import annotations

import pytest
import yaml

from tests.integration.test_cli import Skyctl, cli_api, skyctl, uniq  # noqa: F401

pytestmark = pytest.mark.integration


def test_create_get_describe_and_refuse_quota(skyctl: Skyctl) -> None:  # noqa: F811
    name = uniq("q")
    made = skyctl.ok("create", "quota", name, "--hard", "cpus=8,memory=32Gi,jobs=100")
    assert made.out.strip() == f"quota/{name} created"
    obj = yaml.safe_load(skyctl.ok("get", "quota", name, "-o", "yaml").out)
    assert obj["spec"]["hard"] == {"cpus": 8.0, "memory": pytest.approx(34359.738368),
                                   "jobs": 100.0}
    table = skyctl.ok("get", "quotas").out
    header, *rows = table.splitlines()
    assert header.split()[:4] == ["NAME", "NAMESPACE", "COHORT", "USED/HARD"]
    [row] = [r for r in rows if r.startswith(name)]
    assert "cpus: 0/8, jobs: 0/100, memory: 0MB/32Gi" in row
    assert name in skyctl.ok("describe", "quota", name).out
    bad = skyctl("create", "quota", uniq("q"), "--hard", "cpu=8")
    assert bad.code == 2 and "spec.hard: unknown quota key 'cpu'" in bad.err
    assert "Traceback" not in bad.err
    api_bad = skyctl("apply", "-f", "-", stdin=(
        f"kind: Quota\nmetadata: {{name: {uniq('q')}}}\nspec: {{hard: {{jobs: 1.5}}}}\n"))
    assert api_bad.code != 0 and "jobs must be a whole number" in api_bad.err
