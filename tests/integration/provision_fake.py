"""A scripted Provisioner whose clusters live in a JSON file, for the provisioning lifecycle tests.

It sits below the adapter boundary (the provisioning activities cannot tell it from the SkyPilot
driver) and keeps its state in a file under a lock, so what a control worker launched survives
that worker's kill -9 and a launch retried by the next worker finds it (adopts it), as SkyPilot's
own state would. ``python -m tests.integration.provision_fake`` is a control worker that holds
it (the kill -9 test's subprocess). The ``skypilot`` cluster manager the skylets build for a
provisioned cluster is replaced by a local cluster sized from the UP clusters (:func:`local_for`).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skyshift.compat.errors import Permanent
from skyshift.compat.provision_types import (
    Capacity,
    LaunchRequest,
    Progress,
    ProvisionedCluster,
)

STATE_ENV = "SKYSHIFT_TEST_PROVISIONER_STATE"


class FileProvisioner:
    """State file: ``clusters`` {name: {state, infra, nodes, cpus}}, ``calls`` [[op, name,
    infra]], and the script: ``capacity`` {infra: failures before success, -1 always},
    ``permanent`` {infra: message}, ``delay`` seconds a launch takes, ``down_failures``: how
    many teardowns fail first."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @staticmethod
    def create(path: Path, **script: Any) -> FileProvisioner:
        data = {"clusters": {}, "calls": [], "capacity": {}, "permanent": {}, "delay": 0.0,
                **script}
        path.write_text(json.dumps(data))
        return FileProvisioner(path)

    @contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = json.loads(self.path.read_text())
            try:
                yield data
            finally:  # what was recorded before an error raised inside stays recorded
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data))
                os.replace(tmp, self.path)

    def read(self) -> dict[str, Any]:
        with self._state() as data:
            return data

    def script(self, **changes: Any) -> None:
        with self._state() as data:
            data.update(changes)

    def launch(self, req: LaunchRequest, progress: Progress) -> ProvisionedCluster:
        with self._state() as data:
            data["calls"].append(["launch", req.cluster, req.infra])
            if msg := data["permanent"].get(req.infra):
                raise Permanent(msg)
            old = data["clusters"].get(req.cluster)
            left = data["capacity"].get(req.infra, 0)
            # as SkyPilot's launch of a cluster that is UP: reused, no new capacity needed
            if left and not (old is not None and old["state"] == "UP"):
                data["capacity"][req.infra] = left - 1 if left > 0 else -1
                raise Capacity(f"no nodes free on {req.infra}")
            adopted = old is not None and old["state"] in ("INIT", "UP")
            if old is None or old["state"] == "ABSENT":
                data["clusters"][req.cluster] = {"state": "INIT", "infra": req.infra,
                                                 "nodes": req.nodes, "cpus": req.shape.cpus,
                                                 "launches": 0}
            data["clusters"][req.cluster]["launches"] += 1
            delay = float(data["delay"])
        progress(f"{'adopting' if adopted else 'allocating'} {req.nodes} node(s) on {req.infra}")
        end = time.monotonic() + delay
        while time.monotonic() < end:
            time.sleep(0.2)
            progress(f"waiting for {req.cluster}: {max(end - time.monotonic(), 0):.0f} s left")
        with self._state() as data:
            rec = data["clusters"].get(req.cluster)
            if rec is None or rec["state"] == "ABSENT":  # torn down meanwhile
                raise Capacity(f"{req.cluster} was torn down while launching")
            rec["state"] = "UP"
            return ProvisionedCluster(req.cluster, "UP", req.infra, rec["nodes"], "10.0.0.1")

    def status(self, cluster: str) -> ProvisionedCluster:
        rec = self.read()["clusters"].get(cluster)
        if rec is None:
            return ProvisionedCluster(cluster, "ABSENT")
        return ProvisionedCluster(cluster, rec["state"], rec["infra"], rec["nodes"])

    def down(self, cluster: str, progress: Progress) -> None:
        with self._state() as data:
            data["calls"].append(["down", cluster, ""])
            if data.get("down_failures"):
                data["down_failures"] -= 1
                raise Permanent("credentials expired")
            if cluster in data["clusters"]:
                data["clusters"][cluster]["state"] = "ABSENT"
        progress(f"{cluster} terminated")

    # what the tests look at -------------------------------------------------------------------

    def up(self) -> dict[str, dict[str, Any]]:
        """Clusters not torn down (UP or still INIT): what would be leaked."""
        return {n: c for n, c in self.read()["clusters"].items() if c["state"] != "ABSENT"}

    def calls(self, op: str, infra: str | None = None) -> list[str]:
        return [n for o, n, i in self.read()["calls"] if o == op and infra in (None, i)]


def local_for(provisioner: FileProvisioner, state_root: Path) -> Any:
    """A ``skypilot`` manager factory for the skylets: a local cluster whose nodes are the UP
    nodes of the SkyPilot clusters in its config."""
    from skyshift.compat.local.adapter import LocalManager

    def build(name: str, config: dict[str, Any]) -> LocalManager:
        clusters = provisioner.read()["clusters"]
        ups = [clusters[s] for s in config.get("sky_clusters") or [] if s in clusters]
        nodes = sum(int(c["nodes"]) for c in ups) or 1
        cpus = sum(float(c["cpus"] or 1) * int(c["nodes"]) for c in ups) or 1
        state = state_root / name
        state.mkdir(parents=True, exist_ok=True)
        return LocalManager(name, {"state_dir": str(state), "cpus": cpus, "memory": 1024 * nodes,
                                   "nodes": nodes, "grace_period": 0.5})

    return build


def main() -> None:
    """A control worker holding the file provisioner named by $SKYSHIFT_TEST_PROVISIONER_STATE."""
    import asyncio

    from skyshift.activities.provisioning import register_provisioner
    from skyshift.workers import control

    path = Path(os.environ[STATE_ENV])
    register_provisioner("skypilot", lambda: FileProvisioner(path))
    asyncio.run(control.main())


if __name__ == "__main__":
    main()
