"""Ports of a simulated Ray head: one block of consecutive ports below 10000.

A head needs about 56 ports (GCS, dashboard, agents, and a list of worker ports a worker binds
only while it lives). Ports of the kernel's ephemeral range (what binding port 0 gives) are the
wrong place for them: between two jobs a worker port is unbound, so any process on the host may
get it for a listener of its own, and a SkyShift stack then lists it in its firewall table,
which refuses the ``skyshift-run`` group, whom the head runs as, every port the stack listens on
(:mod:`skyshift.devstack.firewall`). A Ray job whose supervisor got that worker port never
starts: it stays Pending, and a stop of it never ends. The tests' stacks take their configured
ports in ``[10000, ephemeral)`` (tests/fixtures/ports.py), so the heads take theirs below that,
away from SkyShift's default ports and the usual services.

The block is aligned (``BLOCK`` ports), and chosen only when every port of it binds: a block
another running head uses has that head's GCS and dashboard bound, so two heads do not share
one.
"""

from __future__ import annotations

import random

from skyshift.devstack.sim.ports import binds

BLOCK = 64
LOW, HIGH = 2048, 10000
#: ports of SkyShift's defaults and of services often found on a host (PostgreSQL, Redis/Ray's
#: GCS, Temporal, Ray's dashboard, Prometheus and its exporters, HTTP alternates, metrics)
RESERVED = frozenset({3000, 3306, 5000, 5432, 6379, 7233, 8000, 8080, 8233, 8265, 8443, 8888,
                      9000, 9090, 9093, 9100, 9464, 9465, 9466})  # fmt: skip


class NoFreePorts(RuntimeError):
    """No block of free ports is left in the range."""


def head_ports(count: int, avoid: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """``count`` (at most ``BLOCK``) consecutive free ports of one aligned block in
    ``[LOW, HIGH)`` that holds none of ``avoid`` or ``RESERVED``, the block chosen at random."""
    if not 0 < count <= BLOCK:
        raise ValueError(f"a head takes 1 to {BLOCK} ports, not {count}")
    starts = list(range(-(-LOW // BLOCK) * BLOCK, HIGH - BLOCK + 1, BLOCK))
    random.shuffle(starts)
    for start in starts:
        block = range(start, start + BLOCK)
        if RESERVED.intersection(block) or avoid.intersection(block):
            continue
        if all(binds(p) for p in block):
            return list(range(start, start + count))
    raise NoFreePorts(f"no block of {BLOCK} free ports between {LOW} and {HIGH} for a Ray head")
