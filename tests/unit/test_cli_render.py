"""skyctl's formatting: ages, quantities, and the tables of each kind (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from skyshift.cli import render
from skyshift.cli.errors import tidy_lines
from skyshift.cli.render import Table, fmt_memory, fmt_ratio, fmt_request, format_age, sum_nodes
from skyshift.cli.tables import build_table, headers, job_rows, replica_state

NOW = datetime(2025, 1, 10, 12, 0, 0, tzinfo=UTC)


def ts(delta: timedelta) -> str:
    return (NOW - delta).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("delta", "age"),
    [
        (timedelta(seconds=5), "5s"),
        (timedelta(seconds=59), "59s"),
        (timedelta(minutes=3, seconds=10), "3m"),
        (timedelta(hours=2, minutes=59), "2h"),
        (timedelta(days=4, hours=5), "4d"),
        (timedelta(days=800), "2y"),
        (timedelta(seconds=-30), "0s"),  # clock skew never shows a negative age
    ],
)
def test_age_like_kubectl(delta: timedelta, age: str) -> None:
    assert format_age(ts(delta), NOW) == age


def test_age_of_bad_or_missing_timestamp() -> None:
    assert format_age(None, NOW) == "<unknown>"
    assert format_age("yesterday", NOW) == "<unknown>"
    assert format_age("2025-01-10T11:59:00+00:00", NOW) == "1m"
    assert format_age(NOW.timestamp() - 7200, NOW) == "2h"


def test_quantities() -> None:
    assert fmt_memory(512) == "512 MB"
    assert fmt_memory(16000) == "16 GB"
    assert fmt_memory(15543.71) == "15.54 GB"
    total = sum_nodes({"n1": {"cpus": 4, "memory": 8000, "gpus": 0, "accelerators": {"T4": 1}},
                       "n2": {"cpus": 4.0, "memory": 8000, "accelerators": {"T4": 1}}})
    assert total == {"cpus": 8.0, "memory": 16000.0, "gpus": 0.0, "T4": 2.0}
    avail = {"cpus": 3.5, "memory": 4000.0, "T4": 1.0}
    # zero totals (gpus) are left out; accelerators come after the base resources
    assert fmt_ratio(avail, total) == "cpus: 3.5/8\nmemory: 4 GB/16 GB\nT4: 1/2"
    assert fmt_ratio({}, {}) == "{}"
    assert fmt_request({"cpus": 0.5, "memory": 256, "gpus": 0, "accelerators": {"A100": 2}}) == (
        "cpus: 0.5\nmemory: 256 MB\nA100: 2"
    )


def test_table_aligns_multiline_cells() -> None:
    table = Table(["NAME", "RESOURCES", "AGE"], [["a", "cpus: 1\nmemory: 2 GB", "5s"]])
    assert table.render().split("\n") == [
        "NAME   RESOURCES      AGE",
        "a      cpus: 1        5s",
        "       memory: 2 GB",
    ]


def job(**status: object) -> dict[str, object]:
    return {
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml",
                     "creationTimestamp": ts(timedelta(minutes=3))},
        "spec": {"replicas": 4, "resources": {"cpus": 1, "memory": 0, "gpus": 0}},
        "status": {"phase": "Pending", **status},
    }


def test_pending_job_is_one_row_with_no_cluster() -> None:
    rows = job_rows(job(), wide=False, now=NOW)
    assert rows == [["train", "-", "0/4", "cpus: 1", "ml", "Pending", "3m"]]


def test_job_has_one_row_per_cluster() -> None:
    obj = job(
        phase="Running",
        placement={"kind-1": 3, "slurm-1": 1},
        replicaStatus={"kind-1": {"Running": 2, "Pending": 1}, "slurm-1": {"Succeeded": 1}},
        restarts=2,
        message="2 replicas restarting",
    )
    rows = job_rows(obj, wide=True, now=NOW)
    assert [r[:3] + r[5:6] for r in rows] == [
        ["train", "kind-1", "2/3", "Running"],
        ["train", "slurm-1", "1/1", "Succeeded"],
    ]
    assert rows[0][-3:] == ["2", "0", "2 replicas restarting"]  # RESTARTS PRIORITY MESSAGE


def test_failed_job_rows_agree_with_its_phase() -> None:
    """`--replicas 2 --run 'python -c 1'` without python: one replica failed, one is still
    counted Pending; the job is Failed and so is its row."""
    obj = job(phase="Failed", placement={"local": 2},
              replicaStatus={"local": {"Failed": 1, "Pending": 1}})
    assert [r[5] for r in job_rows(obj, wide=False, now=NOW)] == ["Failed"]


def test_placed_cluster_without_counts_yet() -> None:
    rows = job_rows(job(phase="Scheduled", placement={"kind-1": 4}), wide=False, now=NOW)
    assert rows[0][1:3] == ["kind-1", "0/4"]
    assert rows[0][5] == "Scheduled"


@pytest.mark.parametrize(
    ("counts", "phase", "state"),
    [
        ({"Running": 1, "Failed": 1}, "Running", "Running"),
        ({"Failed": 2}, "Running", "Failed"),
        ({"Succeeded": 2}, "Running", "Succeeded"),
        ({}, "Scheduled", "Scheduled"),
        ({"Running": 2}, "Deleting", "Deleting"),
        # a job that failed with a replica never started: the row says Failed, not Pending
        ({"Failed": 1, "Pending": 1}, "Failed", "Failed"),
        ({"Pending": 1}, "Failed", "Failed"),
        ({"Succeeded": 1, "Pending": 1}, "Succeeded", "Succeeded"),
    ],
)
def test_replica_state(counts: dict[str, int], phase: str, state: str) -> None:
    assert replica_state(counts, phase) == state


def test_cluster_table_columns_and_resources() -> None:
    cluster = {
        "kind": "Cluster",
        "metadata": {"name": "kind-1", "labels": {"zone": "a"},
                     "creationTimestamp": ts(timedelta(days=2))},
        "spec": {"manager": "k8"},
        "status": {
            "phase": "Ready",
            "capacity": {"n1": {"cpus": 4, "memory": 8000}, "n2": {"cpus": 4, "memory": 8000}},
            "allocatable": {"n1": {"cpus": 1, "memory": 2000}, "n2": {"cpus": 2, "memory": 8000}},
        },
    }
    table = build_table("Cluster", [cluster], now=NOW)
    assert table.headers == ["NAME", "MANAGER", "LABELS", "RESOURCES (USED/TOTAL)", "STATUS",
                             "AGE"]
    # 3 of 8 CPUs are free, so 5 are used: the same figures as `skyctl status`
    assert table.rows == [
        ["kind-1", "k8", "zone=a", "cpus: 5/8\nmemory: 6 GB/16 GB", "Ready", "2d"]
    ]
    assert headers("Cluster", wide=True)[-4:] == ["CLOUD", "REGION", "NODES", "MESSAGE"]


def test_service_table() -> None:
    svc = {
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default",
                     "creationTimestamp": ts(timedelta(hours=1))},
        "spec": {"type": "LoadBalancer", "primaryCluster": "kind-1",
                 "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]},
        "status": {"clusterIP": "10.0.0.7"},
    }
    table = build_table("Service", [svc], now=NOW)
    assert table.headers == [
        "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORTS", "CLUSTER", "STATUS", "NAMESPACE",
        "AGE",
    ]
    assert table.rows == [["web", "LoadBalancer", "10.0.0.7", "<pending>", "80:8080/TCP",
                           "kind-1", "Pending", "default", "1h"]]
    svc["status"]["phase"] = "Deleting"
    assert build_table("Service", [svc], now=NOW).rows[0][6] == "Deleting"


def test_other_kinds_have_tables_and_survive_missing_fields() -> None:
    for kind in ("Endpoints", "FilterPolicy", "Link", "Namespace", "Role", "Job", "Cluster",
                 "Service"):
        table = build_table(kind, [{"kind": kind, "metadata": {"name": "x"}}], wide=True)
        assert table.rows and table.rows[0][0] == "x"
        assert len(table.rows[0]) == len(table.headers)


EVIL = "\x1b[31mRED\x1b]0;pwned\x07\x9b2J\x7f"


def test_labels_and_cells_show_control_characters_escaped() -> None:
    """An annotation, message or reason set by a user reaches an admin's terminal: its escape
    sequences are shown, not obeyed (C0, DEL and C1 alike)."""
    shown = render.fmt_labels({"note": EVIL})
    assert shown == "note=\\x1b[31mRED\\x1b]0;pwned\\x07\\x9b2J\\x7f"
    table = render.Table(["NAME", "MESSAGE"], [["esc", EVIL + "\nsecond"]]).render()
    for text in (shown, table):
        assert not any((ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0 for c in text)
    assert "\\x1b]0;pwned\\x07" in table and "second" in table
    assert render.printable("a\nb", keep_newlines=True) == "a\nb"
    assert render.printable("a\nb") == "a\\x0ab"
    # error lines (server messages quote user data) go through the same helper
    assert tidy_lines("bad name " + EVIL) == "bad name " + render.printable(EVIL)
