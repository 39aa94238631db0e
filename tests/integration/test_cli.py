"""``skyctl`` end to end: the console script as a subprocess against a live API server.

The API runs as its own process (``python -m skyshift.api``) on the session's real etcd, with
lifecycles off (no Temporal needed), under a key prefix of its own. Assertions are on what a
user sees: stdout, stderr and exit codes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.fixtures.auth import admin_token
from tests.fixtures.etcd import EtcdServer

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"API server exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"API server not ready after {timeout}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def cli_api(
    etcd_server: EtcdServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """A real uvicorn API process on a free port, its own store prefix, no lifecycle plane;
    yields its URL and an admin token (auth is on, as in production)."""
    port = free_port()
    log = tmp_path_factory.mktemp("cli-api") / "api.log"
    home = tmp_path_factory.mktemp("cli-api-home")
    env = {
        **os.environ,
        "SKYSHIFT_HOME": str(home),
        "SKYSHIFT_ETCD": etcd_server.endpoint,
        "SKYSHIFT_API_HOST": "127.0.0.1",
        "SKYSHIFT_API_PORT": str(port),
        "SKYSHIFT_LIFECYCLE": "off",
        "SKYSHIFT_STORE_PREFIX": f"/cli-{uuid.uuid4().hex[:8]}",
        "SKYSHIFT_LOG_LEVEL": "WARNING",
    }
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "skyshift.api"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log)
        yield url, admin_token(url, home)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[list[str]]:
        return [ln.split() for ln in self.out.splitlines() if ln.strip()]


class Skyctl:
    """Runs the installed ``skyctl`` console script with an isolated home and a server."""

    def __init__(self, server: str, home: Path) -> None:
        path = shutil.which("skyctl")
        assert path, "the skyctl console script is not installed (pip install -e .)"
        self.path = path
        self.home = home
        self.env = {**os.environ, "SKYSHIFT_HOME": str(home), "SKYSHIFT_SERVER": server}
        self.env.pop("SKYSHIFT_DEBUG", None)

    def __call__(self, *args: str, stdin: str | None = None, timeout: float = 30) -> Run:
        proc = subprocess.run([self.path, *args], input=stdin, capture_output=True, text=True,
                              env=self.env, cwd=self.home, timeout=timeout, check=False)
        for stream in (proc.stdout, proc.stderr):
            assert "Traceback" not in stream, stream
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, stdin: str | None = None) -> Run:
        run = self(*args, stdin=stdin)
        assert run.code == 0, f"skyctl {' '.join(args)} -> {run.code}\n{run.out}\n{run.err}"
        return run


@pytest.fixture(scope="module")
def api_url(cli_api: tuple[str, str]) -> str:
    return cli_api[0]


@pytest.fixture
def skyctl(cli_api: tuple[str, str], tmp_path: Path) -> Skyctl:
    home = tmp_path / "home"
    home.mkdir()
    run = Skyctl(cli_api[0], home)
    run.env["SKYSHIFT_TOKEN"] = cli_api[1]
    return run


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_job_create_get_describe_delete(skyctl: Skyctl) -> None:
    name = uniq("train")
    created = skyctl.ok("create", "job", name, "--run", "python train.py", "--cpus", "500m",
                        "--memory", "1024", "-l", "team", "ml", "-e", "EPOCHS", "3",
                        "--replicas", "2", "--restart_policy", "OnFailure")
    assert created.out == f"job/{name} created\n"

    table = skyctl.ok("get", "jobs")
    assert table.lines[0] == ["NAME", "CLUSTER", "REPLICAS", "RESOURCES", "NAMESPACE",
                              "STATUS", "AGE"]
    row = next(ln for ln in table.lines if ln[0] == name)
    assert row[1:5] == ["-", "0/2", "cpus:", "0.5"] and "Pending" in row

    obj = json.loads(skyctl.ok("get", "job", name, "-o", "json").out)
    assert obj["metadata"]["labels"] == {"team": "ml"}
    assert obj["spec"]["envs"] == {"EPOCHS": "3"}
    assert obj["spec"]["restartPolicy"] == "OnFailure"
    assert obj["spec"]["resources"]["cpus"] == 0.5
    listed = yaml.safe_load(skyctl.ok("get", "jobs", "-o", "yaml").out)
    assert listed["kind"] == "JobList"
    assert name in [i["metadata"]["name"] for i in listed["items"]]

    described = skyctl.ok("describe", "job", name).out
    assert f"Name:             {name}" in described
    assert "run: python train.py" in described and "phase: Pending" in described

    again = skyctl("create", "job", name)
    assert again.code == 1
    assert again.err == f"error: Job {name} already exists in namespace default (AlreadyExists)\n"

    assert skyctl.ok("delete", "job", name).out in (f"job/{name} deleted\n",
                                                    f"job/{name} deleting\n")
    gone = skyctl("get", "job", name)
    assert gone.code == 1 and "not found" in gone.err and len(gone.err.splitlines()) == 1


def test_cluster_create_get_describe_delete(skyctl: Skyctl) -> None:
    name = uniq("local")
    skyctl.ok("create", "cluster", name, "--manager", "local", "-l", "zone", "a",
              "--cpus", "4", "--memory", "8")
    table = skyctl.ok("get", "clusters")
    assert table.lines[0] == ["NAME", "MANAGER", "LABELS", "RESOURCES", "(USED/TOTAL)", "STATUS",
                              "AGE"]
    row = next(ln for ln in table.lines if ln[0] == name)
    assert row[1:3] == ["local", "zone=a"] and "Init" in row
    wide = skyctl.ok("get", "cl", name, "-o", "wide")
    assert wide.lines[0][-4:] == ["CLOUD", "REGION", "NODES", "MESSAGE"]
    obj = yaml.safe_load(skyctl.ok("get", "cluster", name, "-o", "yaml").out)
    assert obj["spec"]["memory"] == 8000 and obj["metadata"].get("namespace") is None
    described = skyctl.ok("describe", "clusters", name).out
    assert "Kind:             Cluster" in described and "Namespace:" not in described
    assert skyctl.ok("delete", "cluster", name).out.startswith(f"cluster/{name} delet")
    assert name not in skyctl.ok("get", "clusters").out


MULTI_DOC = """\
kind: Namespace
metadata: {{name: {ns}}}
---
kind: Job
metadata: {{name: {job}, namespace: {ns}, labels: {{app: web}}}}
spec: {{run: "serve", replicas: 2}}
---
kind: Job
metadata: {{name: {job}}}
spec: {{run: "serve"}}
---
kind: svc
metadata: {{name: {job}, namespace: {ns}}}
spec:
  type: ClusterIP
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080}}]
---
kind: FilterPolicy
metadata: {{name: {job}, namespace: {ns}}}
spec: {{clusterFilter: {{include: [a]}}, labelsSelector: {{app: web}}}}
"""


def test_apply_multi_doc_then_get_all_namespaces(skyctl: Skyctl, tmp_path: Path) -> None:
    ns, job = uniq("team"), uniq("web")
    path = tmp_path / "app.yaml"
    path.write_text(MULTI_DOC.format(ns=ns, job=job))
    first = skyctl.ok("apply", "-f", str(path))
    assert first.out.splitlines() == [
        f"namespace/{ns} created", f"job/{job} created", f"job/{job} created",
        f"service/{job} created", f"filterpolicy/{job} created",
    ]
    second = skyctl.ok("apply", "-f", str(path)).out.splitlines()
    assert len(second) == 5 and all(ln.endswith(" unchanged") for ln in second)
    path.write_text(MULTI_DOC.format(ns=ns, job=job).replace("replicas: 2", "replicas: 5"))
    third = skyctl.ok("apply", "-f", str(path)).out.splitlines()
    assert third[1] == f"job/{job} configured" and third[2] == f"job/{job} unchanged"

    everywhere = skyctl.ok("get", "jobs", "-A")
    rows = [ln for ln in everywhere.lines if ln[0] == job]
    # columns: NAME CLUSTER REPLICAS RESOURCES("cpus: 1") NAMESPACE STATUS AGE
    assert sorted(r[5] for r in rows) == sorted(["default", ns])
    assert next(r for r in rows if r[5] == ns)[2] == "0/5"
    only_ns = skyctl.ok("get", "jobs", "-n", ns, "-l", "app=web", "-o", "name")
    assert only_ns.out == f"job/{job}\n"
    svc = skyctl.ok("get", "svc", "-n", ns)
    assert svc.lines[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORTS", "CLUSTER",
                            "STATUS", "NAMESPACE", "AGE"]
    assert svc.lines[1][:5] == [job, "ClusterIP", "<none>", "<none>", "80:8080/TCP"]
    assert skyctl.ok("get", "fp", "-n", ns).lines[1][:3] == [job, "a", "<none>"]

    piped = skyctl.ok("apply", "-f", "-", stdin=f"kind: Job\nmetadata: {{name: {job}}}\n"
                      "spec: {run: serve}\n")
    assert piped.out == f"job/{job} unchanged\n"


def test_bad_flag_value_is_one_line_and_nonzero(skyctl: Skyctl) -> None:
    bad = skyctl("create", "job", uniq("x"), "--restart_policy", "Sometimes")
    assert bad.code == 2
    assert bad.err.strip().splitlines() == [
        "error: invalid restart policy 'Sometimes': expected Always, OnFailure or Never"
    ]
    bad = skyctl("create", "job", uniq("x"), "--memory", "lots")
    assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1
    assert bad.err.startswith("error: invalid job: spec.resources.memory")
    bad = skyctl("get", "gizmos")
    assert bad.code == 2 and "unknown kind 'gizmos'" in bad.err
    bad = skyctl("create", "job", uniq("x"), "--replicas", "many")
    assert bad.code == 2 and "Usage: skyctl create job" in bad.err


def test_server_down_gives_a_clear_message(skyctl: Skyctl) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    run = skyctl("--server", down, "get", "jobs")
    assert run.code == 1
    lines = run.err.strip().splitlines()
    assert len(lines) == 1
    assert down in lines[0] and "skyshift up" in lines[0] and "--server" in lines[0]


def test_watch_prints_events_as_they_happen(skyctl: Skyctl) -> None:
    name = uniq("watched")
    proc = subprocess.Popen(
        [skyctl.path, "get", "jobs", "--watch", "--output-watch-events", "--watch-timeout", "20"],
        env=skyctl.env, cwd=skyctl.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        header = proc.stdout.readline()
        assert header.split()[:2] == ["EVENT", "NAME"]
        skyctl.ok("create", "job", name, "--run", "x")
        skyctl.ok("delete", "job", name)
        seen: list[list[str]] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(s[:2] == ["DELETED", name] for s in seen):
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line.split())
        events = [s[0] for s in seen if len(s) > 1 and s[1] == name]
        assert events[0] == "ADDED" and events[-1] == "DELETED", seen
    finally:
        proc.terminate()
        proc.wait(10)
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


def test_watch_json_stream_and_timeout(skyctl: Skyctl) -> None:
    name = uniq("j")
    skyctl.ok("create", "job", name)
    started = time.monotonic()
    run = skyctl("get", "job", name, "-w", "-o", "json", "--watch-timeout", "2", timeout=20)
    assert run.code == 0 and time.monotonic() - started < 15
    first = json.loads(run.out.splitlines()[0])
    assert first["type"] == "ADDED" and first["object"]["metadata"]["name"] == name


def test_other_kinds_and_status(skyctl: Skyctl) -> None:
    a, b = uniq("ca"), uniq("cb")
    skyctl.ok("create", "cluster", a, "--manager", "local")
    skyctl.ok("create", "cluster", b, "--manager", "local")
    link = uniq("l")
    skyctl.ok("create", "link", link, "-s", a, "-t", b)
    assert skyctl.ok("get", "links").lines[0] == ["NAME", "SOURCE", "TARGET", "STATUS", "AGE"]
    edp = uniq("e")
    skyctl.ok("create", "endpoints", edp, "--num_endpoints", "2", "--exposed",
              "--primary_cluster", a, "--selector", "app", "web")
    assert f"{a}: 2 (exposed)" in skyctl.ok("get", "edp", edp).out
    role = uniq("r")
    skyctl.ok("create", "role", role, "-a", "get", "-a", "list", "-r", "jobs", "-u", "alice")
    assert "get,list on jobs" in skyctl.ok("get", "role", role).out
    status = skyctl.ok("status").out
    assert "Merged-Cluster" in status and a in status and "Active jobs" in status
    for kind, name in (("link", link), ("endpoints", edp), ("role", role), ("cluster", a),
                       ("cluster", b)):
        assert skyctl.ok("delete", kind, name).out.startswith(f"{kind}/{name} delet")


def test_contexts_select_the_server(skyctl: Skyctl, api_url: str) -> None:
    env = dict(skyctl.env)
    env.pop("SKYSHIFT_SERVER")
    skyctl.env = env
    skyctl.ok("config", "set-context", "live", "--server", api_url, "--use")
    assert skyctl.ok("version").out.splitlines()[1] == f"Server: {api_url} (healthy)"
    skyctl.ok("config", "set-context", "dead", "--server", f"http://127.0.0.1:{free_port()}")
    assert skyctl("--context", "dead", "get", "jobs").code == 1
    assert skyctl.ok("--context", "live", "get", "ns").lines[0] == ["NAME", "STATUS", "AGE"]


def test_filter_policy_naming_a_missing_cluster_is_created_with_a_warning(skyctl: Skyctl) -> None:
    """The original accepted it silently and every job of the namespace then waited; the API
    now answers with a Warning header and skyctl shows it."""
    name = uniq("fp")
    missing = uniq("nosuch")
    run = skyctl.ok("create", "fp", name, "-i", missing)
    assert run.out == f"filterpolicy/{name} created\n"
    assert run.err.startswith("warning: ") and missing in run.err and "does not exist" in run.err
    # the warning tells the truth: with no included cluster existing, the jobs all wait
    assert "every job it selects stays Pending until one is created" in run.err
    described = skyctl.ok("describe", "fp", name).out
    assert f"include names clusters that do not exist: {missing}" in described
    assert "every job this policy selects stays Pending" in described
    link = skyctl("create", "link", uniq("l"), "--source", missing, "--target", uniq("other"))
    assert link.code == 1 and missing in link.err and "Traceback" not in link.err
