"""The finished SkyPilot jobs a ``skypilot`` manager deleted: SkyPilot never forgets a job, so
deleted finished replicas are remembered in a small JSON file (``<sky cluster>:<job id>`` keys)
and left out of later listings."""

from __future__ import annotations

import json
from pathlib import Path


class Tombstones:
    """``<state_dir>/<cluster>.deleted.json``: read whole, written whole (replaced atomically)."""

    def __init__(self, state_dir: Path, cluster: str) -> None:
        self.path = state_dir / f"{cluster}.deleted.json"

    def load(self) -> set[str]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return set()
        return {str(k) for k in data} if isinstance(data, list) else set()

    def save(self, keys: set[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sorted(keys)))
        tmp.replace(self.path)
