"""skyctl commands against a fake client: output formats, describe, delete wording, status,
exec exit codes, contexts, and how errors reach the user (CliRunner, no server)."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from skyshift.cli.describe import temporal_ui_link
from skyshift.cli.main import cli
from skyshift.cli.state import CliState
from skyshift.client import ApiError, ApplyResult, DeleteResult, ExecResult, WatchEvent
from skyshift.client.config import load_config
from skyshift.models import kind_info

NOW = "2025-01-10T12:00:00Z"


def job(name: str, ns: str = "default", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "skyshift.io/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": NOW,
                     "resourceVersion": "7", "labels": {"team": "ml"}},
        "spec": {"replicas": 2, "run": "train", "resources": {"cpus": 1, "memory": 0}},
        "status": {"phase": "Pending", **status},
    }


class FakeClient:
    """Duck-types SkyShiftClient; records calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.objects: dict[str, list[dict[str, Any]]] = {"Job": [], "Cluster": []}
        self.error: ApiError | None = None
        self.delete_status = 202
        self.events: list[WatchEvent] = []
        self.exec_result = ExecResult(0, "out\n", "")

    def _maybe_fail(self) -> None:
        if self.error:
            raise self.error

    def list(self, kind: str, namespace: str | None = None, label_selector: Any = None,
             limit: Any = None, follow: bool = True) -> dict[str, Any]:
        kind = kind_info(kind).kind
        self.calls.append(("list", kind, namespace, label_selector))
        self._maybe_fail()
        return {"kind": f"{kind}List", "metadata": {"resourceVersion": "9"},
                "items": self.objects.get(kind, [])}

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("get", kind, name, namespace))
        self._maybe_fail()
        for obj in self.objects.get(kind, []):
            if obj["metadata"]["name"] == name:
                return obj
        raise ApiError(404, "NotFound", f"{kind} {name} not found")

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", obj))
        self._maybe_fail()
        return obj

    def apply(self, obj: dict[str, Any], namespace: str | None = None) -> ApplyResult:
        self.calls.append(("apply", obj, namespace))
        self._maybe_fail()
        return ApplyResult("created", obj)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> DeleteResult:
        self.calls.append(("delete", kind, name, namespace))
        self._maybe_fail()
        return DeleteResult(self.delete_status, {"kind": kind, "metadata": {"name": name}})

    def watch(self, kind: str, name: str | None = None, namespace: str | None = None,
              resource_version: str | None = None, label_selector: Any = None,
              timeout: float | None = None) -> Iterator[WatchEvent]:
        self.calls.append(("watch", kind, name, namespace, resource_version))
        yield from self.events

    def logs(self, name: str, namespace: str | None = None, tail: int | None = None) -> str:
        self.calls.append(("logs", name, namespace, tail))
        self._maybe_fail()
        return "line 1\nline 2\n"

    def exec(self, name: str, command: builtins.list[str], namespace: str | None = None,
             rank: int = 0) -> ExecResult:
        self.calls.append(("exec", name, command, namespace, rank))
        return self.exec_result

    def healthz(self) -> Any:
        self._maybe_fail()
        return {"status": "ok"}


def last(fake: FakeClient) -> tuple[Any, ...]:
    """The most recent call (a function, so mypy does not narrow it between asserts)."""
    return fake.calls[-1]


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


@pytest.fixture
def fake() -> FakeClient:
    return FakeClient()


def run(fake: FakeClient, *args: str, stdin: str | None = None) -> Result:
    state = CliState(client_factory=lambda _: fake)
    result = CliRunner().invoke(cli, list(args), obj=state, input=stdin)
    assert "Traceback" not in result.output
    return result


