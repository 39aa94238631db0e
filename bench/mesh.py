"""Service throughput on a local cluster: requests/s through HAProxy against one replica direct.

Prints figures, asserts nothing. Starts small HTTP replicas (asyncio, keep-alive, a fixed
answer) as processes, puts a local cluster's service in front of them with the real
``LocalBalancer`` (Debian's HAProxy, runtime API), and loads them with ``wrk`` (Debian's):

1. direct: one replica, no proxy;
2. through the service with that one replica behind it (the proxy's own cost);
3. through the service with ``--replicas`` replicas behind it.

On a 2-core machine wrk, HAProxy and the replicas share the cores, so the ratios say more than
the absolute rates. Usage: ``python bench/mesh.py`` (about 40 s); ``--seconds 3`` quicker.
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import write_result
from skyshift.compat.local.lb import LocalBalancer
from skyshift.compat.types import ServicePort, ServiceSpec

REPLICA = r'''
import asyncio, sys
BODY = b"ok\n"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\n" + BODY
async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                break
            writer.write(ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    async with server:
        await server.serve_forever()
asyncio.run(main())
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, host: str = "127.0.0.1") -> None:
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port}")


def wrk(url: str, seconds: int, connections: int) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", url],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)

    def ms(label: str) -> float:
        m = re.search(rf"\s{label}\s+([\d.]+)(us|ms|s)", out)
        if m is None:
            return float("nan")
        scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
        return round(float(m.group(1)) * scale, 3)

    return {"requests_per_s": round(rps, 1), "p50_ms": ms("50%"), "p99_ms": ms("99%"),
            "errors": 0.0 if errors is None else 1.0}


def main(args: argparse.Namespace) -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("needs wrk (apt-get install wrk)")
    tmp = Path(tempfile.mkdtemp(prefix="skyshift-bench-mesh-"))
    ports = [free_port() for _ in range(args.replicas)]
    procs = [subprocess.Popen([sys.executable, "-c", REPLICA, str(p)]) for p in ports]
    lb = LocalBalancer("bench-mesh", tmp, "127.0.0.1")
    results: dict[str, Any] = {"connections": args.connections, "seconds": args.seconds,
                               "replicas": args.replicas}
    try:
        for p in ports:
            wait_port(p)
        backends = [f"127.0.0.1:{p}" for p in ports]
        spec = ServiceSpec("bench", "default", ports=[ServicePort(80, 8080)],
                           backends={"8080": backends[:1]})
        ip = lb.apply(spec).cluster_ip
        wait_port(80, ip)
        time.sleep(1.5)  # health checks
        results["direct_one_replica"] = wrk(f"http://{backends[0]}/", args.seconds,
                                            args.connections)
        results["service_one_replica"] = wrk(f"http://{ip}/", args.seconds, args.connections)
        spec.backends = {"8080": backends}
        lb.apply(spec)
        time.sleep(1.5)
        results[f"service_{args.replicas}_replicas"] = wrk(f"http://{ip}/", args.seconds,
                                                           args.connections)
        direct = results["direct_one_replica"]["requests_per_s"]
        one = results["service_one_replica"]["requests_per_s"]
        many = results[f"service_{args.replicas}_replicas"]["requests_per_s"]
        results["service_one_over_direct"] = round(one / direct, 2)
        results[f"service_{args.replicas}_over_direct"] = round(many / direct, 2)
        for key in ("direct_one_replica", "service_one_replica",
                    f"service_{args.replicas}_replicas"):
            r = results[key]
            print(f"{key}: {r['requests_per_s']:.0f} requests/s, p50 {r['p50_ms']} ms, "
                  f"p99 {r['p99_ms']} ms")
        print(f"through the service / direct: {one / direct:.2f} with one replica, "
              f"{many / direct:.2f} with {args.replicas}")
    finally:
        lb.stop()
        for proc in procs:
            proc.terminate()
            proc.wait(10)
        print(f"wrote {write_result('mesh', results)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--replicas", type=int, default=2)
    main(ap.parse_args())
