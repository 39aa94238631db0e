"""The Prometheus targets of a running stack, for the scrape config of docs/metrics.md.

Every ``skyshift up`` writes ``$SKYSHIFT_HOME/metrics/targets.json`` in Prometheus' file-based
service discovery format (``file_sd_configs``): one group per process that serves metrics, its
``host:port`` and a ``component`` label (``api``, ``control``, ``skylet-manager``). The shipped
``docs/metrics/prometheus.yml`` reads ``targets.json`` next to itself, so a copy of it in
``$SKYSHIFT_HOME/metrics/`` scrapes whatever ports this stack chose; Prometheus notices when a
later ``up`` rewrites the file. With ``--no-metrics`` the file lists no targets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from skyshift.devstack.components import Component

TARGETS_FILE = "targets.json"


def targets_path(home: Path) -> Path:
    return home / "metrics" / TARGETS_FILE


def file_sd(home: Path, components: list[Component]) -> list[dict[str, object]]:
    """The file_sd groups of these components (those without metrics left out)."""
    groups: list[dict[str, object]] = []
    for component in components:
        if component.metrics:
            hostport = component.metrics.removeprefix("http://").split("/", 1)[0]
            labels = {"component": component.name, "skyshift_home": str(home)}
            groups.append({"targets": [hostport], "labels": labels})
    return groups


def write(home: Path, components: list[Component]) -> dict[str, str]:
    """Write the targets file (atomically); component name -> the URL Prometheus scrapes."""
    path = targets_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(file_sd(home, components), indent=2) + "\n")
    os.replace(tmp, path)
    return {c.name: c.metrics for c in components if c.metrics}