def test_get_table_json_yaml_name(fake: FakeClient) -> None:
    fake.objects["Job"] = [job("a"), job("b", placement={"c1": 1, "c2": 1})]
    table = run(fake, "get", "jobs")
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["NAME", "CLUSTER", "REPLICAS", "RESOURCES", "NAMESPACE",
                                "STATUS", "AGE"]
    assert [ln.split()[:2] for ln in lines[1:]] == [["a", "-"], ["b", "c1"], ["b", "c2"]]
    assert last(fake) == ("list", "Job", "default", None)

    data = json.loads(run(fake, "get", "job", "-o", "json").stdout)
    assert data["kind"] == "JobList" and len(data["items"]) == 2
    data = yaml.safe_load(run(fake, "get", "jobs", "-o", "yaml").stdout)
    assert [i["metadata"]["name"] for i in data["items"]] == ["a", "b"]
    assert run(fake, "get", "jobs", "-o", "name").stdout.split() == ["job/a", "job/b"]
    one = json.loads(run(fake, "get", "job", "a", "-o", "json").stdout)
    assert one["metadata"]["name"] == "a"
    wide = run(fake, "get", "jobs", "-o", "wide").stdout.splitlines()[0].split()
    assert wide[-3:] == ["RESTARTS", "PRIORITY", "MESSAGE"]


def test_get_scopes_and_aliases(fake: FakeClient) -> None:
    run(fake, "get", "jobs", "-A")
    assert last(fake) == ("list", "Job", "all", None)
    run(fake, "get", "job", "-n", "ml", "-l", "team=ml")
    assert last(fake) == ("list", "Job", "ml", "team=ml")
    for alias in ("cl", "cluster", "clusters", "CLUSTERS"):
        run(fake, "get", alias)
        assert last(fake) == ("list", "Cluster", None, None)
    for alias, kind in (("svc", "Service"), ("edp", "Endpoints"), ("edps", "Endpoints"),
                        ("fp", "FilterPolicy"), ("filterPolicies", "FilterPolicy"),
                        ("ns", "Namespace"), ("roles", "Role"), ("link", "Link")):
        assert run(fake, "get", alias).exit_code == 0
        assert last(fake)[1] == kind


def test_get_empty_says_so_on_stderr(fake: FakeClient) -> None:
    result = run(fake, "get", "jobs", "-n", "dev")
    assert result.exit_code == 0 and result.stdout == ""
    assert "No jobs found in namespace dev." in result.stderr


def test_watch_prints_rows_as_events_arrive(fake: FakeClient) -> None:
    fake.objects["Job"] = [job("a")]
    fake.events = [WatchEvent("MODIFIED", job("a", phase="Running", placement={"c1": 2},
                                               replicaStatus={"c1": {"Running": 2}})),
                   WatchEvent("BOOKMARK", {}),
                   WatchEvent("DELETED", job("a"))]
    result = run(fake, "get", "jobs", "-w", "--output-watch-events", "--watch-timeout", "0.2")
    lines = [ln.split() for ln in result.stdout.splitlines() if ln.strip()]
    assert [ln[0] for ln in lines] == ["EVENT", "ADDED", "MODIFIED", "DELETED"]
    assert lines[2][2:4] == ["c1", "2/2"]
    assert ("watch", "Job", None, "default", "9") in fake.calls  # resumes from the list's rv
    events = run(fake, "get", "jobs", "-w", "-o", "json", "--watch-timeout", "0.2").stdout
    types = [json.loads(line)["type"] for line in events.splitlines()]
    assert types[:3] == ["ADDED", "MODIFIED", "DELETED"]


