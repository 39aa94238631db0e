"""Free loopback ports for the simulators' daemons, picked below the kernel's ephemeral range.

Binding port 0 gives a port of the ephemeral range, and any outgoing connection on the host may
take that port as its local end before the daemon binds it: a test run lost all of its
Kubernetes tests when one simulated cluster's kube-scheduler failed with "bind: address already
in use" on such a port, handed out a second earlier. A port in ``[10000, ephemeral)`` is never
an outgoing connection's, so once checked free it stays free unless someone binds it on purpose.
(Ray heads take theirs below 10000, :mod:`skyshift.devstack.sim.ray_ports`.) Picks are random
and never repeated by one process, so two simulators started together do not collide.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10000
#: SkyShift's default ports (Temporal, its UI, etcd, the API, the workers' metrics, PostgreSQL
#: under ``up --ha``)
DEFAULTS = frozenset({7233, 8233, 23790, 23800, 50051, 9464, 9465, 9466, 25432})
_rng = random.Random()
_given: set[int] = set()


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def binds(port: int) -> bool:
    """``port`` binds on loopback now (nothing listens on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int, avoid: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """``count`` distinct ports free now, below the ephemeral range, none of ``avoid`` and none
    handed out before by this process."""
    top = max(ephemeral_low(), LOWEST + 1000)
    out: list[int] = []
    for _ in range(count * 500):
        if len(out) == count:
            break
        port = _rng.randrange(LOWEST, top)
        if port in _given or port in avoid or port in DEFAULTS or port in out:
            continue
        if binds(port):
            out.append(port)
    if len(out) < count:
        raise OSError(f"no {count} free ports between {LOWEST} and {top}")
    _given.update(out)
    return out
