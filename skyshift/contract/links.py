"""Payloads of the Link lifecycle (the rules are in :mod:`skyshift.contract`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LinkInput:
    name: str
    uid: str
    deleting: bool = False
    refresh: float = 30.0  # seconds between looks at the clusters and the gateway
    history_limit: int = 10_000


@dataclass
class LinkRef:
    name: str
    uid: str


@dataclass
class LinkView:
    """The link and its two clusters as etcd has them (``problem``: why it cannot be Ready
    without even probing, e.g. a cluster that does not exist)."""

    found: bool = False
    deleting: bool = False
    generation: int = 0
    source: str = ""
    target: str = ""
    gateway_address: str = ""
    gateway_port: int = 0
    problem: str = ""


@dataclass
class ProbeInput:
    address: str
    port: int
    timeout: float = 3.0


@dataclass
class ProbeResult:
    ok: bool = False
    error: str = ""


@dataclass
class LinkStatusPatch:
    name: str
    uid: str
    phase: str
    message: str
    generation: int = 0
    workflow_id: str = ""
