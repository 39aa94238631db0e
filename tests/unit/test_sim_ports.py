"""The simulators' daemons take ports below the kernel's ephemeral range, where no outgoing
connection can take one between the pick and the daemon's bind (a kube-scheduler once failed
with "address already in use" on a port handed out by binding port 0)."""

from __future__ import annotations

import socket

import pytest

from skyshift.devstack.sim import ports
from skyshift.devstack.sim.k8s import _free_port
from skyshift.devstack.sim.slurm import free_ports


def test_ports_are_free_distinct_never_repeated_and_below_the_ephemeral_range() -> None:
    low = ports.ephemeral_low()
    picked = ports.free_ports(20) + free_ports(5) + [_free_port() for _ in range(5)]
    assert len(set(picked)) == len(picked)
    assert all(ports.LOWEST <= p < max(low, ports.LOWEST + 1000) for p in picked), picked
    assert not ports.DEFAULTS.intersection(picked)
    for port in picked[:5]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # free: a daemon can bind it


def _unused(after: int) -> int:
    """A port from ``after`` up that binds now and this process has not handed out."""
    port = after
    while port in ports._given or not ports.binds(port):
        port += 1
    return port


def test_a_port_in_use_avoided_or_handed_out_is_not_picked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    given = ports.free_ports(1)[0]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        busy = _unused(20000)
        held.bind(("127.0.0.1", busy))
        avoided = _unused(busy + 1)
        free = _unused(avoided + 1)
        tries = iter([busy, avoided, given, free])
        monkeypatch.setattr(ports._rng, "randrange", lambda _lo, _hi: next(tries))
        assert ports.free_ports(1, frozenset({avoided})) == [free]
