"""The SkyPilot driver: a ``Provisioner`` and the job-queue calls of the ``skypilot`` manager.

SkyPilot lives in a virtualenv of its own (scripts/install-skypilot.sh: its pins would
downgrade SkyShift's environment) and runs as a dedicated unprivileged user, so that what it
writes (``~/.sky``, ``~/.slurm``, ``.bashrc``, ``.sky_clusters``, ``authorized_keys``) lands in
that user's home and never in the control plane's. The calls run in one long-lived process:
that venv's python running ``runner`` (SkyPilot's SDK: ``sky.launch/status/down/exec/queue/
tail_logs/cancel`` with ``sky.get``/``stream_and_get``) as that user, which imports SkyPilot
once and serves each request in a thread of its own (``process``: one such runner per venv
and user in this process, shared by its clients). Lines SkyPilot streams while a request works
go to that request's ``progress``. SkyPilot starts its API server on the first call, as that
user; :func:`stop_api_server` ends it and what ``sky api stop`` leaves behind.

Every call blocks and is bounded by a timeout (callers use threads). Errors become compat
errors: ``Capacity`` (no room now: retry later or elsewhere), ``Permanent`` (no credentials,
infra disabled, a shape that never fits; SkyPilot's message kept), ``Transient`` (the rest).

Configuration (keyword arguments, else environment, else defaults):
``venv`` / ``SKYSHIFT_SKYPILOT_VENV`` [/opt/skyshift/skypilot/venv], ``user`` /
``SKYSHIFT_SKY_USER`` [skyshift-sky; "" = the current user].

A client holds the shared runner from its first call (or :meth:`SkyPilotClient.hold`) until
:meth:`SkyPilotClient.close`; the runner ends when the last client holding it closes, or when
this process ends (its stdin closes).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyshift.compat.errors import NotFound, Permanent, Transient
from skyshift.compat.provision_types import (
    Capacity,
    LaunchRequest,
    Progress,
    ProvisionedCluster,
    SkyState,
)
from skyshift.compat.skypilot import process
from skyshift.compat.skypilot.errors import classify

DEFAULT_VENV = "/opt/skyshift/skypilot/venv"
DEFAULT_USER = "skyshift-sky"
_RUNNER = Path(__file__).with_name("runner.py")


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class SkyJob:
    """One row of a SkyPilot cluster's job queue."""

    job_id: int
    name: str
    status: str  # SkyPilot's: INIT PENDING SETTING_UP RUNNING SUCCEEDED FAILED... CANCELLED
    submitted_at: float | None = None
    start_at: float | None = None
    end_at: float | None = None
    resources: str = ""
    exit_codes: tuple[int, ...] | None = None


