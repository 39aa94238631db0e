"""Which cluster managers a Cluster may name: a hook point the compat layer fills.

The models sit below compat (pyproject's import-linter layers), so they cannot ask the manager
subpackages what exists. Instead each manager declares its names here as plain data
(:class:`ManagerNames`), through ``skyshift.compat.kind.add_manager``, which every manager
subpackage's descriptor goes through when ``skyshift.compat`` is imported. ``ClusterSpec``
validates against what has been declared: a process that validates Clusters imports
``skyshift.compat`` first (the API server and the CLI do; the workers use compat anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: checks a Cluster's ``spec.config`` for its manager: the error text, or "" when it is fine
ConfigCheck = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class ManagerNames:
    """What the object model knows of one cluster manager."""

    name: str  # the canonical name stored in spec.manager ("k8")
    aliases: tuple[str, ...] = ()  # other names users may write ("kubernetes", "k8s")
    label: str = ""  # how lists show it ("k8 (kubernetes)"); the name when empty
    provisions: bool = False  # spec.provision clusters are run by this manager
    check: ConfigCheck | None = None  # refuses a spec.config the manager cannot use


_DECLARED: dict[str, ManagerNames] = {}
_ALIASES: dict[str, str] = {}


def declare(names: ManagerNames) -> None:
    """Make ``names.name`` and its aliases valid in ``spec.manager`` (again: replaces)."""
    _DECLARED[names.name] = names
    for alias in (names.name, *names.aliases):
        _ALIASES[alias.lower()] = names.name


def declared(name: str) -> ManagerNames | None:
    return _DECLARED.get(name)


def all_names() -> list[ManagerNames]:
    """Every declared manager, in the order declared."""
    return list(_DECLARED.values())


def listing(names: Iterable[ManagerNames] | None = None) -> str:
    """The managers (all declared ones by default) for a message: "local, k8 (kubernetes),
    slurm or ray"."""
    labels = [m.label or m.name for m in (_DECLARED.values() if names is None else names)]
    if len(labels) < 2:
        return "".join(labels) or "(none declared: import skyshift.compat)"
    return f"{', '.join(labels[:-1])} or {labels[-1]}"


def canonical(value: object) -> str:
    """The manager's canonical name for what a user wrote; ValueError naming the choices."""
    found = _ALIASES.get(str(value).lower())
    if found is None:
        raise ValueError(f"unknown manager {value!r}: expected {listing()}")
    return found


def resolve(value: object) -> str:
    """Like :func:`canonical`, but an unknown name comes back lowercased instead of raising
    (for callers that leave the refusal to validation)."""
    key = str(value).lower()
    return _ALIASES.get(key, key)


def provisioner() -> str:
    """The manager that runs provisioned clusters ("" when none is declared)."""
    return next((m.name for m in _DECLARED.values() if m.provisions), "")
