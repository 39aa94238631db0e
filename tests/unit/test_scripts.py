"""Shell scripts that run under ``set -o pipefail`` must not pipe into an early-exiting reader.

``cmd | grep -q x`` (or ``| head``) under pipefail races: the reader exits at its first match,
``cmd`` may then get SIGPIPE writing the rest, and the pipeline fails although ``cmd`` was fine.
That failed ``scripts/build-k8s.sh`` on a fresh machine ("etcd: built but does not report
v3.6.5"; 5 checks in 100 under load). Capture the output first, then match it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EARLY_EXIT = re.compile(r"\|\s*(grep\s+(-\w*q|--quiet)|head\b)")


def _shell_scripts() -> list[Path]:
    out = [p for p in (ROOT / "scripts").rglob("*.sh")]
    out += [ROOT / "dev", ROOT / ".ci" / "run"]
    out += list((ROOT / "skyshift").rglob("*.sh"))
    return sorted(p for p in out if p.is_file())


@pytest.mark.parametrize("script", _shell_scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_early_exit_reader_under_pipefail(script: Path) -> None:
    text = script.read_text()
    if "pipefail" not in text:
        return
    bad = [
        f"{script.name}:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if not line.lstrip().startswith("#") and EARLY_EXIT.search(line)
    ]
    assert not bad, "pipes into an early-exiting reader under pipefail:\n" + "\n".join(bad)


def test_the_race_is_real() -> None:
    """The pattern the check forbids does fail under pipefail when the writer outlives grep."""
    script = "set -o pipefail; (echo match; sleep 0.2; seq 1 200000) | grep -q match"
    rc = subprocess.run(["bash", "-c", script], check=False).returncode
    assert rc != 0  # SIGPIPE of the writer fails the pipeline although grep matched


@pytest.mark.parametrize("script", _shell_scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_parse(script: Path) -> None:
    shell = "sh" if script.suffix == ".sh" and "bash" not in script.read_text()[:40] else "bash"
    subprocess.run([shell, "-n", str(script)], check=True)