class SkyPilotClient:
    """Provisioner (launch/status/down) plus exec/queue/logs/cancel, over SkyPilot's SDK."""

    def __init__(self, venv: str | None = None, user: str | None = None,
                 call_timeout: float = 180.0) -> None:
        self.venv = Path(venv or os.environ.get("SKYSHIFT_SKYPILOT_VENV") or DEFAULT_VENV)
        self.user = user if user is not None else os.environ.get("SKYSHIFT_SKY_USER",
                                                                 DEFAULT_USER)
        self.call_timeout = call_timeout
        self._held: process.Key | None = None  # the shared runner this client holds
        self._held_lock = threading.Lock()

    def close(self) -> None:
        """Let go of the shared runner; the last client holding it ends it."""
        with self._held_lock:
            key, self._held = self._held, None
        if key is not None:
            process.release(key)

    def hold(self) -> None:
        """Hold the shared runner from now (the first call still starts it) until
        :meth:`close`, best effort: a client built to replace another (a rebuilt manager) keeps
        that one's runner alive when the other closes, instead of the next call importing
        SkyPilot again (3 s and 157 MB here)."""
        try:
            key = self._key(self._account())
        except Permanent:
            return  # the first call says why
        with self._held_lock:
            if self._held is None:
                process.hold(key)
                self._held = key

    def warm(self) -> None:
        """Start the shared runner now if none runs (its SkyPilot import takes seconds), so the
        first call later finds it ready. Best effort: that call reports what stops it."""
        if not self.python.exists():
            return
        try:
            account = self._account()
        except Permanent:
            return
        key = self._key(account)
        with self._held_lock:
            if self._held is None:
                process.hold(key)
                self._held = key
        with contextlib.suppress(OSError):
            process.shared(key, lambda: self._start(account))

    def end_runner(self) -> None:
        """End the runner this client's calls go to, now (whoever holds it); the next call
        starts a new one."""
        process.end_shared(self._key(self._account()))

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    # ---- Provisioner ----------------------------------------------------------------------

    def launch(self, req: LaunchRequest, progress: Progress) -> ProvisionedCluster:
        shape = req.shape
        rows = self.call("launch", {
            "cluster": req.cluster, "infra": req.infra, "nodes": req.nodes,
            "cpus": shape.cpus or None, "memory": shape.memory_gb or None,
            "accelerators": dict(shape.accelerators) or None,
        }, timeout=req.timeout_s, progress=progress, what=f"launch of {req.cluster}")
        found = _cluster(req.cluster, rows)
        if found.state != "UP":
            raise Transient(f"SkyPilot cluster {req.cluster} is {found.state} after launch")
        return found

    def status(self, cluster: str, refresh: bool = False) -> ProvisionedCluster:
        rows = self.call("status", {"clusters": [cluster], "refresh": refresh},
                         what=f"status of {cluster}")
        return _cluster(cluster, rows)

    def down(self, cluster: str, progress: Progress) -> None:
        self.call("down", {"cluster": cluster}, timeout=600, progress=progress,
                  what=f"down of {cluster}")

    def clusters(self, names: list[str], refresh: bool = False) -> list[dict[str, Any]]:
        """Raw status records (per-node cpus/memory/accelerators as SkyPilot launched them)."""
        return list(self.call("status", {"clusters": names, "refresh": refresh},
                              what="status"))

    # ---- job queue ------------------------------------------------------------------------

    def exec_async(self, cluster: str, name: str, run: str, envs: dict[str, str],
                   cpus: float = 0.0, timeout: float | None = None) -> int:
        """Submit ``run`` as a job named ``name`` (does not wait for it); its SkyPilot job id."""
        out = self.call("exec", {"cluster": cluster, "name": name, "run": run, "envs": envs,
                                 "cpus": cpus or None}, timeout=timeout,
                        what=f"exec on {cluster}")
        return int(out["job_id"])

    def queue(self, clusters: list[str],
              timeout: float | None = None) -> dict[str, list[SkyJob] | Exception]:
        """Each cluster's job table, from one runner request (one SkyPilot request per
        cluster, sent together)."""
        out = self.call("queue", {"clusters": clusters}, timeout=timeout, what="queue")
        tables: dict[str, list[SkyJob] | Exception] = {}
        for cluster in clusters:
            got = out.get(cluster) or {}
            if "error" in got:
                tables[cluster] = classify(got["error"], f"queue of {cluster}")
                continue
            tables[cluster] = [SkyJob(
                job_id=int(j["job_id"]), name=str(j.get("job_name") or ""),
                status=str(j.get("status") or ""), submitted_at=j.get("submitted_at"),
                start_at=j.get("start_at"), end_at=j.get("end_at"),
                resources=str(j.get("resources") or ""),
                exit_codes=tuple(j["exit_codes"]) if j.get("exit_codes") else None,
            ) for j in got.get("jobs") or []]
        return tables

    def logs(self, cluster: str, job_id: int, tail: int = 0,
             timeout: float | None = None) -> str:
        out = self.call("logs", {"cluster": cluster, "job_id": job_id, "tail": tail},
                        timeout=timeout, what=f"logs of job {job_id} on {cluster}")
        return str(out.get("text") or "")

    def cancel(self, cluster: str, job_ids: list[int], timeout: float | None = None) -> None:
        if job_ids:
            self.call("cancel", {"cluster": cluster, "job_ids": job_ids}, timeout=timeout,
                      what=f"cancel on {cluster}")

    def check(self, infra: list[str]) -> Any:
        """``sky check`` for these infras (enables them in SkyPilot's state)."""
        return self.call("check", {"infra": infra}, what="check")

    # ---- the runner -----------------------------------------------------------------------

    def _account(self) -> pwd.struct_passwd | None:
        """The SkyPilot user to switch to, or None to run as ourselves."""
        if not self.user:
            return None
        try:
            account = pwd.getpwnam(self.user)
        except KeyError as exc:
            raise Permanent(f"SkyPilot user {self.user!r} does not exist: run "
                            "scripts/install-skypilot.sh") from exc
        if account.pw_uid == os.geteuid():
            return None
        if os.geteuid() != 0:
            raise Permanent(f"running SkyPilot as {self.user} needs root; set "
                            "SKYSHIFT_SKY_USER='' to run it as the current user")
        return account

    def env(self) -> dict[str, str]:
        account = self._account()
        home = account.pw_dir if account else os.path.expanduser("~")
        user = account.pw_name if account else pwd.getpwuid(os.geteuid()).pw_name
        return {
            "HOME": home, "USER": user, "LOGNAME": user,
            "PATH": f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
            "SSL_CERT_FILE": os.environ.get("SSL_CERT_FILE",
                                            "/etc/ssl/certs/ca-certificates.crt"),
            "PYTHONUNBUFFERED": "1",
        }

    def call(self, op: str, args: dict[str, Any], timeout: float | None = None,
             progress: Progress = _quiet, what: str = "") -> Any:
        """Run one runner request; its ``result``, or the compat error its failure maps to."""
        if not self.python.exists():
            raise Permanent(f"SkyPilot is not installed at {self.venv}: run "
                            "scripts/install-skypilot.sh")
        limit = timeout or self.call_timeout
        deadline = time.monotonic() + limit
        label = what or op
        runner, sent = self._send({"op": op, **args}, deadline, label)
        kind, value = runner.wait(sent, deadline, progress)
        if kind == "timeout":
            runner.abandon(sent)
            raise Transient(f"SkyPilot {label} did not answer within {limit:g}s")
        if kind == "gone":
            raise Transient(f"SkyPilot {label} ended without an answer (the runner ended, "
                            f"{value})")
        if "error" in value:
            raise classify(value["error"], label)
        return value.get("result")

    def _send(self, request: dict[str, Any], deadline: float,
              label: str) -> tuple[process.Runner, process.Call]:
        """The request sent to the shared runner (a new one if the last one had ended)."""
        account = self._account()
        key = self._key(account)
        with self._held_lock:
            if self._held is None:
                process.hold(key)
                self._held = key
        why = ""
        for _ in range(2):  # a runner that ended before the request reached it: once more
            try:
                runner = process.shared(key, lambda: self._start(account))
            except OSError as exc:  # no process to run SkyPilot in (fork, user switch)
                raise Transient(f"cannot start SkyPilot's {label}: {exc}") from exc
            try:
                return runner, runner.submit(request, deadline)
            except process.RunnerGone as exc:
                why = str(exc)
        raise Transient(f"SkyPilot {label}: its runner ended before taking it ({why})")

    def _key(self, account: pwd.struct_passwd | None) -> process.Key:
        """Which shared runner serves this client: its venv's python and user."""
        return str(self.python), account.pw_uid if account else -1

    def _start(self, account: pwd.struct_passwd | None) -> process.Runner:
        argv = [str(self.python), "-c", _RUNNER.read_text()]
        if account is not None:
            # setpriv rather than Popen(user=...): changing ids makes Python fork instead of
            # vfork, and a fork of this multi-threaded process runs gRPC's fork handlers, which
            # crashed the child (SIGSEGV) while the etcd client was busy
            argv = [_setpriv(), f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}",
                    "--clear-groups", "--", *argv]
        env = self.env()
        return process.Runner(argv, env, env["HOME"])


