#!/usr/bin/env python3
"""How much of the Temporal floor is the dev server's SQLite file: the same minimal workflows on
dev servers that differ only in persistence.

The Slurm and Kubernetes benchmarks compare SkyShift with straight submission and print the
"floor": ``n`` minimal workflows (three no-op activities) on the stack's Temporal dev server.
That server keeps its state in one SQLite file (WAL, ``synchronous=normal``: what ``skyshift up``
runs, so a stack survives a restart); SQLite takes one writer at a time and syncs at each WAL
checkpoint. This benchmark starts one dev server per variant, on free ports, and runs the floor
on each, the variants interleaved round by round so a machine whose speed drifts does not favour
one of them:

* ``file``: the stack's settings (``skyshift up``);
* ``file_sync_off``: the same file with ``synchronous=off`` (no sync at checkpoints: a power
  loss can corrupt it, which is why the stack does not run this);
* ``memory``: no file at all (what the dev server does without ``--db-filename``).

It prints, per variant, the median seconds over the rounds, the Temporal server's CPU seconds
and the share of the machine's cores busy, and the ratio of each to ``file``.

    python3 bench/temporal_persistence.py [--workflows 500] [--rounds 2] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._floor import temporal_floor
from bench._util import write_result
from skyshift.devstack.components import (
    SEARCH_ATTRIBUTES,
    SQLITE_PRAGMAS,
    temporal_binary,
)
from skyshift.devstack.sim.slurm import free_ports
from skyshift.lifecycle.client import connect

VARIANTS: dict[str, tuple[str, ...] | None] = {
    "file": SQLITE_PRAGMAS,
    "file_sync_off": ("journal_mode=wal", "synchronous=off"),
    "memory": None,
}


def log(msg: str) -> None:
    print(msg, flush=True)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine so far."""
    parts = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return sum(parts) - idle, sum(parts)


async def start_server(variant: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port, ui = free_ports(2)
    argv = [temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(port), "--ui-port", str(ui), "--log-level", "warn"]
    pragmas = VARIANTS[variant]
    if pragmas is not None:
        argv += ["--db-filename", str(workdir / f"{variant}.db")]
        for pragma in pragmas:
            argv += ["--sqlite-pragma", pragma]
    for attr in SEARCH_ATTRIBUTES:
        argv += ["--search-attribute", f"{attr}=Keyword"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            await connect(address)
            return proc, address
        except Exception:  # not listening yet
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"the Temporal dev server ({variant}) did not start") from None
            await asyncio.sleep(0.2)


async def one_round(variant: str, args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    proc, address = await start_server(variant, workdir)
    try:
        await temporal_floor(address, 20, args.concurrency)  # warm: namespace, task queues
        cpu0, busy0 = cpu_s(proc.pid), machine_busy()
        seconds = await temporal_floor(address, args.workflows, args.concurrency)
        cpu1, busy1 = cpu_s(proc.pid), machine_busy()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    total = busy1[1] - busy0[1]
    return {"seconds": seconds, "temporal_cpu_s": cpu1 - cpu0,
            "machine_busy_pct": 100 * (busy1[0] - busy0[0]) / total if total else 0.0}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="skyshift-bench-persistence-") as tmp:
        for r in range(args.rounds):
            for variant in VARIANTS:
                got = await one_round(variant, args, Path(tmp))
                rounds[variant].append(got)
                log(f"round {r + 1} {variant}: {args.workflows} minimal workflows in "
                    f"{got['seconds']:.1f} s, Temporal CPU {got['temporal_cpu_s']:.1f} s, "
                    f"machine {got['machine_busy_pct']:.0f}% busy")
    out: dict[str, Any] = {"workflows": args.workflows, "rounds": args.rounds,
                           "concurrency": args.concurrency,
                           "load_average_at_end": round(os.getloadavg()[0], 2)}
    for variant, runs in rounds.items():
        out[variant] = {k: round(statistics.median(r[k] for r in runs), 2)
                        for k in ("seconds", "temporal_cpu_s", "machine_busy_pct")}
    base = out["file"]["seconds"]
    out["over_file"] = {v: round(out[v]["seconds"] / base, 2) for v in VARIANTS}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workflows", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=2, help="each variant this many times")
    ap.add_argument("--concurrency", type=int, default=16, help="workflow starts in flight")
    ap.add_argument("--quick", action="store_true", help="100 workflows, one round")
    args = ap.parse_args()
    if args.quick:
        args.workflows, args.rounds = 100, 1
    result = asyncio.run(run(args))
    write_result("temporal_persistence", result)
    log("median seconds: " + ", ".join(
        f"{v} {result[v]['seconds']} s ({result['over_file'][v]}x file)" for v in VARIANTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
