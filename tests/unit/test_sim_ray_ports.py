"""A simulated Ray head takes one block of free ports below 10000, off the kernel's ephemeral
range (where a stack's listener, and then its firewall table, could take a worker port)."""

from __future__ import annotations

import socket

import pytest

from skyshift.devstack.sim import ray_ports
from skyshift.devstack.sim.ray_ports import BLOCK, RESERVED, head_ports
from tests.fixtures.ports import _ephemeral_low


def test_one_block_of_consecutive_ports_below_the_ephemeral_range() -> None:
    ports = head_ports(56)
    assert ports == list(range(ports[0], ports[0] + 56))
    assert ports[0] % BLOCK == 0
    assert ports[0] >= ray_ports.LOW and ports[-1] < ray_ports.HIGH < _ephemeral_low()
    assert not RESERVED.intersection(ports)


def test_a_block_with_a_bound_port_or_an_avoided_one_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = head_ports(1)[0]
    second = head_ports(1, avoid={first})[0]
    assert second != first
    # the shuffle puts both blocks first: one has a listener, the other is avoided
    monkeypatch.setattr(
        ray_ports.random,
        "shuffle",
        lambda starts: starts.sort(key=lambda s: s not in (first, second)),
    )
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", first + BLOCK - 1))
        busy.listen()
        got = head_ports(BLOCK, avoid={second + 3})
    assert got[0] not in (first, second) and len(got) == BLOCK


def test_a_head_never_asks_for_more_than_a_block() -> None:
    with pytest.raises(ValueError, match="1 to 64 ports"):
        head_ports(BLOCK + 1)
