"""PostgreSQL (Debian's ``postgresql`` package) as the store of the Temporal server of
``skyshift up --ha``, and of the Temporal-server test (tests/fixtures/postgres.py).

The server is the newest ``/usr/lib/postgresql/<n>/bin/postgres``, listening on 127.0.0.1 only (no
Unix socket), with password authentication (scram-sha-256) for its one user, ``temporal``, whose
random password is ``$SKYSHIFT_HOME/auth/postgres-password`` (0600). PostgreSQL refuses to run as
root: as root it runs as the ``postgres`` user, and since that user cannot reach a home under
``/root`` its data directory then lives in ``/var/lib/skyshift/postgres/<hash of the home>``,
linked from ``$SKYSHIFT_HOME/postgres/data`` (as an ordinary user the directory itself).

Once the server accepts connections Temporal's two databases are created and migrated with
``temporal-sql-tool`` (built beside temporal-server by scripts/build-temporal.sh), as an operator
does; each step tolerates what an earlier run already did, so a second ``up`` reuses the data.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyshift.config import auth_dir
from skyshift.devstack import procs
from skyshift.devstack.components import Component, ProcessHealth
from skyshift.devstack.errors import StackError
from skyshift.devstack.etcd_auth import ensure_secret

OS_USER = "postgres"  # who runs the server when we are root
DB_USER = "temporal"
HOST = "127.0.0.1"
#: Temporal's databases: (name, the schema directory of temporal-sql-tool)
DATABASES = (("temporal", "temporal"), ("temporal_visibility", "visibility"))
VAR_BASE = Path("/var/lib/skyshift/postgres")
INSTALL = "`apt-get install postgresql`"


@dataclass(frozen=True)
class Server:
    """Where a PostgreSQL server listens and who logs in."""

    port: int
    password: str
    user: str = DB_USER
    host: str = HOST


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/<n>/bin)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else None


def require_bin_dir() -> Path:
    found = bin_dir()
    if found is None:
        raise StackError(f"PostgreSQL is not installed: {INSTALL} (Temporal's store under --ha), "
                         "or run Temporal on SQLite with `--temporal-db sqlite`")  # fmt: skip
    return found


def as_user() -> list[str]:
    """The prefix that runs a command as the ``postgres`` user when we are root: setpriv execs
    it (runuser would fork), so the stack's pid is the server's and a signal to it reaches it."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={OS_USER}", f"--regid={OS_USER}", "--init-groups", "--"]


def password_file(home: Path) -> Path:
    return auth_dir(home) / "postgres-password"


def password(home: Path) -> str:
    """The ``temporal`` user's password, generated (0600) on the first call."""
    return ensure_secret(password_file(home), "PostgreSQL password")


def data_dir(home: Path) -> Path:
    """Where the server's data is, as seen from the home (a link to it as root)."""
    return home / "postgres" / "data"


def real_data_dir(home: Path) -> Path:
    """Where the server's data really is (outside the home as root)."""
    if os.geteuid() != 0:
        return data_dir(home)
    digest = hashlib.sha256(str(home.absolute()).encode()).hexdigest()[:10]
    return VAR_BASE / digest / "data"


