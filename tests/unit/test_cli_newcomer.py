"""The commands kubectl users reach for (wait, label, annotate, patch), through the real
client against a small in-memory API (httpx.MockTransport): what a user sees and what the
server is asked to write."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from skyshift.api.patches import merge_patch
from skyshift.cli.main import cli
from skyshift.cli.state import CliState
from skyshift.client import SkyShiftClient


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


class MiniApi:
    """One job ``train`` in ``default``: GET, merge/JSON PATCH (with the resourceVersion
    precondition), and a watch that replays ``events`` (phases) then ends."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] = {
            "kind": "Job",
            "metadata": {"name": "train", "namespace": "default", "resourceVersion": "5",
                         "labels": {"team": "ml"}, "annotations": {}},
            "spec": {"replicas": 1, "priority": 0}, "status": {"phase": "Pending"}}
        self.events: list[str] = []
        self.patches: list[tuple[str, Any]] = []
        self.conflicts = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.url.path != "/default/jobs/train":
            return httpx.Response(404, json={"error": {"code": 404, "reason": "NotFound",
                                                       "message": "not found"}})
        if "watch" in req.url.params:
            lines = []
            for phase in self.events:
                self.bump()
                self.obj["status"]["phase"] = phase
                lines.append(json.dumps({"type": "MODIFIED", "object": self.obj}))
            self.events = []
            return httpx.Response(200, text="".join(ln + "\n" for ln in lines))
        if req.method == "PATCH":
            return self.patch(req)
        return httpx.Response(200, json=self.obj)

    def bump(self) -> None:
        meta = self.obj["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    def patch(self, req: httpx.Request) -> httpx.Response:
        doc = json.loads(req.content)
        self.patches.append((req.headers["content-type"], doc))
        if self.conflicts:
            self.conflicts -= 1
            self.bump()
            return httpx.Response(409, json={"error": {"code": 409, "reason": "Conflict",
                                                       "message": "stale resourceVersion"}})
        if isinstance(doc, dict):
            self.obj = merge_patch(self.obj, doc)
        else:
            for op in doc:  # only what the tests send: replace on a /spec field
                self.obj["spec"][op["path"].rsplit("/", 1)[1]] = op["value"]
        self.bump()
        return httpx.Response(200, json=self.obj)


def run(api: MiniApi, *args: str) -> Result:
    def factory(_: CliState) -> SkyShiftClient:
        return SkyShiftClient(server="http://api", transport=httpx.MockTransport(api))

    result = CliRunner().invoke(cli, list(args), obj=CliState(client_factory=factory))
    assert "Traceback" not in result.output
    return result


def test_wait_for_a_phase_follows_the_watch() -> None:
    api = MiniApi()
    api.events = ["Running", "Succeeded"]
    out = run(api, "wait", "job", "train", "--for", "phase=Succeeded", "--timeout", "5")
    assert out.exit_code == 0, out.output
    assert out.stdout.strip() == "job/train condition met (phase=Succeeded)"


def test_wait_timeout_exits_non_zero_naming_the_phase_it_saw() -> None:
    api = MiniApi()
    api.events = ["Running"]
    out = run(api, "wait", "job", "train", "--for", "phase=Succeeded", "--timeout", "0.3")
    assert out.exit_code == 1
    assert out.stderr.strip() == ("error: timed out after 0.3s waiting for job train to reach "
                                  "phase=Succeeded: its phase is Running")


def test_wait_for_something_else_is_a_usage_error() -> None:
    out = run(MiniApi(), "wait", "job", "train", "--for", "condition=Ready")
    assert out.exit_code == 2
    assert "phase=<Phase>" in out.stderr and "or delete" in out.stderr


def test_wait_for_delete_of_a_missing_object_is_done() -> None:
    out = run(MiniApi(), "wait", "job", "gone", "--for", "delete")
    assert out.exit_code == 0 and out.stdout.strip() == "job/gone deleted"


def test_label_sets_removes_and_refuses_to_overwrite_without_the_flag() -> None:
    api = MiniApi()
    out = run(api, "label", "job", "train", "gpu=a100", "team-")
    assert out.exit_code == 0, out.output
    assert out.stdout.strip() == "job/train labeled"
    assert api.obj["metadata"]["labels"] == {"gpu": "a100"}
    # the write is conditional on the version that was read
    assert api.patches[-1][1]["metadata"]["resourceVersion"] == "5"

    refused = run(api, "label", "job", "train", "gpu=h100")
    assert refused.exit_code == 1
    assert refused.stderr.strip() == ("error: label 'gpu' already has a value (a100), and "
                                      "--overwrite is false")
    assert api.obj["metadata"]["labels"] == {"gpu": "a100"}

    assert run(api, "label", "job", "train", "gpu=h100", "--overwrite").exit_code == 0
    assert api.obj["metadata"]["labels"] == {"gpu": "h100"}


def test_label_retries_from_a_fresh_read_after_a_conflict() -> None:
    api = MiniApi()
    api.conflicts = 1
    out = run(api, "label", "job", "train", "a=b")
    assert out.exit_code == 0, out.output
    assert api.obj["metadata"]["labels"] == {"team": "ml", "a": "b"}
    assert [p[1]["metadata"]["resourceVersion"] for p in api.patches] == ["5", "6"]


@pytest.mark.parametrize(("args", "message"), [
    (["a=1", "a=2"], "label key 'a' is given more than once"),
    (["oops"], "label 'oops': expected KEY=VALUE to set or KEY- to remove"),
    (["=v"], "label '=v' has an empty key"),
])
def test_label_usage_mistakes(args: list[str], message: str) -> None:
    api = MiniApi()
    out = run(api, "label", "job", "train", *args)
    assert out.exit_code == 2
    assert out.stderr.strip() == f"error: {message}"
    assert api.patches == []


def test_annotate_and_removing_a_missing_key_warns() -> None:
    api = MiniApi()
    out = run(api, "annotate", "job", "train", "owner=alice")
    assert out.exit_code == 0 and out.stdout.strip() == "job/train annotated"
    assert api.obj["metadata"]["annotations"] == {"owner": "alice"}
    again = run(api, "annotate", "job", "train", "nope-")
    assert again.exit_code == 0
    assert "warning: annotation 'nope' not found" in again.stderr
    assert again.stdout.strip() == "job/train unchanged"


def test_patch_merge_and_json() -> None:
    api = MiniApi()
    out = run(api, "patch", "job", "train", "-p", '{"spec": {"priority": 5}}')
    assert out.exit_code == 0 and out.stdout.strip() == "job/train patched"
    assert api.obj["spec"]["priority"] == 5
    assert api.patches[-1][0] == "application/merge-patch+json"
    ops = '[{"op": "replace", "path": "/spec/replicas", "value": 3}]'
    assert run(api, "patch", "job", "train", "--type", "json", "-p", ops).exit_code == 0
    assert api.obj["spec"]["replicas"] == 3
    assert api.patches[-1][0] == "application/json-patch+json"


@pytest.mark.parametrize(("args", "message"), [
    (["-p", "{nope"], "-p is not JSON"),
    (["-p", "[]"], "--type merge takes a JSON object"),
    (["--type", "json", "-p", "{}"], "--type json takes a list of operations"),
])
def test_patch_bad_documents_are_usage_errors(args: list[str], message: str) -> None:
    api = MiniApi()
    out = run(api, "patch", "job", "train", *args)
    assert out.exit_code == 2 and message in out.stderr
    assert api.patches == []


class LogsApi(MiniApi):
    """The job's output grows by one line per read until it has ended."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines, self.reads = lines, 0
        self.obj["status"]["phase"] = "Running"

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/logs"):
            self.reads += 1
            if self.reads >= len(self.lines):
                self.obj["status"]["phase"] = "Succeeded"
            return httpx.Response(200, text="".join(self.lines[:self.reads]),
                                  headers={"content-type": "text/plain"})
        return super().__call__(req)


def test_logs_follow_prints_each_line_once_until_the_job_ends() -> None:
    api = LogsApi(["epoch 1\n", "epoch 2\n", "done\n"])
    api.events = []
    out = run(api, "logs", "train", "-f")
    assert out.exit_code == 0, out.output
    assert out.stdout == "epoch 1\nepoch 2\ndone\n"
    assert api.reads == 4  # the last read comes after the job was seen Succeeded


def test_logs_follow_with_tail_starts_from_the_last_lines() -> None:
    api = LogsApi(["a\n", "b\n", "c\n"])
    api.reads = 1  # two lines exist already
    out = run(api, "logs", "train", "-f", "--tail", "1")
    assert out.exit_code == 0, out.output
    assert out.stdout == "b\nc\n"


class BusyLogsApi(LogsApi):
    """LogsApi whose cluster does not answer in time (504) at the second read."""

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/logs") and self.reads == 1 and not getattr(self, "busy", 0):
            self.busy = 1
            return httpx.Response(504, json={"error": {
                "code": 504, "reason": "Timeout",
                "message": "logs of job default/train: cluster(s) c1 did not answer within 25s"}})
        return super().__call__(req)


def test_logs_follow_reads_again_when_a_cluster_is_busy() -> None:
    api = BusyLogsApi(["epoch 1\n", "epoch 2\n", "done\n"])
    api.events = []
    out = run(api, "logs", "train", "-f")
    assert out.exit_code == 0, out.output
    assert out.stdout == "epoch 1\nepoch 2\ndone\n"  # nothing lost, nothing twice
    assert "did not answer within 25s (Timeout) (reading again)" in out.stderr


class EditApi(MiniApi):
    """MiniApi with PUT: a stale resourceVersion is 409, a negative priority 422."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[dict[str, Any]] = []
        self.change_before_put = False

    def __call__(self, req: httpx.Request) -> httpx.Response:
        if req.method != "PUT":
            return super().__call__(req)
        body = json.loads(req.content)
        self.puts.append(json.loads(req.content))  # a copy: self.obj keeps changing
        if self.change_before_put:
            self.bump()
        if body["metadata"]["resourceVersion"] != self.obj["metadata"]["resourceVersion"]:
            return httpx.Response(409, json={"error": {"code": 409, "reason": "Conflict",
                                                       "message": "stale resourceVersion"}})
        if body["spec"]["priority"] < 0:
            return httpx.Response(422, json={"error": {
                "code": 422, "reason": "Invalid", "field": "spec.priority",
                "message": "invalid job: spec.priority: must be >= 0"}})
        self.obj = {**body, "status": self.obj["status"]}
        self.bump()
        return httpx.Response(200, json=self.obj)


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set $EDITOR to a script replacing ``old`` by ``new`` in the file it is given."""
    def use(old: str, new: str) -> None:
        script = tmp_path / "ed.py"
        script.write_text("import sys\np = sys.argv[1]\ns = open(p).read()\n"
                          f"open(p, 'w').write(s.replace({old!r}, {new!r}))\n")
        monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
        monkeypatch.delenv("VISUAL", raising=False)
        monkeypatch.setenv("TMPDIR", str(tmp_path))
    return use


def test_edit_applies_with_the_read_resource_version(editor: Any) -> None:
    api = EditApi()
    editor("priority: 0", "priority: 7")
    out = run(api, "edit", "job", "train")
    assert out.exit_code == 0, out.output
    assert out.stdout.strip() == "job/train edited"
    assert api.obj["spec"]["priority"] == 7
    assert api.puts[0]["metadata"]["resourceVersion"] == "5"


def test_edit_without_changes_is_cancelled(editor: Any) -> None:
    api = EditApi()
    editor("nothing-matches-this", "x")
    out = run(api, "edit", "job", "train")
    assert out.exit_code == 0 and out.stdout.strip() == "edit cancelled, no changes made."
    assert api.puts == []


def test_edit_conflict_writes_nothing_and_keeps_the_edit(editor: Any) -> None:
    api = EditApi()
    api.change_before_put = True
    editor("priority: 0", "priority: 7")
    out = run(api, "edit", "job", "train")
    assert out.exit_code == 1
    assert "job/train was changed by someone else since it was opened (resourceVersion 5); " \
           "nothing was written" in out.stderr
    saved = out.stderr.split("Your edit is saved in ", 1)[1].split(":", 1)[0]
    assert "priority: 7" in Path(saved).read_text()
    assert api.obj["spec"]["priority"] == 0


def test_edit_validation_error_is_named(editor: Any) -> None:
    api = EditApi()
    editor("priority: 0", "priority: -1")
    out = run(api, "edit", "job", "train")
    assert out.exit_code == 1
    assert "error: job/train: invalid job: spec.priority: must be >= 0" in out.stderr
    assert "nothing was written; your edit is saved in" in out.stderr


@pytest.mark.parametrize(("old", "new", "message"), [
    ("name: train", "name: other", "metadata.name cannot be changed by an edit"),
    ("spec:", "spec: [", "the edited text is not valid YAML"),
])
def test_edit_refuses_renames_and_bad_yaml(editor: Any, old: str, new: str,
                                           message: str) -> None:
    api = EditApi()
    editor(old, new)
    out = run(api, "edit", "job", "train")
    assert out.exit_code == 1 and message in out.stderr
    assert api.puts == []