def test_describe_shows_reasons_conditions_and_workflow_link(
    fake: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYSHIFT_TEMPORAL_UI", "http://ui:8233/")
    fake.objects["Job"] = [job(
        "train", message="no cluster fits",
        schedulerReasons={"kind-1": "cpus: need 4, free 2", "slurm-1": "excluded by policy"},
        conditions=[{"type": "Scheduled", "status": "False", "reason": "Unschedulable",
                     "message": "0/2 clusters fit", "lastTransitionTime": NOW}],
        workflowId="job/default/train",
    )]
    out = run(fake, "describe", "job", "train").stdout
    assert "Name:             train" in out
    assert "run: train" in out  # the spec, in full
    assert "message: no cluster fits" in out
    assert "kind-1    cpus: need 4, free 2" in out
    assert "Unschedulable" in out and "0/2 clusters fit" in out
    assert "http://ui:8233/namespaces/default/workflows/job%2Fdefault%2Ftrain" in out


def test_temporal_link_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKYSHIFT_TEMPORAL_UI", raising=False)
    assert temporal_ui_link("cluster/a b") == (
        "http://127.0.0.1:8233/namespaces/default/workflows/cluster%2Fa%20b"
    )


def test_describe_links_the_ui_the_context_records(
    fake: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`skyshift up` on another UI port writes it into the `local` context: describe links
    there; SKYSHIFT_TEMPORAL_UI still beats it; `config set-context --temporal-ui` sets it."""
    monkeypatch.delenv("SKYSHIFT_TEMPORAL_UI", raising=False)
    fake.objects["Job"] = [job("train", workflowId="job/default/train")]
    assert run(fake, "config", "set-context", "local", "--temporal-ui",
               "http://127.0.0.1:18233/", "--use").exit_code == 0
    assert load_config().current().temporal_ui == "http://127.0.0.1:18233"
    out = run(fake, "describe", "job", "train").stdout
    assert "http://127.0.0.1:18233/namespaces/default/workflows/job%2Fdefault%2Ftrain" in out
    monkeypatch.setenv("SKYSHIFT_TEMPORAL_UI", "http://ui:8233")
    assert "http://ui:8233/namespaces/" in run(fake, "describe", "job", "train").stdout
    bad = run(fake, "config", "set-context", "local", "--temporal-ui", "ui:8233")
    assert bad.exit_code == 2 and "--temporal-ui" in bad.stderr


def test_delete_says_deleting_or_deleted(fake: FakeClient) -> None:
    assert run(fake, "delete", "job", "a", "b").stdout == "job/a deleting\njob/b deleting\n"
    fake.delete_status = 200
    assert run(fake, "delete", "svc", "web", "-n", "x").stdout == "service/web deleted\n"
    assert last(fake) == ("delete", "Service", "web", "x")
    assert run(fake, "delete", "cluster", "c1").stdout == "cluster/c1 deleted\n"
    assert last(fake) == ("delete", "Cluster", "c1", None)


def test_delete_wait_follows_the_teardown(fake: FakeClient) -> None:
    fake.objects["Job"] = [job("a")]
    fake.events = [WatchEvent("MODIFIED", job("a", phase="Deleting")),
                   WatchEvent("DELETED", job("a"))]
    result = run(fake, "delete", "job", "a", "--wait")
    assert result.exit_code == 0
    assert result.stdout == "job/a deleting\njob/a deleted\n"
    fake.events = []
    result = run(fake, "delete", "job", "a", "--wait", "--timeout", "0.3")
    assert result.exit_code == 1 and "still exists after 0.3s" in result.stderr
    fake.objects["Job"] = []  # already gone when we look
    assert run(fake, "delete", "job", "a", "--wait").stdout.endswith("job/a deleted\n")


def test_api_errors_are_one_line_exit_1(fake: FakeClient) -> None:
    fake.error = ApiError(409, "AlreadyExists", "Job hello already exists in namespace default")
    result = run(fake, "create", "job", "hello")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: Job hello already exists in namespace default (AlreadyExists)\n"
    )
    fake.error = ApiError(0, "Unreachable", "cannot reach the SkyShift API at http://x:1 "
                          "(connection refused): start a local stack with `skyshift up`")
    result = run(fake, "get", "jobs")
    assert result.exit_code == 1 and "skyshift up" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unexpected_exceptions_never_show_a_traceback(fake: FakeClient) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("disk on fire")

    fake.list = boom  # type: ignore[method-assign]
    result = run(fake, "get", "jobs")
    assert result.exit_code == 1
    assert result.stderr == "error: RuntimeError: disk on fire\n"


def test_status_shows_clusters_merged_row_and_active_jobs(fake: FakeClient) -> None:
    ready = {"kind": "Cluster", "metadata": {"name": "c1", "creationTimestamp": NOW},
             "spec": {"manager": "local"},
             "status": {"phase": "Ready", "capacity": {"n": {"cpus": 8, "memory": 16000}},
                        "allocatable": {"n": {"cpus": 6, "memory": 12000}}}}
    down = {"kind": "Cluster", "metadata": {"name": "c2", "creationTimestamp": NOW},
            "spec": {"manager": "slurm"},
            "status": {"phase": "Error", "capacity": {"n": {"cpus": 4}}, "allocatable": {}}}
    fake.objects["Cluster"] = [ready, down]
    fake.objects["Job"] = [job("run1", phase="Running"), job("done", phase="Succeeded")]
    out = run(fake, "status").stdout
    assert "RESOURCES (USED/TOTAL)" in out
    assert "cpus: 2/8" in out and "memory: 4 GB/16 GB" in out  # used/total of c1
    merged = next(ln for ln in out.splitlines() if ln.startswith("Merged-Cluster"))
    assert "cpus: 2/8" in merged and "Ready" in merged  # only Ready clusters are summed
    assert "Active jobs (1)" in out and "run1" in out and "done" not in out


def test_logs_and_exec(fake: FakeClient) -> None:
    result = run(fake, "logs", "train", "--tail", "5")
    assert result.stdout == "line 1\nline 2\n"
    assert last(fake) == ("logs", "train", "default", 5)
    result = run(fake, "exec", "train", "--rank", "1", "--", "ls", "-la")
    assert result.exit_code == 0 and result.stdout == "out\n"
    assert last(fake) == ("exec", "train", ["ls", "-la"], "default", 1)
    fake.exec_result = ExecResult(3, "", "boom\n")
    result = run(fake, "exec", "train", "-t", "train-1a2b3c4d-2", "false")
    assert result.exit_code == 3 and result.stderr == "boom\n"
    assert last(fake)[-1] == 2
    result = run(fake, "exec", "train", "-it", "bash")
    assert result.exit_code == 2 and "not supported" in result.stderr


def test_apply_multi_doc_from_stdin(fake: FakeClient) -> None:
    docs = "kind: Job\nmetadata: {name: a}\nspec: {run: x}\n---\n" \
           "kind: cluster\nmetadata: {name: c}\nspec: {manager: local}\n"
    result = run(fake, "apply", "-f", "-", "-n", "ml", stdin=docs)
    assert result.exit_code == 0, result.output
    assert result.stdout == "job/a created\ncluster/c created\n"
    applied = [c[1] for c in fake.calls if c[0] == "apply"]
    assert applied[0]["metadata"]["namespace"] == "ml"
    assert applied[1]["kind"] == "Cluster" and "namespace" not in applied[1]["metadata"]


def test_apply_validates_everything_before_sending(fake: FakeClient) -> None:
    docs = "kind: Job\nmetadata: {name: a}\n---\nkind: Job\nmetadata: {name: b}\n" \
           "spec: {replicas: -1}\n"
    result = run(fake, "apply", "-f", "-", stdin=docs)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: <stdin> (document 2): invalid Job: spec.replicas")
    assert not [c for c in fake.calls if c[0] == "apply"]
    result = run(fake, "apply", "-f", "/no/such/file.yaml")
    assert result.exit_code == 2 and "cannot read /no/such/file.yaml" in result.stderr
    result = run(fake, "apply", "-f", "-", stdin="kind: [unclosed\n")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1


def test_contexts_round_trip(fake: FakeClient) -> None:
    assert run(fake, "config", "set-context", "prod", "--server", "https://p:1",
               "-n", "ml").exit_code == 0
    assert load_config().current_context == "local"  # set-context does not switch
    assert run(fake, "config", "use-ctx", "prod").stdout == "Switched to context 'prod'.\n"
    cfg = load_config()
    assert cfg.current_context == "prod"
    assert cfg.current().server == "https://p:1" and cfg.current().namespace == "ml"
    out = run(fake, "config", "get-contexts").stdout.splitlines()
    assert out[0].split() == ["CURRENT", "NAME", "SERVER", "NAMESPACE", "USER"]
    assert any(ln.split()[:2] == ["*", "prod"] for ln in out)
    # the context's namespace is the default for -n
    run(fake, "get", "jobs")
    assert last(fake) == ("list", "Job", "ml", None)
    bad = run(fake, "config", "use-context", "nope")
    assert bad.exit_code == 1 and "context 'nope' not found" in bad.stderr


def test_help_everywhere_has_an_example() -> None:
    runner = CliRunner()
    paths = [[], ["get"], ["describe"], ["delete"], ["apply"], ["logs"], ["exec"], ["status"],
             ["version"], ["create"], ["create", "job"], ["create", "cluster"],
             ["create", "svc"], ["create", "fp"], ["create", "link"], ["create", "edp"],
             ["create", "role"], ["create", "ns"], ["config"], ["config", "use-context"],
             ["config", "set-context"], ["config", "get-contexts"],
             ["config", "current-context"]]
    for path in paths:
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "skyctl" in result.output and "Example" in result.output, path
