"""Configuration of a Slurm cluster (``Cluster.spec.config`` for manager ``slurm``), checked once.

Every key is optional; a wrong type or value is a ``Permanent`` error naming the cluster and the
key, so a bad config fails the attach with a clear status instead of a failure later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from skyshift.compat.errors import Permanent


@dataclass
class SlurmConfig:
    slurm_conf: str | None = None
    partition: str | None = None
    workdir: str = ""
    poll_interval: float | None = None  # None: the skylet's own sync interval
    host: str | None = None
    username: str | None = None
    ssh_key_path: str | None = None
    port: int = 22
    known_hosts_file: str | None = None
    strict_host_key_checking: str = "accept-new"
    account: str | None = None
    qos: str | None = None
    time_limit: str | None = None
    sbatch_args: list[str] = field(default_factory=list)
    container_runtime: str = ""
    command_timeout: float = 60.0
    delete_wait: float = 15.0
    sbatch_concurrency: int = 8
    queue_depth: float = 1.0
    labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, name: str, config: dict[str, Any]) -> SlurmConfig:
        def opt_str(key: str) -> str | None:
            value = config.get(key)
            if value is None or value == "":
                return None
            if not isinstance(value, str):
                raise Permanent(f"slurm cluster {name}: {key} must be a string")
            return value

        def number(key: str, default: float, low: float, high: float = math.inf) -> float:
            value = config.get(key, default)
            # written so that NaN fails too
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not low <= value <= high:
                bound = f">= {low:g}" if high == math.inf else f"{low:g}-{high:g}"
                raise Permanent(f"slurm cluster {name}: {key} must be a number {bound}")
            return float(value)

        extra = config.get("sbatch_args") or []
        if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
            raise Permanent(f"slurm cluster {name}: sbatch_args must be a list of strings")
        labels = config.get("labels") or {}
        if not isinstance(labels, dict):
            raise Permanent(f"slurm cluster {name}: labels must map strings to strings")
        runtime = opt_str("container_runtime") or ""
        if runtime not in ("", "apptainer", "singularity"):
            raise Permanent(
                f"slurm cluster {name}: container_runtime must be apptainer or singularity"
            )
        poll = number("poll_interval", 1.0, 0.1, 300) if "poll_interval" in config else None
        depth = number("queue_depth", 1.0, 0.0, 100)
        port = config.get("port", 22)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise Permanent(f"slurm cluster {name}: port must be an integer 1-65535")
        return cls(
            slurm_conf=opt_str("slurm_conf"),
            partition=opt_str("partition"),
            workdir=opt_str("workdir") or f".skyshift/slurm/{name}",
            poll_interval=poll,
            host=opt_str("host"),
            username=opt_str("username") or opt_str("user"),
            ssh_key_path=opt_str("ssh_key_path"),
            port=port,
            known_hosts_file=opt_str("known_hosts_file"),
            strict_host_key_checking=opt_str("strict_host_key_checking") or "accept-new",
            account=opt_str("account"),
            qos=opt_str("qos"),
            time_limit=opt_str("time_limit"),
            sbatch_args=list(extra),
            container_runtime=runtime,
            command_timeout=number("command_timeout", 60.0, 1.0),
            delete_wait=number("delete_wait", 15.0, 0.0),
            sbatch_concurrency=int(number("sbatch_concurrency", 8, 1)),
            queue_depth=depth,
            labels={str(k): str(v) for k, v in labels.items()},
        )
