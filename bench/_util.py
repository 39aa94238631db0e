"""Small helpers shared by the benchmarks: percentiles, free ports, machine facts, result files."""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds a process has used so far (0 when it is gone or unknown)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_snapshot(groups: dict[str, list[int | None]]) -> dict[str, float]:
    """CPU seconds so far of each named group of processes."""
    return {g: sum(cpu_seconds(p) for p in pids) for g, pids in groups.items()}


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds each group used between two snapshots (0.1 s resolution)."""
    return {g: round(after[g] - before[g], 1) for g in before}


def per_item_ms(used: dict[str, float], n: int, digits: int = 1) -> dict[str, float]:
    """CPU milliseconds per item of each part (``used``: CPU seconds), and their ``total``."""
    out = {g: round(v * 1000 / n, digits) for g, v in used.items()}
    out["total"] = round(sum(used.values()) * 1000 / n, digits)
    return out


def pct(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; 0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary_ms(samples: list[float]) -> dict[str, float]:
    """p50/p99/mean in milliseconds of samples given in seconds."""
    return {
        "n": len(samples),
        "p50_ms": round(pct(samples, 50) * 1000, 2),
        "p99_ms": round(pct(samples, 99) * 1000, 2),
        "mean_ms": round(statistics.fmean(samples) * 1000, 2) if samples else 0.0,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
        return out.strip().splitlines()[0] if out.strip() else "?"
    except (OSError, subprocess.SubprocessError):
        return "missing"


def machine() -> dict[str, Any]:
    import temporalio

    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "etcd": _version(["etcd", "--version"]),
        "temporal_cli": _version(["temporal", "--version"]),
        "temporalio": temporalio.__version__ if hasattr(temporalio, "__version__") else "?",
        "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def write_result(name: str, data: dict[str, Any]) -> Path:
    """Merge this benchmark's figures into bench/results/latest.json and return its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "latest.json"
    current: dict[str, Any] = {}
    if path.exists():
        try:
            current = json.loads(path.read_text())
        except ValueError:
            current = {}
    current["machine"] = machine()
    current.setdefault("benchmarks", {})[name] = data
    path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    return path
