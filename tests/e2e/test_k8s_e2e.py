"""Kubernetes end to end: Jobs through the whole stack onto three real kube-apiservers.

A private ``skyshift up`` (Temporal dev server, etcd, API with auth on, control worker, skylet
manager) on free ports, the session's simulated clusters (``k8s_clusters``: real kube-apiserver,
scheduler and controller manager with kwok nodes, 2 nodes x 8 CPUs each), attached the way a user
does it: ``skyctl create cluster --manager k8 --config KUBECONFIG --all-contexts`` (one Cluster
per context). Jobs are created through the API with the admin token; logs and exec go through
``skyctl``; what each cluster really holds is read from its apiserver by the adapter's labels.

Sizes: a 3-CPU replica fits twice on a node, so each cluster holds 4 of them and the 12-replica
job can only run spread over all three. The clusters carry ``e2e-k8s=<run>`` (every job filters on
it, so nothing lands on the stack's own ``local`` cluster) plus ``zone`` and ``tier`` labels for
the placement tests. Every wait is a poll with a deadline; nothing asserts how long anything took.
Each test deletes its jobs afterwards (and waits until they are gone) so the next starts with
empty clusters; the apiserver test runs last because it is the most disruptive.

Three tests guard lifecycle bugs these tests found (fixed in 459fda0): attaching one context with
``--config``/``--context`` (``manager_config`` ignored ``spec.config_path``/``spec.context``),
Always jobs as Deployments (every replica went to the adapter as restartPolicy Never), and a job
that finishes while a cluster is away (its leftovers there were never deleted, and were counted
into the finished job's status).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from click.testing import CliRunner

from skyshift.cli.main import cli
from skyshift.client.async_client import AsyncSkyShiftClient
from skyshift.compat.kubernetes.objects import JOB_UID, parse_quantity
from skyshift.devstack.sim.k8s import SimK8sCluster
from tests.e2e.k8s_helpers import (
    K8sE2E,
    Obj,
    counts,
    expected_spread,
    holds,
    live,
    names_of,
    placement,
    pod_phase,
    ranks_of,
)
from tests.fixtures.auth import admin_token
from tests.fixtures.stack import DevStack, stack_up

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ZONES = {"sim-k8s-1": ("a", "gold"), "sim-k8s-2": ("b", "silver"), "sim-k8s-3": ("c", "silver")}
CPUS, MEMORY = 3.0, 1000.0  # per replica: 2 per 8-CPU node, 4 per cluster


# ---- the stack ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def k8s_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    """``skyshift up`` in a private home on free ports (``skyshift down`` afterwards). KUBECONFIG
    points nowhere, so a cluster without a kubeconfig never reaches a developer's real one."""
    home = tmp_path_factory.mktemp("e2e-k8s-home")
    with stack_up(home, {"KUBECONFIG": str(home / "no-such-kubeconfig")}) as stack:
        yield stack


