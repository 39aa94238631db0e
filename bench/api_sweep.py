"""API throughput against client concurrency: where one API server process saturates.

For each concurrency level, ``c`` clients issue creates, then gets, then CAS updates (GET + PUT
with resourceVersion) for a fixed time each; requests/s and latency percentiles per operation.
Starts its own etcd + API server (lifecycle hooks off, as bench/api.py does; auth on, with an
admin token) or uses ``--server`` and ``--token``. The load generator is Python on the same
machine: on 2 cores, client and server share the CPU, so the curve shows the whole loopback
system, not the server alone. Prints a table, writes ``api_sweep`` into
bench/results/latest.json; asserts nothing.

    python bench/api_sweep.py [--levels 1,2,4,8,16,32,64] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._authed import api_stack
from bench._util import summary_ms, write_result

NS = "sweep"


def job(name: str) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"run": "sleep 1", "resources": {"cpus": 0.1}, "replicas": 0},
    }


async def phase(
    c: httpx.AsyncClient, conc: int, seconds: float, op: Any
) -> dict[str, Any]:
    """Run ``op(client, worker, i)`` from ``conc`` workers for ``seconds``; figures."""
    lat: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    counter = itertools.count()

    async def worker(w: int) -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            i = next(counter)
            t0 = time.perf_counter()
            ok = await op(c, w, i)
            lat.append(time.perf_counter() - t0)
            errors += 0 if ok else 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(conc)))
    wall = time.perf_counter() - t0
    return {**summary_ms(lat), "rps": round(len(lat) / wall, 1), "errors": errors}


class LevelOps:
    """The three operations of one concurrency level, on the jobs this level created."""

    def __init__(self, level: int, conc: int) -> None:
        self.level, self.conc = level, conc
        self.created: list[str] = []

    async def create(self, c: httpx.AsyncClient, w: int, i: int) -> bool:
        name = f"l{self.level}-{i:07d}"
        r = await c.post(f"/{NS}/jobs", json=job(name))
        if r.status_code == 201:
            self.created.append(name)
        return r.status_code == 201

    async def get(self, c: httpx.AsyncClient, w: int, i: int) -> bool:
        r = await c.get(f"/{NS}/jobs/{self.created[i % len(self.created)]}")
        return r.status_code == 200

    async def cas(self, c: httpx.AsyncClient, w: int, i: int) -> bool:
        # Each worker updates its own objects: conflicts are not what this measures.
        name = self.created[(w + i * self.conc) % len(self.created)]
        r = await c.get(f"/{NS}/jobs/{name}")
        obj = r.json()
        obj["metadata"].setdefault("annotations", {})["n"] = str(i)
        r = await c.put(f"/{NS}/jobs/{name}", json=obj)
        return r.status_code in (200, 409)


async def sweep(url: str, token: str, levels: list[int], seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"server": url, "seconds_per_phase": seconds, "levels": []}
    top = max(levels)
    limits = httpx.Limits(max_connections=top * 2, max_keepalive_connections=top * 2)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits, headers=headers) as c:
        r = await c.post("/namespaces", json={"kind": "Namespace", "metadata": {"name": NS}})
        if r.status_code not in (200, 201, 409):
            raise SystemExit(f"cannot create namespace: {r.status_code} {r.text}")
        for level, conc in enumerate(levels):
            ops = LevelOps(level, conc)
            row: dict[str, Any] = {"concurrency": conc}
            row["create"] = await phase(c, conc, seconds, ops.create)
            row["get"] = await phase(c, conc, seconds, ops.get)
            row["get_put_cas"] = await phase(c, conc, seconds, ops.cas)
            out["levels"].append(row)
            print(f"{conc:>5} {row['create']['rps']:>10} {row['get']['rps']:>10} "
                  f"{row['get_put_cas']['rps']:>10} {row['get']['p50_ms']:>9} "
                  f"{row['get']['p99_ms']:>9}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--server", help="use a running API server instead of starting one")
    ap.add_argument("--token", default=os.environ.get("SKYSHIFT_TOKEN", ""),
                    help="bearer token for --server (default: $SKYSHIFT_TOKEN)")
    ap.add_argument("--levels", default="1,2,4,8,16,32,64")
    ap.add_argument("--seconds", type=float, default=3.0, help="per operation and level")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    print(f"{'conc':>5} {'create/s':>10} {'get/s':>10} {'cas/s':>10} {'get p50':>9} "
          f"{'get p99':>9}")
    if args.server:
        result = asyncio.run(sweep(args.server, args.token, levels, args.seconds))
    else:
        with api_stack() as (url, token):
            result = asyncio.run(sweep(url, token, levels, args.seconds))
    print(f"\nwrote {write_result('api_sweep', result)}")


if __name__ == "__main__":
    main()
