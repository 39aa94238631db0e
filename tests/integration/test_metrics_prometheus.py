"""docs/metrics: the shipped Prometheus config and Grafana dashboard against a real stack.

One stack of its own (``skyshift up``: metrics on by default, each process on its own port, the
targets written to ``$SKYSHIFT_HOME/metrics/targets.json``) and a real Prometheus (Debian's,
installed by ``./dev install``) started on an unchanged copy of ``docs/metrics/prometheus.yml``
placed next to that targets file, as docs/metrics.md tells a user to. The stack's reconciler
runs once an hour, so only the control worker's watch of the jobs can move ``skyshift_jobs``.

Every PromQL expression of the dashboard's panels is evaluated through Prometheus' HTTP API with
Grafana's interval variables replaced the way Grafana does at query time (``$__rate_interval``
by a window of several scrapes); a query error fails, and the key panels must return data once a
job has run. Grafana itself is not packaged, so the dashboard's structure (panels, targets, the
datasource variable) is checked from its JSON.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.ports import free_port
from tests.fixtures.require import require_binary
from tests.fixtures.stack import DevStack, stack_up
from tests.integration.test_devstack_clusters import get, skyctl, wait

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics"
CONFIG = DOCS / "prometheus.yml"
DASHBOARD = DOCS / "grafana-dashboard.json"
#: what Grafana puts in place of its variables (a rate window of several 5 s scrapes)
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "5s", "$__range": "1h"}
#: panels with no series until something fails
MAY_BE_EMPTY = {"API server errors", "Activity failures"}
COMPONENTS = {"api", "control", "skylet-manager"}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL with Grafana's variables replaced) for every target of every panel."""
    out = []
    for panel in dashboard()["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            out.append((panel["title"], expr))
    return out


def test_the_shipped_scrape_config_passes_promtool() -> None:
    promtool = require_binary("promtool", "apt-get install prometheus, or ./dev install")
    done = subprocess.run([promtool, "check", "config", str(CONFIG)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_the_dashboard_is_a_grafana_dashboard_on_a_prometheus_datasource_variable() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert board["title"] and board["uid"] and isinstance(board["schemaVersion"], int)
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), ids
    for panel in board["panels"]:
        assert panel["type"] in ("timeseries", "stat"), panel["title"]
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}, panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
            assert target["expr"].strip(), panel["title"]
    # every Grafana variable an expression uses is one the test knows how to replace
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\$\w+", e)}
    assert used <= set(GRAFANA_VARIABLES), used


@contextmanager
def prometheus(stack: DevStack) -> Iterator[str]:
    """Prometheus on a copy of the shipped config next to the stack's targets file."""
    binary = require_binary("prometheus", "apt-get install prometheus, or ./dev install")
    metrics_dir = stack.home / "metrics"
    assert (metrics_dir / "targets.json").is_file(), "skyshift up wrote no targets file"
    shutil.copy(CONFIG, metrics_dir / "prometheus.yml")
    port = free_port()
    log = (metrics_dir / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [binary, f"--config.file={metrics_dir / 'prometheus.yml'}",
         f"--web.listen-address=127.0.0.1:{port}",
         f"--storage.tsdb.path={metrics_dir / 'tsdb'}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def api(prom: str, path: str, **params: str) -> Any:
    """``data`` of a Prometheus HTTP API answer; an error answer fails with its message."""
    reply = httpx.get(f"{prom}/api/v1/{path}", params=params, timeout=30).json()
    assert reply["status"] == "success", (path, params, reply)
    return reply["data"]


def targets_up(prom: str) -> dict[str, str] | None:
    """component -> instance once every process of the stack is scraped and up."""
    try:
        active = api(prom, "targets")["activeTargets"]
    except (httpx.HTTPError, ValueError):
        return None  # not listening yet
    up = {t["labels"]["component"]: t["labels"]["instance"] for t in active
          if t["health"] == "up"}  # fmt: skip
    return up if set(up) == COMPONENTS else None


def control_jobs(stack: DevStack) -> dict[str, float]:
    """``skyshift_jobs`` by phase, scraped from the control worker as Prometheus would."""
    port = stack.ports["metrics"] + 1
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {s.labels["phase"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "skyshift_jobs"}  # fmt: skip


def phase(stack: DevStack, name: str) -> str:
    return str((get(stack, "job", name).get("status") or {}).get("phase") or "")


def test_prometheus_scrapes_every_process_and_answers_every_panel(tmp_path: Path) -> None:
    env = {"SKYSHIFT_RECONCILE_INTERVAL": "3600"}
    with stack_up(tmp_path / "home", extra_env=env) as stack, prometheus(stack) as prom:
        status = stack.run_skyshift("status")
        assert status.returncode == 0, status.stdout + status.stderr
        base = stack.ports["metrics"]
        for i in range(3):
            assert f"http://127.0.0.1:{base + i}/metrics" in status.stdout, status.stdout

        up = wait(lambda: targets_up(prom), "Prometheus never saw every target up", timeout=90)
        assert up == {"api": f"127.0.0.1:{base}", "control": f"127.0.0.1:{base + 1}",
                      "skylet-manager": f"127.0.0.1:{base + 2}"}  # fmt: skip

        made = skyctl(stack, "create", "job", "measured", "--run", "sleep 10", "--cpus", "0.1",
                      "--restart_policy", "Never")  # fmt: skip
        assert made.returncode == 0, made.stderr
        # the gauge follows the job through its phases (the reconciler would take an hour),
        # watched through the scrape alone: a `skyctl get` per poll under load took longer than
        # a short job's Running (a fresh run missed it) before the gauge was even looked at
        wait(lambda: control_jobs(stack).get("Running") == 1, "skyshift_jobs missed Running")
        wait(lambda: phase(stack, "measured") == "Succeeded", "job never Succeeded")
        wait(lambda: control_jobs(stack).get("Succeeded") == 1, "skyshift_jobs missed Succeeded")
        assert control_jobs(stack)["Running"] == 0

        def succeeded_in_prometheus() -> bool:
            rows = api(prom, "query", query="max by (phase) (skyshift_jobs)")["result"]
            return any(r["metric"].get("phase") == "Succeeded" and float(r["value"][1]) == 1
                       for r in rows)  # fmt: skip

        wait(succeeded_in_prometheus, "Prometheus never scraped the Succeeded job", timeout=60)
        check_every_panel(prom)


def check_every_panel(prom: str) -> None:
    results: dict[str, list[Any]] = {}
    for title, expr in expressions():
        results.setdefault(title, []).extend(api(prom, "query", query=expr)["result"])
    empty = {title for title, rows in results.items() if not rows} - MAY_BE_EMPTY
    assert not empty, f"panels without data after a job ran: {sorted(empty)}"

    def series(title: str, label: str) -> dict[str, float]:
        return {r["metric"].get(label, ""): float(r["value"][1]) for r in results[title]}

    assert series("Targets up", "component") == dict.fromkeys(COMPONENTS, 1.0)
    assert series("Jobs by phase", "phase")["Succeeded"] == 1
    assert "local" in series("Sync round p95 by cluster", "cluster")
    assert set(series("Memory (RSS)", "component")) == COMPONENTS
    # a metric name misspelt in the dashboard would only give an empty panel: each one exists
    known = set(api(prom, "label/__name__/values"))
    for title, expr in expressions():
        if title not in MAY_BE_EMPTY:
            names = set(re.findall(r"\b(?:skyshift|temporal|process)_\w+", expr))
            assert names <= known, (title, sorted(names - known))