def prepare(home: Path) -> Path:
    """The data directory, made (owned by the server's user) and linked from the home; returns
    its real path."""
    real = real_data_dir(home)
    link = data_dir(home)
    link.parent.mkdir(parents=True, exist_ok=True)
    if real != link:
        for d in reversed(real.parents[:-1]):  # /var/lib/skyshift/...: reachable, not listable
            if not d.exists():
                d.mkdir(mode=0o711)
        if not link.is_symlink() or link.resolve() != real:
            link.unlink(missing_ok=True)
            link.symlink_to(real)
    real.mkdir(mode=0o700, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(real, OS_USER, OS_USER)
    _remove_stale_lock(real)
    return real


def _remove_stale_lock(data: Path) -> None:
    """``postmaster.pid`` of a server that died unreaped (a zombie still holds its pid, and
    PostgreSQL would refuse to start beside it); a running server's is kept."""
    lock = data / "postmaster.pid"
    try:
        first = lock.read_text().split("\n", 1)[0].strip()
    except OSError:
        return
    if first.isdigit() and not procs.alive(int(first)):
        lock.unlink(missing_ok=True)


def init_cluster(bins: Path, data: Path, secret: str) -> bool:
    """``initdb`` in ``data`` (owned by the server's user) unless it holds a cluster already,
    with ``DB_USER`` as its superuser logging in by ``secret``; whether it ran."""
    if (data / "PG_VERSION").exists():
        return False
    pwfile = data.parent / ".initdb-password"
    pwfile.unlink(missing_ok=True)
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret + "\n")
    try:
        if os.geteuid() == 0:
            shutil.chown(pwfile, OS_USER, OS_USER)
        argv = [*as_user(), str(bins / "initdb"), "-D", str(data), "-U", DB_USER,
                "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    finally:
        pwfile.unlink(missing_ok=True)
    if done.returncode != 0:
        raise StackError(f"initdb {data} failed: {done.stderr.strip()[-1500:]}")
    return True


def server_argv(bins: Path, data: Path, port: int, *settings: str) -> list[str]:
    """The server in the foreground on ``HOST:port``, TCP only; ``settings``: more ``-c``s."""
    argv = [*as_user(), str(bins / "postgres"), "-D", str(data), "-p", str(port),
            "-c", f"listen_addresses={HOST}", "-c", "unix_socket_directories="]  # fmt: skip
    for setting in settings:
        argv += ["-c", setting]
    return argv


def wait_ready(bins: Path, port: int, timeout: float = 60.0) -> None:
    """Until the server on ``port`` accepts connections (``pg_isready``)."""
    deadline = time.monotonic() + timeout
    while True:
        ready = subprocess.run([str(bins / "pg_isready"), "-h", HOST, "-p", str(port)],
                               capture_output=True, text=True, check=False)  # fmt: skip
        if ready.returncode == 0:
            return
        if time.monotonic() >= deadline:
            raise StackError(f"PostgreSQL on {HOST}:{port} did not accept connections after "
                             f"{timeout:.0f}s: {ready.stdout.strip()}")  # fmt: skip
        time.sleep(0.3)


def _sql_tool(tool_dir: Path, server: Server, database: str, step: list[str]) -> str:
    """``temporal-sql-tool`` for one step on ``database``; its error ("" when it worked)."""
    argv = [str(tool_dir / "temporal-sql-tool"), "--plugin", "postgres12", "--ep", server.host,
            "-p", str(server.port), "-u", server.user, "--db", database, *step]  # fmt: skip
    # the password in the environment: an argument would show in `ps`
    env = {**os.environ, "SQL_PASSWORD": server.password}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    return "" if done.returncode == 0 else (done.stderr + done.stdout).strip()


def setup_schema(tool_dir: Path, server: Server) -> dict[str, dict[str, Any]]:
    """Create Temporal's two databases and migrate them to the schema of ``tool_dir``'s
    temporal-sql-tool, keeping what is there; the datastores of the server's config."""
    schema = tool_dir.parent / "schema" / "postgresql" / "v12"
    for database, kind in DATABASES:
        steps = (
            ["create-database"],
            ["setup-schema", "-v", "0.0"],
            ["update-schema", "-d", str(schema / kind / "versioned")],
        )
        for step in steps:
            error = _sql_tool(tool_dir, server, database, step)
            if error and "already exists" not in error:
                raise StackError(f"temporal-sql-tool {step[0]} ({database}): {error[-1500:]}")
    return temporal_stores(server)


def sql_store(server: Server, database: str) -> dict[str, Any]:
    """A datastore of the Temporal server's config in ``database`` (plugin postgres12)."""
    return {
        "sql": {
            "pluginName": "postgres12",
            "databaseName": database,
            "connectAddr": f"{server.host}:{server.port}",
            "connectProtocol": "tcp",
            "user": server.user,
            "password": server.password,
            "maxConns": 20,
            "maxIdleConns": 20,
            "maxConnLifetime": "1h",
        }
    }


def temporal_stores(server: Server) -> dict[str, dict[str, Any]]:
    """The ``default`` and ``visibility`` datastores of the Temporal server's config."""
    return {
        "default": sql_store(server, DATABASES[0][0]),
        "visibility": sql_store(server, DATABASES[1][0]),
    }


def postgres_component(home: Path, port: int, tool_dir: Path | None) -> Component:
    """The server on ``port``; ``tool_dir`` (temporal-sql-tool's) None when not resolving
    (``status``, ``down``), else its data directory is made (``initdb`` the first time) and, once
    it runs, Temporal's databases are created and migrated."""
    bins = require_bin_dir() if tool_dir is not None else (bin_dir() or Path("postgres"))
    real = real_data_dir(home)
    if tool_dir is not None:
        init_cluster(bins, prepare(home), password(home))

    def databases() -> str:
        assert tool_dir is not None
        wait_ready(bins, port)
        setup_schema(tool_dir, Server(port, password(home)))
        names = " and ".join(name for name, _ in DATABASES)
        return f"postgres: databases {names} at the schema of {tool_dir / 'temporal-sql-tool'}"

    return Component(
        name="postgres",
        title="PostgreSQL (Temporal's store)",
        argv=server_argv(bins, real, port),
        env={},
        health=ProcessHealth(),
        address=f"{HOST}:{port} (user {DB_USER}, password in {password_file(home)})",
        listens={"PostgreSQL": port},
        timeout=60.0,
        home=home,
        # --purge: the data (outside the home as root) and the link to it
        data_dirs=[data_dir(home).parent, *([real.parent] if real != data_dir(home) else [])],
        on_healthy=databases if tool_dir is not None else None,
    )
