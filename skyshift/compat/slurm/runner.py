"""How the Slurm adapter runs commands: on this machine, or on a login node over SSH.

Both runners take an argv, optional stdin and a timeout and return exit status, stdout and
stderr, so the adapter issues the very same commands either way. They raise only compat errors
for failures of the transport itself (binary missing, SSH authentication, unreachable host,
timeout); a Slurm command that ran and failed comes back as a non-zero result for the adapter to
classify.

SSH is key-based and never prompts (``BatchMode=yes``). One master connection is shared by all
commands of an adapter (``ControlMaster``/``ControlPersist``, socket in a private temp dir), so a
poll costs a round trip rather than a handshake; ``close()`` ends it. ``SLURM_CONF`` is set on the
remote side by prefixing ``env SLURM_CONF=...``.

The local runner hands Slurm a trimmed environment (PATH, HOME, locale and the like plus
``SLURM_CONF``): ``sbatch`` exports the submitter's environment to the job by default and the
worker's own variables (which may hold credentials) must not leak into replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from skyshift.compat.errors import Permanent, Transient

_PASSTHROUGH = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE",
                "TZ", "TMPDIR")


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str


async def _run(argv: list[str], stdin: bytes | None, timeout: float,
               env: dict[str, str] | None) -> Result:
    child = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(child.communicate(stdin), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, 9)
        await child.wait()
        raise
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, 9)
        raise
    return Result(child.returncode if child.returncode is not None else -1,
                  out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace"))


class LocalRunner:
    """Slurm commands on this machine."""

    where = "this machine"

    def __init__(self, cluster: str, slurm_conf: str | None) -> None:
        self.cluster = cluster
        self.slurm_conf = slurm_conf

    def _env(self) -> dict[str, str]:
        env = {k: v for k in _PASSTHROUGH if (v := os.environ.get(k)) is not None}
        env.setdefault("PATH", os.defpath)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        elif "SLURM_CONF" in os.environ:
            env["SLURM_CONF"] = os.environ["SLURM_CONF"]
        return env

    async def run(self, argv: list[str], stdin: bytes | None = None,
                  timeout: float = 60.0) -> Result:
        try:
            return await _run(argv, stdin, timeout, self._env())
        except FileNotFoundError as exc:
            raise Permanent(
                f"cluster {self.cluster}: `{argv[0]}` not found on this machine "
                f"(install the Slurm client commands, e.g. scripts/install-slurm.sh)"
            ) from exc
        except TimeoutError as exc:
            raise Transient(
                f"cluster {self.cluster}: `{argv[0]}` timed out after {timeout:g}s"
            ) from exc
        except OSError as exc:
            raise Transient(f"cluster {self.cluster}: cannot run `{argv[0]}`: {exc}") from exc

    async def close(self) -> None:
        return None


_SSH_AUTH = ("permission denied", "host key verification failed", "no such identity",
             "load key", "invalid format", "bad permissions", "too many authentication failures",
             "could not resolve hostname", "bad configuration option", "unprotected private key")


class SshRunner:
    """Slurm commands on a login node, through ``ssh -o BatchMode=yes``."""

    def __init__(self, cluster: str, slurm_conf: str | None, host: str, username: str | None,
                 key_path: str | None, port: int = 22, known_hosts: str | None = None,
                 strict_host_key_checking: str = "accept-new", connect_timeout: int = 10) -> None:
        self.cluster = cluster
        self.slurm_conf = slurm_conf
        self.host = host
        self.username = username
        self.key_path = key_path
        self.port = port
        self.known_hosts = known_hosts
        self.strict = strict_host_key_checking
        self.connect_timeout = connect_timeout
        self._control_dir: str | None = None

    @property
    def where(self) -> str:
        return f"{self.username + '@' if self.username else ''}{self.host}:{self.port}"

    def check_config(self) -> None:
        if shutil.which("ssh") is None:
            raise Permanent(f"cluster {self.cluster}: the `ssh` client is not installed")
        if self.key_path and not Path(self.key_path).expanduser().is_file():
            raise Permanent(
                f"cluster {self.cluster}: ssh_key_path {self.key_path} is not a readable file"
            )

    def _ssh_argv(self) -> list[str]:
        if self._control_dir is None:
            self._control_dir = tempfile.mkdtemp(prefix="skyshift-ssh-")
        argv = [
            "ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout}",
            "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3",
            "-o", f"StrictHostKeyChecking={self.strict}",
            "-o", "ControlMaster=auto", "-o", f"ControlPath={self._control_dir}/%C",
            "-o", "ControlPersist=120", "-o", "LogLevel=ERROR", "-p", str(self.port),
        ]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.key_path:
            argv += ["-i", str(Path(self.key_path).expanduser()), "-o", "IdentitiesOnly=yes"]
        if self.username:
            argv += ["-l", self.username]
        return argv

    async def run(self, argv: list[str], stdin: bytes | None = None,
                  timeout: float = 60.0) -> Result:
        remote = shlex.join(argv)
        if self.slurm_conf:
            remote = f"env SLURM_CONF={shlex.quote(self.slurm_conf)} {remote}"
        try:
            result = await _run([*self._ssh_argv(), self.host, "--", remote], stdin, timeout,
                                None)
        except FileNotFoundError as exc:
            raise Permanent(f"cluster {self.cluster}: the `ssh` client is not installed") from exc
        except TimeoutError as exc:
            raise Transient(
                f"cluster {self.cluster}: `{argv[0]}` over ssh to {self.where} timed out "
                f"after {timeout:g}s"
            ) from exc
        except OSError as exc:
            raise Transient(f"cluster {self.cluster}: cannot run ssh: {exc}") from exc
        if result.rc == 255:  # ssh's own failure (a remote command's 255 is rare; see stderr)
            low = result.stderr.lower()
            text = result.stderr.strip()[:300] or "exit status 255"
            if any(p in low for p in _SSH_AUTH):
                raise Permanent(
                    f"cluster {self.cluster}: ssh to {self.where} failed: {text} "
                    f"(check host, username, port and ssh_key_path)"
                )
            if "ssh:" in low or "connection" in low or "kex_exchange" in low or not low:
                raise Transient(f"cluster {self.cluster}: ssh to {self.where} failed: {text}")
        return result

    async def close(self) -> None:
        control, self._control_dir = self._control_dir, None
        if control is None:
            return
        with contextlib.suppress(OSError, TimeoutError):
            await _run([*self._ssh_argv_for(control), "-O", "exit", self.host], None, 10.0,
                       None)
        shutil.rmtree(control, ignore_errors=True)

    def _ssh_argv_for(self, control: str) -> list[str]:
        saved, self._control_dir = self._control_dir, control
        try:
            return self._ssh_argv()
        finally:
            self._control_dir = saved