def _setpriv() -> str:
    """util-linux's setpriv (Debian: always there), which switches to SkyPilot's user."""
    return shutil.which("setpriv", path=f"{os.defpath}:/usr/bin:/bin") or "setpriv"


def _cluster(name: str, rows: list[dict[str, Any]]) -> ProvisionedCluster:
    for row in rows or []:
        if row.get("name") == name:
            state = str(row.get("status") or "").upper()
            sky_state: SkyState = state if state in ("UP", "INIT", "STOPPED") else "INIT"  # type: ignore[assignment]
            return ProvisionedCluster(
                cluster=name, state=sky_state, infra=str(row.get("infra") or ""),
                nodes=int(row.get("nodes") or 0), head_ip=str(row.get("head_ip") or ""),
                message=f"SkyPilot: {state}")
    return ProvisionedCluster(cluster=name, state="ABSENT")


# ---- the API server and what it leaves ----------------------------------------------------

_LEFTOVER_MARKS = ("subprocess_daemon.py", "ControlMaster", "[mux]", "sky.server.server",
                   "skypilot")


def leftover_pids(user: str) -> list[int]:
    """Processes of SkyPilot's user that SkyPilot started (API server, its daemons, ssh
    ControlMasters): by uid and command line, read from /proc."""
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmd for m in _LEFTOVER_MARKS) or cmd.startswith("ssh "):
            pids.append(int(entry.name))
    return pids


def stop_api_server(client: SkyPilotClient, grace: float = 10.0) -> list[int]:
    """``sky api stop`` as SkyPilot's user, then end (by pid) what it leaves running;
    returns the pids that had to be signalled. For test beds and operators' teardown."""
    with contextlib.suppress(Transient, Permanent, NotFound):
        client.call("api_stop", {}, timeout=60, what="api stop")
    client.end_runner()  # it started the API server; a later call starts a fresh one
    user = client.user or pwd.getpwuid(os.geteuid()).pw_name
    pids = leftover_pids(user)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and
                                                  _alive(p) for p in pids):
            time.sleep(0.1)
    return pids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


__all__ = ["Capacity", "SkyJob", "SkyPilotClient", "leftover_pids", "stop_api_server"]
