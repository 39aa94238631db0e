"""What ``skyshift up`` enforces between local workloads and the control plane, and what it says
it cannot.

As root: replicas of the ``local`` cluster run as a user per namespace in the group of
``skyshift-run`` with a private ``/proc`` (:mod:`skyshift.compat.local.tenants`), and an
nftables table refuses that group every port the stack listens on but the API's
(:mod:`skyshift.devstack.firewall`). Not as root, none of that can be done, and ``up`` lists
each point, so nobody mistakes a development stack for an isolated one.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyshift.devstack import firewall, procs
from skyshift.devstack.components import LOOPBACK, Ports
from skyshift.devstack.local import LOCAL_CLUSTER, RUN_USER


@dataclass
class Isolation:
    """What ``up`` did (``enforced``) and what it could not do (``missing``), one line each."""

    enforced: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    ports: set[int] = field(default_factory=set)


def control_ports(ports: Ports, records: dict[str, dict[str, Any]]) -> set[int]:
    """Every port of the stack a workload must not reach: the configured ones (the metrics
    ports of the API and the workers among them, bound yet or not) and whatever the stack's
    processes listen on, without the API's port."""
    wanted = set(ports.in_use())
    groups = {int(r["pid"]) for r in records.values() if isinstance(r.get("pid"), int)}
    wanted |= firewall.listening_ports(groups)
    wanted.discard(ports.api)
    return wanted


def enforce(home: Path, ports: Ports, records: dict[str, dict[str, Any]]) -> Isolation:
    """As root, install this stack's firewall table for the replicas' group; otherwise (or
    when that fails) say what is left open."""
    out = Isolation(ports=control_ports(ports, records))
    listed = ", ".join(str(p) for p in sorted(out.ports))
    if os.geteuid() != 0:
        out.missing = not_root(home, ports)
        return out
    gid = pwd.getpwnam(RUN_USER).pw_gid
    stale = firewall.prune(stack_running, keep=home)
    if stale:
        out.enforced.append(
            f"removed the firewall tables of stacks that no longer run: {', '.join(stale)}"
        )
    try:
        table = firewall.install(home, gid, out.ports)
    except firewall.FirewallError as exc:
        out.missing.append(
            f"no firewall: {exc}; jobs can connect to Temporal, etcd and the workers "
            f"(ports {listed} on {LOOPBACK})"
        )
    else:
        group = grp.getgrgid(gid).gr_name
        out.enforced.append(
            f"firewall (nft table inet {table}): processes of group {group} are refused "
            f"ports {listed}; the API ({ports.api}) stays open"
        )
    out.enforced.append(
        f"cluster {LOCAL_CLUSTER}: each namespace's replicas run as a user of their own in "
        f"group {RUN_USER}, with a /proc that shows only their own processes"
    )
    return out


def stack_running(home: Path) -> bool:
    """Whether any process of the stack in ``home`` still runs (its ``stack.json`` names them
    with their start times). An unreadable ``stack.json`` counts as running: keep its table."""
    try:
        raw = json.loads((home / "stack.json").read_text())
        records = list((raw.get("components") or {}).values())
    except FileNotFoundError:
        return False
    except (OSError, ValueError, AttributeError):
        return True
    for record in records:
        pid = record.get("pid") if isinstance(record, dict) else None
        ticks = record.get("start_ticks") if isinstance(record, dict) else None
        if isinstance(pid, int) and procs.is_ours(pid, ticks if isinstance(ticks, int) else None):
            return True
    return False


def not_root(home: Path, ports: Ports) -> list[str]:
    """Each thing a stack started by an ordinary user cannot enforce."""
    who = f"uid {os.geteuid()}"
    return [
        f"replicas of the cluster {LOCAL_CLUSTER} run as you ({who}): a job can read {home} "
        "(the admin password, the token signing key, etcd's password)",
        f"no firewall (needs root): a job can connect to Temporal ({LOOPBACK}:{ports.temporal}"
        f" gRPC, {ports.ui} UI), etcd ({ports.etcd} client, {ports.etcd_peer} peer) and the "
        "workers' metrics ports, and through Temporal act as the control plane",
        "jobs of every namespace run as the same user: each can read the others' environment "
        "(/proc/<pid>/environ), working files and process list, and signal them",
        "HAProxy (services) and the simulated Ray heads run as you too",
        "run `skyshift up` as root to enforce all of this (docs/security.md)",
    ]
