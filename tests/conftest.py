"""Shared fixtures: each component's fixtures live in tests/fixtures/<component>.py.

``./dev test`` runs the suite on several pytest-xdist workers (``-n``, ``--dist loadgroup``;
``SKYSHIFT_TEST_WORKERS=0`` runs it serially). Every worker is a session of its own, with its
own session fixtures, tmp dirs and ports (tests/fixtures/ports.py), so what is one per machine,
or costly enough to start only once, must stay in one worker: ``pytest_collection_modifyitems``
below gives such tests an ``xdist_group`` mark, and loadgroup sends a group to one worker, in
collection order. The rest are spread one test at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import pytest

from tests.fixtures.balancers import stop_balancers_under

# The control workers of the tests' stacks leave SkyPilot's runner to the first launch: few tests
# launch, every stack warming one would cost seconds of CPU, and runners of SkyPilot's user that
# other stacks hold would be the SkyPilot bed's leftovers (tests/unit/test_warm_provisioner.py)
os.environ.setdefault("SKYSHIFT_WARM_PROVISIONER", "0")

pytest_plugins = [
    "tests.fixtures.etcd",
    "tests.fixtures.temporal",
    "tests.fixtures.stack",
    "tests.fixtures.api",
    "tests.fixtures.slurm",
    "tests.fixtures.k8s",
    "tests.fixtures.auth",
    "tests.fixtures.skypilot",
]

#: Fixtures whose users share one worker. skypilot: the bed is one per machine (a lock, the user
#: skyshift-sky; a second session's fixture would wait for the first to end). slurm, k8s, ray:
#: session beds that take minutes of CPU to start (ray: heads are CPU hungry, at most two at once).
#: browser: one Chromium at a time on a loaded machine.
FIXTURE_GROUPS = {
    "sky_slurm": "skypilot",
    "sky_client": "skypilot",
    "sky_cluster": "skypilot",
    "slurm_clusters": "slurm",
    "slurm_sshd": "slurm",
    "k8s_clusters": "k8s",
    "ray_cluster": "ray",
    "fresh_ray_cluster": "ray",
    "browser": "browser",
}

#: Modules that use such a resource without its fixture: the SkyPilot bed through
#: ``skyshift sim skypilot up`` (those must also run before the session fixture takes the bed,
#: which collection order inside the group keeps), Ray heads through ``skyshift sim ray``.
MODULE_GROUPS = {
    "tests/e2e/test_docs_skypilot.py": "skypilot",
    "tests/integration/test_sim_ray.py": "ray",
    "tests/integration/test_cluster_identity_ray.py": "ray",
    "tests/integration/test_workload_isolation_ray.py": "ray",
}

_SHARED_SCOPES = ("module", "class", "package")


def _labels(item: pytest.Item) -> set[str]:
    """What ties ``item`` to other tests: groups of its fixtures and module, and its module when
    it uses a module-scoped fixture (a stack for the module: started once, and the tests of such
    a module may rely on one another's objects)."""
    module = item.nodeid.split("::", 1)[0]
    names = getattr(item, "fixturenames", ())  # a pytest.Function's; other items have none
    labels = {FIXTURE_GROUPS[name] for name in names if name in FIXTURE_GROUPS}
    if module in MODULE_GROUPS:
        labels.add(MODULE_GROUPS[module])
    defs = getattr(item, "_fixtureinfo", None)
    for fixturedefs in (defs.name2fixturedefs.values() if defs else ()):
        if any(d.scope in _SHARED_SCOPES for d in fixturedefs):
            labels.add(f"module:{module}")
    return labels


def _merged(label_sets: Iterable[set[str]]) -> dict[str, str]:
    """Label -> group name, labels used by one test together being one group (a test on the
    Slurm and the Kubernetes beds puts both beds' tests in one worker)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for labels in label_sets:
        first, *rest = sorted(labels)
        for other in [first, *rest]:
            parent[find(other)] = find(first)
    members: dict[str, list[str]] = {}
    for label in list(parent):
        members.setdefault(find(label), []).append(label)
    names = {}
    for group in members.values():
        beds = sorted(x for x in group if not x.startswith("module:"))
        name = "+".join(beds) if beds else min(group).removeprefix("module:")
        names.update(dict.fromkeys(group, name))
    return names


#: Groups that go to the workers first (./dev test keeps the collection order of the groups,
#: --no-loadscope-reorder): the longest, so that it is not what the run waits for at the end.
FIRST_GROUPS = ("skypilot",)

#: After them, the longest work first (a worker takes the next unit when it has at most two
#: tests left, so a long unit started last ends the run alone): the other beds' groups, the
#: fault and end-to-end tests (tens of seconds each), the integration modules that share a
#: stack, the other integration tests, the workflow tests, and the unit tests (short: they fill
#: the gaps at the end).
_DIR_RANKS = {"tests/faults/": 2, "tests/e2e/": 2, "tests/integration/": 4,
              "tests/workflows/": 5, "tests/unit/": 6}
_BEDS = {*FIXTURE_GROUPS.values(), *MODULE_GROUPS.values()}


def _rank(nodeid: str, group: str) -> int:
    """Where a test's unit goes in a parallel run's queue (lower first)."""
    beds = set(group.split("+")) & _BEDS
    if beds & set(FIRST_GROUPS):
        return 0
    if beds:
        return 1
    rank = next((r for d, r in _DIR_RANKS.items() if nodeid.startswith(d)), 4)
    return 3 if group and rank == 4 else rank  # an integration module's own stack


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    labels = {item.nodeid: _labels(item) for item in items}
    names = _merged(x for x in labels.values() if x)
    group: dict[str, str] = {}
    for item in items:
        if mine := labels[item.nodeid]:
            group[item.nodeid] = names[next(iter(mine))]
            item.add_marker(pytest.mark.xdist_group(group[item.nodeid]))
    if hasattr(config, "workerinput"):  # an xdist worker; a serial run keeps its order
        items.sort(key=lambda item: _rank(item.nodeid, group.get(item.nodeid, "")))


class _LoadGroupIds:
    """pytest-xdist 3.8 tells the controller a test's group by appending ``@<group>`` to its
    nodeid (``item._nodeid``), which pytest >= 9.2 no longer reads (pytest-xdist issue 1386):
    every test would be spread alone. Append it the same way where it did not take."""

    @pytest.hookimpl(trylast=True)  # after xdist's own hook
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        try:
            from _pytest.nodeid import NodeId  # pytest >= 9.2; before, xdist's own way works
        except ImportError:
            return
        if not config.getvalue("loadgroup"):
            return
        for item in items:
            names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                            for m in item.iter_markers("xdist_group")})
            suffix = "@" + "_".join(names)
            if names and not item.nodeid.endswith(suffix):
                item._id = NodeId.parse(item.nodeid + suffix)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(_LoadGroupIds(), "skyshift-loadgroup-ids")


# ---- HAProxies of local clusters' services ----------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def _no_haproxy_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of the session (of each xdist worker), stop the HAProxies of the local
    clusters whose state is under this session's tmp dir: a stack's ``skyshift down`` leaves
    services running, and as root their runtime dirs would pile up in /run/skyshift/lb."""
    yield
    stop_balancers_under(tmp_path_factory.getbasetemp())
