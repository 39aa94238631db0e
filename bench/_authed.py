"""An etcd + API server pair for benchmarks, with auth on and an admin token.

The API server always requires a bearer token. ``api_stack()`` starts etcd and
``python -m skyshift.api`` (lifecycle hooks off) in a temporary SKYSHIFT_HOME on free loopback
ports, logs in as the generated admin and yields ``(url, token)``.

Run as a script, it runs a benchmark written before auth existed against such a server:
``python bench/_authed.py bench/api.py [args]`` passes ``--server URL`` and makes every httpx
client of that benchmark send the token (the server side is unchanged; only the benchmark's
client learns the header). bench/run uses this when a benchmark has no ``--token`` option.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._util import free_port


@contextlib.contextmanager
def api_stack(quota_gb: int = 4, log_level: str = "WARNING") -> Iterator[tuple[str, str]]:
    """etcd + API server on free ports in a temporary SKYSHIFT_HOME; yields (url, admin token).

    ``log_level`` is the server's (uvicorn's access log writes a line a request at INFO).
    """
    tmp = Path(tempfile.mkdtemp(prefix="skyshift-bench-"))
    cport, pport, aport = free_port(), free_port(), free_port()
    etcd = subprocess.Popen(
        [shutil.which("etcd") or "etcd", "--data-dir", str(tmp / "etcd"),
         "--listen-client-urls", f"http://127.0.0.1:{cport}",
         "--advertise-client-urls", f"http://127.0.0.1:{cport}",
         "--listen-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-cluster", f"default=http://127.0.0.1:{pport}",
         "--quota-backend-bytes", str(quota_gb * 1024**3)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    env = dict(os.environ, SKYSHIFT_ETCD=f"127.0.0.1:{cport}", SKYSHIFT_API_PORT=str(aport),
               SKYSHIFT_API_HOST="127.0.0.1", SKYSHIFT_HOME=str(tmp), SKYSHIFT_LIFECYCLE="off",
               SKYSHIFT_LOG_LEVEL=log_level)
    with open(tmp / "api.log", "w") as api_log:
        api = subprocess.Popen([sys.executable, "-m", "skyshift.api"], env=env,
                               stdout=subprocess.DEVNULL, stderr=api_log)
    url = f"http://127.0.0.1:{aport}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            raise SystemExit(f"API server did not become ready: {(tmp / 'api.log').read_text()}")
        from skyshift.client.auth import login
        from skyshift.config import admin_password_file

        password = admin_password_file(tmp).read_text().strip()
        yield url, login(url, "admin", password).token
    finally:
        for p in (api, etcd):
            p.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def _send_token(token: str) -> None:
    """Every httpx client created from now on carries ``Authorization: Bearer <token>``."""
    for cls in (httpx.Client, httpx.AsyncClient):
        original = cls.__init__

        def init(self: Any, *args: Any, __original: Any = original, **kw: Any) -> None:
            headers = dict(kw.pop("headers", None) or {})
            headers.setdefault("Authorization", f"Bearer {token}")
            __original(self, *args, headers=headers, **kw)

        cls.__init__ = init  # type: ignore[method-assign]


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python bench/_authed.py bench/<benchmark>.py [args]")
    script, args = sys.argv[1], sys.argv[2:]
    with api_stack() as (url, token):
        _send_token(token)
        sys.argv = [script, "--server", url, *args]
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
