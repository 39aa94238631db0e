"""Auth end to end: ``python -m skyshift.api`` as its own process (with and without TLS) and the
``skyctl`` console script as users run it: login, invites, register, contexts, users, audit."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.fixtures.auth import admin_password, free_port
from tests.fixtures.etcd import EtcdServer

pytestmark = pytest.mark.integration


def self_signed(where: Path) -> tuple[Path, Path]:
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class Skyctl:
    def __init__(self, home: Path, server: str, **env: str) -> None:
        path = shutil.which("skyctl")
        assert path, "the skyctl console script is not installed"
        self.path, self.home = path, home
        home.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "SKYSHIFT_HOME": str(home), "SKYSHIFT_SERVER": server, **env}
        for var in ("SKYSHIFT_TOKEN", "SKYSHIFT_DEBUG"):
            self.env.pop(var, None)

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.path, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
        return proc

    def ok(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        proc = self(*args, stdin=stdin)
        assert proc.returncode == 0, f"skyctl {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return proc

    def contexts(self) -> dict[str, dict[str, str]]:
        cfg = yaml.safe_load((self.home / "config.yaml").read_text())
        return {c["name"]: c for c in cfg["contexts"]}


def test_python_m_requires_tokens_and_serves_tls(start_api: object, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert))
    server = start_api(  # type: ignore[operator]
        "https", verify=trust, SKYSHIFT_API_TLS_CERT=str(cert), SKYSHIFT_API_TLS_KEY=str(key)
    )
    with httpx.Client(base_url=server.url, verify=trust, timeout=10) as http:
        assert http.get("/default/jobs").status_code == 401
        password = admin_password(server.home)
        token = http.post("/token", data={"username": "admin", "password": password})
        assert token.status_code == 200
        auth = {"Authorization": f"Bearer {token.json()['access_token']}"}
        assert http.get("/default/jobs", headers=auth).status_code == 200
    plain = server.url.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{plain}/healthz", timeout=3)  # HTTPS only
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{server.url}/healthz", timeout=3)  # an unknown CA is refused by default

    # skyctl over TLS: the CA comes from SSL_CERT_FILE (httpx honours it)
    skyctl = Skyctl(tmp_path / "cli", server.url, SSL_CERT_FILE=str(cert))
    skyctl.ok("login", "admin", "--password-stdin", stdin=password + "\n")
    assert "No jobs found" in skyctl.ok("get", "jobs").stderr


def test_half_a_tls_pair_is_refused(etcd_server: EtcdServer, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SKYSHIFT_HOME": str(tmp_path),
        "SKYSHIFT_ETCD": etcd_server.endpoint,
        "SKYSHIFT_API_PORT": str(free_port()),
        "SKYSHIFT_API_TLS_CERT": str(tmp_path / "c"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "skyshift.api"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "SKYSHIFT_API_TLS_CERT and SKYSHIFT_API_TLS_KEY" in proc.stderr


def test_skyctl_accounts_end_to_end(start_api: object, tmp_path: Path) -> None:
    server = start_api()  # type: ignore[operator]
    admin_pw = admin_password(server.home)
    skyctl = Skyctl(tmp_path / "cli", server.url)

    nologin = skyctl("get", "jobs")
    assert nologin.returncode == 1
    assert nologin.stderr.strip() == "error: not logged in or token expired: run `skyctl login`"
    wrong = skyctl("login", "admin", "not-the-password")
    assert wrong.returncode == 1 and "invalid username or password" in wrong.stderr

    out = skyctl.ok("login", "admin", "--password-stdin", stdin=admin_pw + "\n").stdout
    assert out.startswith("Logged in as admin (context 'local', token valid until ")
    skyctl.ok("create", "namespace", "ml")
    skyctl.ok("create", "job", "train", "--run", "echo hi")

    secret = skyctl.ok("invite", "--role", "reader").stdout.strip()
    assert len(secret) > 30
    reg = skyctl.ok(
        "register",
        "bob",
        "--invite",
        secret,
        "--email",
        "bob@example.com",
        "--password-stdin",
        stdin="bobs-password\n",
    )
    assert "Registered bob (reader)" in reg.stdout
    again = skyctl("register", "bob2", "s3cret-pass", "--invite", secret)
    assert again.returncode == 1 and "invalid invite" in again.stderr

    # bob logs in into a context of his own (the current one belongs to admin)
    skyctl.ok("login", "bob", "bobs-password", "-n", "ml")
    ctxs = skyctl.contexts()
    assert ctxs["bob"]["user"] == "bob" and ctxs["bob"]["namespace"] == "ml"
    assert ctxs["local"]["user"] == "admin" and ctxs["local"]["token"] != ctxs["bob"]["token"]
    assert "train" in skyctl.ok("get", "jobs", "-n", "default").stdout
    denied = skyctl("create", "job", "nope", "--run", "true")
    assert denied.returncode == 1
    assert "forbidden: user bob may not create jobs in namespace ml" in denied.stderr
    users = skyctl.ok("get", "users").stdout.split()
    assert "bob" in users and "admin" not in users  # bob sees only himself
    assert "bob@example.com" in skyctl.ok("get", "user", "bob", "-o", "yaml").stdout
    assert "bob" in skyctl.ok("describe", "user", "bob").stdout
    assert skyctl("audit").returncode == 1

    # admin again, in a named context per user and namespace
    skyctl.ok("config", "use-context", "local")
    table = skyctl.ok("get", "users").stdout
    assert "admin" in table and "bob@example.com" in table and "reader" in table
    token = json.loads(skyctl.ok("invite", "--json").stdout)["invite"]
    skyctl.ok("revoke_invite", token)
    assert skyctl("register", "carl", "carls-password", "--invite", token).returncode == 1
    audit = skyctl.ok("audit").stdout
    assert "register" in audit and "bob" in audit and "denied" in audit
    assert "bob" in skyctl.ok("audit", "--user", "bob", "-o", "json").stdout

    skyctl.ok("delete", "user", "bob")
    skyctl.ok("config", "use-context", "bob")
    gone = skyctl("get", "jobs")
    assert gone.stderr.strip() == "error: not logged in or token expired: run `skyctl login`"

    skyctl.ok("config", "use-context", "local")
    skyctl.ok("logout")
    assert skyctl("get", "jobs").returncode == 1
    env_token = {"SKYSHIFT_TOKEN": ctxs["local"]["token"]}
    with_env = subprocess.run(
        [skyctl.path, "get", "jobs"],
        env={**skyctl.env, **env_token},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert with_env.returncode == 0 and "train" in with_env.stdout  # SKYSHIFT_TOKEN overrides

    log = server.log.read_text()
    for secret_text in (admin_pw, "bobs-password", "not-the-password", "carls-password"):
        assert secret_text not in log
    assert "POST /token" in log  # the access log is there, without bodies
