"""What a cluster manager is: one :class:`ManagerKind` per manager subpackage, and the registry.

Each manager subpackage (``compat/local``, ``compat/kubernetes``, ...) exports ``MANAGER``, its
descriptor: its names (declared to the object model, which validates ``spec.manager`` with
them), its adapter (``"module:attribute"``, imported only when a cluster of that kind is built),
how a stored Cluster fills in the adapter's config, and what it cannot do. The descriptor
modules import nothing heavy, so knowing every manager never imports the Kubernetes client or
Ray. ``compat/registry.py`` lists the built-in ones; a plugin calls :func:`add_manager`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from skyshift.models import managers
from skyshift.models.managers import ManagerNames

Obj = dict[str, Any]
#: a stored Cluster's (spec, status) -> adapter config keys it fills (spec.config wins)
ConfigFill = Callable[[Obj, Obj], Obj]


def no_fill(spec: Obj, status: Obj) -> Obj:
    """For a manager whose whole config is in ``spec.config``."""
    return {}


@dataclass(frozen=True)
class ManagerKind:
    """One cluster manager, as the rest of SkyShift sees it."""

    names: ManagerNames
    adapter: str  # "module:attribute" of a class or function taking (name, config)
    fill: ConfigFill = field(default=no_fill)
    # why its clusters have no services (the adapter does not implement ServiceManager)
    no_services: str = ""
    # "module:attribute" of the Provisioner that launches its spec.provision clusters; a manager
    # with one is the one ClusterSpec gives provisioned clusters (names.provisions)
    provisioner: str = ""

    @property
    def name(self) -> str:
        return self.names.name


_KINDS: dict[str, ManagerKind] = {}


def add_manager(kind: ManagerKind) -> None:
    """Make the manager known: valid in ``spec.manager``, built by ``create_manager``, its config
    filled by :func:`fill_config`."""
    _KINDS[kind.name] = kind
    managers.declare(replace(kind.names, provisions=bool(kind.provisioner)))


def manager_kind(name: str) -> ManagerKind | None:
    return _KINDS.get(name)


def kinds() -> list[ManagerKind]:
    """The known managers, in the order they were added."""
    return list(_KINDS.values())


def load(target: str) -> Any:
    """The attribute a ``"module:attribute"`` target names, its module imported now."""
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def fill_config(manager: str, spec: Obj, status: Obj) -> Obj:
    """The adapter config of a stored Cluster: ``spec.config``, plus what the manager takes from
    the Cluster's other fields where ``spec.config`` leaves it out (empty values skipped)."""
    config: Obj = dict(spec.get("config") or {})
    kind = _KINDS.get(manager)
    fill = kind.fill(spec, status) if kind is not None else {}
    for key, value in fill.items():
        if value and key not in config:
            config[key] = value
    return config
