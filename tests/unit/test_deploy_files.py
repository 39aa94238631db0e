"""deploy/: the container image and the Helm chart start processes that exist (issue 30).

The image cannot be built here (no container runtime): these checks read deploy/Containerfile and
the chart's templates as text. tests/integration/test_helm_chart.py renders the chart with helm
and has a Kubernetes apiserver accept it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
CHART = ROOT / "deploy" / "helm" / "skyshift"
PYTHON_M = re.compile(r"\[python, -m, ([\w.]+)\]")


def _runnable(module: str) -> bool:
    """``python -m module`` runs: a module, or a package with a __main__."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        return False
    if spec.submodule_search_locations is None:
        return True
    return importlib.util.find_spec(f"{module}.__main__") is not None


def _chart_modules() -> set[str]:
    text = "".join(p.read_text() for p in (CHART / "templates").glob("*.yaml"))
    return set(PYTHON_M.findall(text))


def test_the_chart_runs_the_three_processes_and_each_exists() -> None:
    modules = _chart_modules()
    assert modules == {
        "skyshift.api",
        "skyshift.workers.control",
        "skyshift.workers.skylet_manager",
    }
    assert all(_runnable(m) for m in modules), modules


def test_the_image_command_exists() -> None:
    cmd = re.search(r"^CMD (\[.*\])$", CONTAINERFILE.read_text(), re.MULTILINE)
    assert cmd is not None
    argv = yaml.safe_load(cmd.group(1))
    assert argv[:2] == ["python", "-m"] and _runnable(argv[2])


def test_the_image_user_is_the_one_the_chart_runs_as() -> None:
    user = re.search(r"^USER (\d+):(\d+)$", CONTAINERFILE.read_text(), re.MULTILINE)
    assert user is not None
    pod = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]
    assert (int(user.group(1)), int(user.group(2))) == (pod["runAsUser"], pod["runAsGroup"])
    assert pod["runAsNonRoot"] and int(user.group(1)) != 0
