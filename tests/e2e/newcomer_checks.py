"""The newcomer's path to a provisioned cluster, checked on docs/provisioning.md's own run.

The page's block is the path a newcomer types against ``skyshift up``: ``skyshift sim skypilot
up``, the ``skyctl create cluster`` line it printed, a 2-replica job, ``skyctl logs``, the
cluster deleted, ``skyshift sim skypilot down``. tests/e2e/test_docs_skypilot.py runs it as
written (each command must exit 0 without a traceback, within its bound); ``NewcomerChecks``
sees each command's output as it ends and checks what a user would look at besides: the infra
and create line ``up`` prints, the target running and then not, a ``skyctl logs`` right after
the job's POST answering (its output or an error saying why, never a hang), the job Succeeded
with both replicas' lines in its logs. One SkyPilot launch serves both the page and these
checks (issue #27: the suite ran the same flow twice).
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fixtures.docs_run import PageRunner

PAGE = "docs/provisioning.md"
JOB = "hello"
REPLICAS = 2

#: The page's steps these checks hang on, in the order the page runs them.
STEPS = (
    "skyshift sim skypilot up",
    "skyctl create cluster",
    "skyctl create job",
    "skyctl logs hello -f",
    "skyctl logs hello",
    "skyctl delete cluster",
    "skyshift sim skypilot down",
)


@dataclass
class NewcomerChecks:
    """Called after each command of the page (``run_page(..., after=checks)``)."""

    runner: PageRunner
    cwd: Path
    seen: list[str] = field(default_factory=list)
    create_line: str = ""

    def __call__(self, command: str, proc: subprocess.CompletedProcess[str]) -> None:
        line = command.split("#", 1)[0].strip()
        step = next((s for s in STEPS if line == s or line.startswith(s + " ")), None)
        if step is None or (step == "skyctl logs hello" and line != step):
            return
        self.seen.append(step)
        check = {
            "skyshift sim skypilot up": self._up,
            "skyctl create cluster": self._create,
            "skyctl create job": self._early_logs,
            "skyctl logs hello -f": self._succeeded,
            "skyctl logs hello": self._both_ranks,
            "skyshift sim skypilot down": self._down,
        }.get(step)
        if check is not None:
            check(line, proc.stdout)

    def done(self) -> None:
        """Every step was seen, in order: a page edit that drops one fails here."""
        assert self.seen == list(STEPS), f"{PAGE} no longer runs {STEPS}: saw {self.seen}"

    def _run(self, command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.runner.shell(command, self.cwd, timeout)

    def _status(self) -> str:
        return self._run("skyshift sim skypilot status", 60).stdout

    def _up(self, _line: str, out: str) -> None:
        lines = out.splitlines()
        infra = next(x.split(": ", 1)[1] for x in lines if x.startswith("infra: "))
        self.create_line = next(x.strip() for x in lines if "skyctl create cluster" in x)
        assert f"--infra {infra}" in self.create_line, out
        assert "running" in self._status()

    def _create(self, line: str, _out: str) -> None:
        # the newcomer creates the cluster with the line `up` printed
        assert line == self.create_line, f"{PAGE} runs `{line}`, up printed `{self.create_line}`"

    def _early_logs(self, _line: str, _out: str) -> None:
        """Right after the POST (pending or running): text, or a clear error, within bounds."""
        asked = time.monotonic()
        early = self._run(f"skyctl logs {JOB}")
        said = early.stdout + early.stderr
        print(
            f"logs right after the POST: rc {early.returncode} in "
            f"{time.monotonic() - asked:.1f} s: {said[-300:]!r}",
            flush=True,
        )
        assert (
            early.returncode == 0
            or "has not started yet" in said
            or ("did not answer within" in said)
        ), said

    def _succeeded(self, _line: str, _out: str) -> None:
        got = self._run(f"skyctl get job {JOB} -o json")
        assert got.returncode == 0, got.stdout + got.stderr
        phase = (json.loads(got.stdout).get("status") or {}).get("phase")
        assert phase == "Succeeded", f"`skyctl logs {JOB} -f` ended with the job {phase!r}"

    def _both_ranks(self, _line: str, out: str) -> None:
        printed = [x.strip() for x in out.splitlines()]
        for rank in range(REPLICAS):
            assert f"rank {rank}" in printed, out

    def _down(self, _line: str, _out: str) -> None:
        assert "not running" in self._status()