@pytest_asyncio.fixture(scope="module")
async def e2e(k8s_stack: DevStack, k8s_clusters: list[SimK8sCluster],
              tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[K8sE2E]:
    """The stack, logged in as admin, with every context of the simulated clusters' kubeconfig
    attached by ``skyctl create cluster --all-contexts``, labelled, Ready and empty."""
    token = admin_token(k8s_stack.api_url, k8s_stack.home)
    api = AsyncSkyShiftClient(k8s_stack.api_url, token=token, namespace="default", timeout=60)
    sims = {c.context: c for c in k8s_clusters}
    env = K8sE2E(k8s_stack, token, api, sims, tmp_path_factory.mktemp("e2e-k8s-cli"))
    try:
        kubeconfig = k8s_clusters[0].kubeconfig
        attach = await env.skyctl("create", "cluster", "--manager", "k8", "--config",
                                  str(kubeconfig), "--all-contexts", "-l", "e2e-k8s", env.run_id)
        assert attach.returncode == 0, attach.stderr
        for name in sims:
            assert f"cluster/{name} created (context {name})" in attach.stdout, attach.stdout
            zone, tier = ZONES[name]
            await api.patch("clusters", name, None,
                            {"metadata": {"labels": {"zone": zone, "tier": tier}}})
        for name in sims:
            await env.phase("clusters", name, "Ready", timeout=120)
        await _wait_empty(env)
        yield env
    finally:
        try:
            await env.cleanup_jobs()
        finally:
            for sim in k8s_clusters:
                if sim.pid("kube-apiserver") is None:
                    await asyncio.to_thread(sim.start_apiserver)
            for name in sims:
                await env.delete("clusters", name)
            for name in sims:
                await env.gone("clusters", name, timeout=120)
            await api.aclose()


async def _wait_empty(env: K8sE2E) -> None:
    """Every node of every cluster fully free (leftovers of earlier tests are cleaned up by the
    skylets' orphan removal), so the sizes below hold."""

    async def free() -> bool:
        for name in env.sims:
            obj = await env.get("clusters", name)
            status = (obj or {}).get("status") or {}
            cap, alloc = status.get("capacity") or {}, status.get("allocatable") or {}
            if not cap or any(alloc.get(n, {}).get("cpus") != c["cpus"] for n, c in cap.items()):
                return False
        return True

    await env.wait("all simulated nodes free", free, timeout=120)


@pytest_asyncio.fixture
async def k8(e2e: K8sE2E) -> AsyncIterator[K8sE2E]:
    """The module's environment; the test's jobs are deleted (and gone) afterwards."""
    try:
        yield e2e
    finally:
        await e2e.cleanup_jobs()
        await _wait_empty(e2e)


async def room(env: K8sE2E, clusters: list[str], cpus: float = CPUS,
               memory: float = MEMORY) -> dict[str, int]:
    out = {}
    for name in clusters:
        obj = await env.get("clusters", name)
        assert obj is not None
        out[name] = holds(obj, cpus, memory)
    return out


async def live_pods(env: K8sE2E, uid: str) -> dict[str, list[Obj]]:
    return {c: live(p) for c, p in (await env.pods_by_cluster(uid)).items()}


# ---- 0. attaching clusters with skyctl --------------------------------------------------------


def test_all_contexts_dry_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No server needed: one manifest per context, current first, names made DNS-1123, the
    kubeconfig made absolute and handed to the adapter in spec.config."""
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
           "current-context": "Kind_Dev.2",
           "contexts": [{"name": n, "context": {"cluster": n, "user": n}}
                        for n in ("sim-k8s-1", "Kind_Dev.2")]}
    (tmp_path / "kc.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.chdir(tmp_path)  # --config given relative to the working directory
    runner = CliRunner()
    out = runner.invoke(cli, ["create", "cluster", "--manager", "k8", "--config", "kc.yaml",
                              "--all-contexts", "-l", "site", "lab", "--dry-run"])
    assert out.exit_code == 0, out.output
    docs = list(yaml.safe_load_all(out.output))
    path = str((tmp_path / "kc.yaml").resolve())
    assert [d["metadata"]["name"] for d in docs] == ["kind-dev-2", "sim-k8s-1"]
    assert [d["metadata"]["labels"] for d in docs] == [{"site": "lab"}] * 2
    assert [d["spec"]["config"] for d in docs] == [
        {"kubeconfig": path, "context": "Kind_Dev.2"},
        {"kubeconfig": path, "context": "sim-k8s-1"}]
    prefixed = runner.invoke(cli, ["create", "cluster", "lab", "--config", "kc.yaml",
                                   "--all-contexts", "--dry-run"])
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(prefixed.output)] == [
        "lab-kind-dev-2", "lab-sim-k8s-1"]
    for bad, why in ((["--manager", "slurm"], "use --manager k8"),
                     (["--context", "x"], "exclude each other"),
                     (["--provision"], "drop --provision")):
        refused = runner.invoke(cli, ["create", "cluster", "--config", "kc.yaml",
                                      "--all-contexts", *bad])
        assert refused.exit_code == 2 and why in refused.output, refused.output
    missing = runner.invoke(cli, ["create", "cluster", "--manager", "k8"])
    assert missing.exit_code == 2 and "Missing argument 'NAME'" in missing.output


async def test_skyctl_attaches_one_context(k8: K8sE2E) -> None:
    """``skyctl create cluster NAME --manager k8 --config KUBECONFIG --context CTX`` attaches
    that context's cluster. The CLI writes ``spec.config_path``/``spec.context``;
    ``manager_config`` once dropped them and the adapter fell back to the default kubeconfig.
    sim-k8s-3 is attached already (as ``sim-k8s-3``), so the new name reaches a physical
    cluster another Cluster has (issue 31): it must end in Error naming sim-k8s-3, with
    sim-k8s-3's identity (the context was honoured) and no capacity of its own."""
    sim = k8.sims["sim-k8s-3"]
    name = f"one-{k8.run_id}"
    made = await k8.skyctl("create", "cluster", name, "--manager", "k8", "--config",
                           str(sim.kubeconfig), "--context", sim.context)
    assert made.returncode == 0, made.stderr
    try:
        obj = await k8.phase("clusters", name, "Ready", "Error", timeout=90)
        status = obj["status"]
        assert status["phase"] == "Error", status
        assert "same physical cluster as cluster sim-k8s-3" in status["message"], status
        held = await k8.get("clusters", "sim-k8s-3")
        assert held is not None and held["status"]["phase"] == "Ready"
        assert status["identity"] == held["status"]["identity"] != ""
        assert not status.get("allocatable")
    finally:
        await k8.delete("clusters", name)
        await k8.gone("clusters", name, timeout=120)


async def test_skyctl_attaches_by_name_like_the_original(k8: K8sE2E) -> None:
    """Issue 31: without --context the original took the cluster's name as its context. A
    name no context has, in a kubeconfig of several, is refused with the contexts listed (it
    used to take the current context, i.e. sim-k8s-1 a second time): by skyctl at once, and
    by the skylet for a Cluster created through the API."""
    sim = k8.sims["sim-k8s-1"]
    name = f"byname-{k8.run_id}"
    refused = await k8.skyctl("create", "cluster", name, "--manager", "k8", "--config",
                              str(sim.kubeconfig))
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert "--context" in refused.stderr and all(c in refused.stderr for c in k8.sims)
    assert await k8.get("clusters", name) is None
    await k8.api.create({"kind": "Cluster", "metadata": {"name": name},
                         "spec": {"manager": "k8", "config_path": str(sim.kubeconfig)}})
    try:
        obj = await k8.phase("clusters", name, "Ready", "Error", timeout=90)
        message = obj["status"]["message"]
        assert obj["status"]["phase"] == "Error", obj["status"]
        assert "--context" in message and all(c in message for c in k8.sims), message
    finally:
        await k8.delete("clusters", name)
        await k8.gone("clusters", name, timeout=120)


# ---- 1. twelve replicas spread by capacity ------------------------------------------------------


async def test_twelve_replicas_spread_over_three_clusters(k8: K8sE2E) -> None:
    clusters = sorted(k8.sims)
    free = await room(k8, clusters)
    assert all(0 < n < 12 for n in free.values()), free  # no single cluster takes them all
    assert sum(free.values()) >= 12, free
    want = expected_spread(free, 12)
    name = k8.job_name("wide")
    job = await k8.submit(name, replicas=12, cpus=CPUS, memory=MEMORY, duration="25s")
    uid = job["metadata"]["uid"]

    running = await k8.phase("jobs", name, "Running", timeout=120)
    assert placement(running) == want, running["status"]

    async def all_running() -> Obj | None:
        obj = await k8.get("jobs", name)
        ok = obj and all(counts(obj, c).get("Running") == n for c, n in want.items())
        return obj if ok else None

    await k8.wait("per-cluster Running counts in status", all_running, timeout=60)
    # what each apiserver really has: its share of the ranks, each rank once, all bound
    pods = await live_pods(k8, uid)
    assert {c: len(p) for c, p in pods.items() if p} == want
    assert sorted(r for p in pods.values() for r in ranks_of(p)) == list(range(12))
    for cluster, cluster_pods in pods.items():
        for pod in cluster_pods:
            assert pod["spec"]["nodeName"].startswith(f"{cluster}-node-"), pod["spec"]
            requests = pod["spec"]["containers"][0]["resources"]["requests"]
            assert parse_quantity(requests["cpu"]) == CPUS, requests

    done = await k8.phase("jobs", name, "Succeeded", timeout=120)
    assert {c: counts(done, c).get("Succeeded") for c in want} == want, done["status"]
    assert done["status"]["restarts"] == 0
    finished = await k8.pods_by_cluster(uid)
    assert {c: sorted(pod_phase(p) for p in ps) for c, ps in finished.items() if ps} == {
        c: ["Succeeded"] * n for c, n in want.items()}


# ---- 2. placement filters and preferences -----------------------------------------------------


async def test_label_filter_excluding_filter_and_weighted_preference(k8: K8sE2E) -> None:
    run = k8.run_id
    # a label filter: only the silver clusters (2 and 3); headroom ties go by name
    silver = k8.job_name("silver")
    a = await k8.submit(silver, replicas=2, cpus=1, filters=[
        {"matchLabels": {"e2e-k8s": run, "tier": "silver"}}])
    # a filter that excludes sim-k8s-2 (zone b), although a heavy preference asks for it; the
    # weights then decide between the two clusters left: zone c (10) beats tier gold (5) ...
    not_b = [{"matchLabels": {"e2e-k8s": run},
              "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}]
    c_wins = k8.job_name("pref-c")
    b = await k8.submit(c_wins, replicas=2, cpus=1, filters=not_b, preferences=[
        {"matchLabels": {"zone": "b"}, "weight": 100},
        {"matchLabels": {"zone": "c"}, "weight": 10},
        {"matchLabels": {"tier": "gold"}, "weight": 5}])
    # ... and with the weights the other way round, tier gold (sim-k8s-1) wins
    gold_wins = k8.job_name("pref-gold")
    c = await k8.submit(gold_wins, replicas=2, cpus=1, filters=not_b, preferences=[
        {"matchLabels": {"zone": "b"}, "weight": 100},
        {"matchLabels": {"zone": "c"}, "weight": 5},
        {"matchLabels": {"tier": "gold"}, "weight": 10}])

    expected = {silver: {"sim-k8s-2": 2}, c_wins: {"sim-k8s-3": 2},
                gold_wins: {"sim-k8s-1": 2}}
    for job_name, want in expected.items():
        running = await k8.phase("jobs", job_name, "Running", timeout=120)
        assert placement(running) == want, (job_name, running["status"])
    for job, want in zip((a, b, c), expected.values(), strict=True):
        uid = job["metadata"]["uid"]

        async def placed_pods(uid: str = uid) -> dict[str, list[Obj]] | None:
            pods = await live_pods(k8, uid)
            return pods if sum(len(p) for p in pods.values()) == 2 else None

        pods = await k8.wait(f"pods of {job['metadata']['name']}", placed_pods, timeout=60)
        assert {cl: len(p) for cl, p in pods.items() if p} == want
        assert not pods["sim-k8s-2"] or "sim-k8s-2" in want  # the excluded cluster got nothing

    # a job only the excluded cluster could take stays Pending and says why
    stuck = k8.job_name("only-b")
    await k8.submit(stuck, cpus=1, filters=[
        {"matchLabels": {"e2e-k8s": run, "zone": "b"},
         "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}])

    async def explained() -> Obj | None:
        obj = await k8.get("jobs", stuck)
        reasons = ((obj or {}).get("status") or {}).get("schedulerReasons") or {}
        return obj if all("placement filters" in reasons.get(n, "") for n in k8.sims) else None

    pending = await k8.wait("pending reasons of the unplaceable job", explained, timeout=60)
    assert pending["status"]["phase"] == "Pending"
    assert not placement(pending)


# ---- 3. logs and exec through skyctl -----------------------------------------------------------


async def test_skyctl_logs_and_exec_reach_the_pods(k8: K8sE2E) -> None:
    name = k8.job_name("shell")
    # 5 CPUs: one replica per node, so rank 0 and rank 1 are two pods on two nodes
    job = await k8.submit(name, replicas=2, cpus=5)
    running = await k8.phase("jobs", name, "Running", timeout=120)
    [cluster] = placement(running)
    sim = k8.sims[cluster]
    replicas = names_of(job, range(2))

    async def pods_running() -> bool:
        pods = live((await k8.pods_by_cluster(job["metadata"]["uid"], [cluster]))[cluster])
        return sorted(pod_phase(p) for p in pods) == ["Running", "Running"]

    await k8.wait("both pods Running on the apiserver", pods_running, timeout=60)

    logs = await k8.skyctl("logs", name)
    assert logs.returncode == 0, logs.stderr
    for replica in replicas:
        assert f"==> {replica} <==" in logs.stdout, logs.stdout
    assert f"simulated container on kwok cluster {cluster}" in logs.stdout, logs.stdout
    one = await k8.skyctl("logs", name, "--tail", "1")
    assert one.returncode == 0, one.stderr

    # output and exit code come back (kwok runs the command on this machine, in <cluster>/exec)
    ran = await k8.skyctl("exec", name, "--", "sh", "-c",
                          "echo out-$((6 * 7)); echo err-side >&2; exit 3")
    assert ran.returncode == 3, (ran.stdout, ran.stderr)
    assert "out-42" in ran.stdout
    assert "err-side" in ran.stderr
    where = await k8.skyctl("exec", name, "--rank", "1", "--", "pwd")
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip() == str(sim.dir / "exec")
    both = await k8.skyctl("exec", name, "-q", "-t", "0", "-t", replicas[1], "--", "echo", "hi")
    assert both.returncode == 0, both.stderr
    assert both.stdout.split() == ["hi", "hi"]


# ---- 4. deletion removes everything everywhere ------------------------------------------------


async def test_delete_removes_every_object_on_every_cluster(k8: K8sE2E) -> None:
    free = await room(k8, sorted(k8.sims))
    want = expected_spread(free, 6)
    assert len(want) == 2, want  # spread over two clusters
    name = k8.job_name("forever")
    job = await k8.submit(name, replicas=6, cpus=CPUS, memory=MEMORY, restart="Always")
    uid = job["metadata"]["uid"]
    running = await k8.phase("jobs", name, "Running", timeout=120)
    assert placement(running) == want

    async def created() -> dict[str, dict[str, list[str]]] | None:
        objs = await k8.everything(uid)
        return objs if all(len(objs[c]["pods"]) == n for c, n in want.items()) else None

    before = await k8.wait("the job's pods on its clusters", created, timeout=60)
    assert sum(len(o) for c in before.values() for o in c.values()) >= 6

    await k8.api.delete("jobs", name)
    k8.jobs.remove(name)
    await k8.gone("jobs", name, timeout=120)

    async def nothing_left() -> bool:
        objs = await k8.everything(uid)
        return not any(names for kinds in objs.values() for names in kinds.values())

    await k8.wait("no pod, Deployment or ReplicaSet of the job on any cluster", nothing_left,
                  timeout=90)
    # the clusters' capacity is all free again
    await _wait_empty(k8)


async def test_always_job_runs_as_deployments(k8: K8sE2E) -> None:
    """The compatibility layer (docs/architecture.md) and the adapter: restartPolicy Always -> one
    single-replica Deployment per replica, so Kubernetes restarts it (``jobstate.replica_spec``
    once handed every replica to the adapter as restartPolicy Never)."""
    name = k8.job_name("always")
    job = await k8.submit(name, replicas=2, cpus=1, restart="Always")
    uid = job["metadata"]["uid"]
    running = await k8.phase("jobs", name, "Running", timeout=120)
    [cluster] = placement(running)

    async def pods_up() -> list[Obj] | None:
        pods = live(await k8.k8s(cluster, "pods", uid))
        return pods if len(pods) == 2 else None

    pods = await k8.wait("two pods", pods_up, timeout=60)
    deployments = await k8.k8s(cluster, "deployments", uid)
    assert sorted(d["metadata"]["name"] for d in deployments) == names_of(job, range(2)), (
        f"no Deployments for an Always job; pods are owned by "
        f"{[p['metadata'].get('ownerReferences') for p in pods]} with restartPolicy "
        f"{[p['spec']['restartPolicy'] for p in pods]}")
    assert all(p["spec"]["restartPolicy"] == "Always" for p in pods)


# ---- 5. an apiserver dies: Error, failover, completion, cleanup ---------------------------------


async def test_apiserver_killed_fails_over_completes_and_cleans_up(k8: K8sE2E) -> None:
    free = await room(k8, sorted(k8.sims))
    want = expected_spread(free, 6)
    assert len(want) == 2, want
    name = k8.job_name("mover")
    job = await k8.submit(name, replicas=6, cpus=CPUS, memory=MEMORY, duration="40s")
    uid = job["metadata"]["uid"]
    running = await k8.phase("jobs", name, "Running", timeout=120)
    assert placement(running) == want
    victim = max(want, key=lambda c: (want[c], c))  # the cluster with the most replicas
    sim = k8.sims[victim]

    async def pods_running() -> bool:
        pods = await live_pods(k8, uid)
        return all(sorted(pod_phase(p) for p in pods[c]) == ["Running"] * n
                   for c, n in want.items())

    await k8.wait("the job's pods Running", pods_running, timeout=60)
    victim_ranks = ranks_of((await k8.pods_by_cluster(uid, [victim]))[victim])
    await asyncio.to_thread(sim.stop_apiserver)
    try:
        error = await k8.phase("clusters", victim, "Error", timeout=90)
        message = error["status"]["message"]
        assert "unreachable" in message and victim in message, message

        async def moved() -> Obj | None:
            obj = await k8.get("jobs", name)
            if not obj or victim in placement(obj) or sum(placement(obj).values()) != 6:
                return None
            started = sum(counts(obj, c).get("Running", 0) + counts(obj, c).get("Succeeded", 0)
                          for c in placement(obj))
            return obj if started == 6 else None

        moved_job = await k8.wait("replicas running on the other clusters", moved, timeout=120)
        assert moved_job["status"]["phase"] == "Running"
        # the moved ranks run where the scheduler put them, each exactly once
        survivors = sorted(placement(moved_job))
        pods = await k8.pods_by_cluster(uid, survivors)
        ranks = sorted(r for c in survivors for r in ranks_of(live(pods[c])))
        assert ranks == list(range(6)), {c: ranks_of(pods[c]) for c in survivors}
    finally:
        await asyncio.to_thread(sim.start_apiserver)

    await k8.phase("clusters", victim, "Ready", timeout=180)

    async def leftovers_gone() -> bool:
        return not await k8.k8s(victim, "pods", uid)

    await k8.wait(f"the moved replicas' pods deleted on {victim}", leftovers_gone, timeout=120)

    done = await k8.phase("jobs", name, "Succeeded", timeout=180)
    final = placement(done)
    assert victim not in final and sum(final.values()) == 6, done["status"]
    assert {c: counts(done, c).get("Succeeded") for c in final} == final, done["status"]
    assert not any(counts(done, victim).values()), done["status"]
    # every rank succeeded exactly once, on the cluster the status names
    finished = await k8.pods_by_cluster(uid)
    assert not finished[victim]
    assert sorted(r for c in final for r in ranks_of(finished[c])) == list(range(6))
    assert {pod_phase(p) for c in final for p in finished[c]} == {"Succeeded"}
    assert set(victim_ranks) <= {r for c in final for r in ranks_of(finished[c])}
    for cluster_pods in finished.values():
        for pod in cluster_pods:
            assert pod["metadata"]["labels"][JOB_UID] == uid


async def test_job_finished_during_outage_leaves_nothing_on_the_returning_cluster(
    k8: K8sE2E,
) -> None:
    """The same fault, but the job finishes elsewhere before the apiserver returns. The leftovers
    were once deleted only by the job's workflow on the cluster's "recovered" signal, after that
    workflow had ended; the skylet's orphan cleanup spared them because the job object still
    existed, and counted them into the finished job's status (10 Succeeded of 6 replicas)."""
    free = await room(k8, sorted(k8.sims))
    want = expected_spread(free, 6)
    name = k8.job_name("outlived")
    job = await k8.submit(name, replicas=6, cpus=CPUS, memory=MEMORY, duration="15s")
    uid = job["metadata"]["uid"]
    await k8.phase("jobs", name, "Running", timeout=120)
    victim = max(want, key=lambda c: (want[c], c))
    sim = k8.sims[victim]

    async def pods_running() -> bool:
        pods = await live_pods(k8, uid)
        return all(sorted(pod_phase(p) for p in pods[c]) == ["Running"] * n
                   for c, n in want.items())

    await k8.wait("the job's pods Running", pods_running, timeout=60)
    await asyncio.to_thread(sim.stop_apiserver)
    try:
        await k8.phase("clusters", victim, "Error", timeout=90)
        done = await k8.phase("jobs", name, "Succeeded", timeout=180)
        assert victim not in placement(done), done["status"]
    finally:
        await asyncio.to_thread(sim.start_apiserver)
    await k8.phase("clusters", victim, "Ready", timeout=180)

    async def leftovers_gone() -> bool:
        return not await k8.k8s(victim, "pods", uid)

    problems = []
    try:
        await k8.wait(f"the moved replicas' pods deleted on {victim}", leftovers_gone,
                      timeout=90)
    except AssertionError as exc:
        left = await k8.k8s(victim, "pods", uid)
        problems.append(f"{exc}: {[(p['metadata']['name'], pod_phase(p)) for p in left]}")
    after = await k8.get("jobs", name)
    assert after is not None
    if any(counts(after, victim).values()):
        problems.append(f"the finished job counts replicas on {victim}: "
                        f"{after['status']['replicaStatus']}")
    assert not problems, problems
