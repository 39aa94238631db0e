"""A simulated Ray head whose ``ray start`` gave up on a slow raylet (Ray allows it 30 s to
register with the GCS, hard-coded) is started again; any other exit is an error at once.

The head's processes are replaced by a script of what ``ray start`` did each time (below the
simulator's own process handling, which the Ray integration tests run for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.devstack.sim.ray import SimRayCluster, SimRayError

SLOW = ("Exception: The current node timed out during startup. This could happen because some "
        "of the raylet failed to startup or the GCS has become overloaded.\n")


class Scripted(SimRayCluster):
    """Each start runs the next of ``outcomes``: "slow" (exits saying so), "broken" (exits
    with another error) or "ok" (the Jobs API answers)."""

    outcomes: list[str]
    starts: int
    stops: int
    current: str

    def begin(self, outcomes: list[str]) -> None:
        self.outcomes, self.starts, self.stops, self.current = list(outcomes), 0, 0, ""

    def start_async(self, progress: object = None) -> None:
        self.starts += 1
        self.current = self.outcomes.pop(0)
        text = {"slow": SLOW, "broken": "Exception: port 9024 is taken\n", "ok": "started\n"}
        with (self.root / "head.log").open("a") as out:
            out.write(text[self.current])

    def running(self) -> bool:
        return self.current == "ok"

    def jobs_api_ready(self) -> bool:
        return self.current == "ok"

    def stop(self, grace: float = 15.0) -> None:
        self.stops += 1
        self.current = ""


def _head(tmp_path: Path, outcomes: list[str]) -> Scripted:
    head = Scripted(name="r1", root=tmp_path, gcs_port=9024, dashboard_port=9025, ports={},
                    worker_ports=[], cpus=2)
    head.begin(outcomes)
    head.start_async()
    return head


def test_a_start_that_timed_out_in_ray_is_made_again(tmp_path: Path) -> None:
    head = _head(tmp_path, ["slow", "slow", "ok"])
    head.wait_started(timeout=5)
    assert (head.starts, head.stops) == (3, 2)
    assert "starting the head again" in (tmp_path / "head.log").read_text()


def test_it_gives_up_after_its_retries(tmp_path: Path) -> None:
    head = _head(tmp_path, ["slow", "slow", "slow", "ok"])
    with pytest.raises(SimRayError, match="timed out during startup"):
        head.wait_started(timeout=5)
    assert head.starts == 3


def test_another_exit_is_an_error_at_once(tmp_path: Path) -> None:
    head = _head(tmp_path, ["broken", "ok"])
    with pytest.raises(SimRayError, match="port 9024 is taken"):
        head.wait_started(timeout=5)
    assert head.starts == 1
