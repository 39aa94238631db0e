"""A service spanning local clusters, with real traffic: HAProxy on the primary cluster balances
over the replicas there and on the clusters it reaches through a Ready Link; when a replica
moves to another linked cluster (its cluster lost), traffic follows it and no request fails;
when the old process then dies, health checks keep every later request on live replicas. The
cluster at the other end of the Link gets the service too (its own HAProxy, its own address),
in front of the same replicas, until the Link goes."""

from __future__ import annotations

import asyncio
import threading
import urllib.request
from typing import Any

import pytest

from skyshift.activities import spawn
from skyshift.compat.local import proc as local_proc
from skyshift.contract.names import SIG_REFRESH, service_workflow_id
from skyshift.contract.services import Refresh
from tests.fixtures.require import require_binary
from tests.fixtures.temporal import LifecycleStack
from tests.integration.test_service_lifecycle import add_service, delete_and_wait_gone

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

# answers "<replica> <working directory>": the directory is under the cluster's state_dir
SERVE = ('mkdir -p site && echo "$SKYSHIFT_REPLICA $(pwd)" > site/index.html && '
         "exec python3 -m http.server $SKYSHIFT_PORT_8080 --bind 127.0.0.1 -d site")


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode().strip())


async def served(url: str, n: int = 30) -> set[str]:
    return set(await asyncio.gather(*(asyncio.to_thread(get, url) for _ in range(n))))


async def web(s: LifecycleStack, name: str, zone: str, app: str = "web") -> None:
    await s.submit(name, SERVE, labels={"app": app}, cpus=1, ports=[8080],
                   placement={"filters": [{"matchLabels": {"zone": zone}}]})


async def linked(s: LifecycleStack, source: str, target: str) -> None:
    await spawn.create_and_start(s.store, s.client, {
        "kind": "Link", "metadata": {"name": f"{source}-{target}"},
        "spec": {"source_cluster": source, "target_cluster": target}})

    async def ready() -> bool:
        obj = await s.get("links", f"{source}-{target}")
        return ((obj or {}).get("status") or {}).get("phase") == "Ready"

    await s.wait(f"link {source}->{target} Ready", ready)


async def test_service_balances_over_linked_clusters_and_follows_a_move(
    lifecycle_stack: LifecycleStack,
) -> None:
    require_binary("haproxy", "apt-get install haproxy")
    s = lifecycle_stack
    s.start_in_process()
    for name, zone in (("mesh-a", "home"), ("mesh-b", "remote"), ("mesh-c", "remote")):
        await s.add_cluster(name, cpus=1, labels={"zone": zone})
        await s.cluster_phase(name, "Ready")
    await linked(s, "mesh-a", "mesh-b")
    await linked(s, "mesh-a", "mesh-c")
    await web(s, "web-home", "home")
    await web(s, "web-away", "remote")
    home = await s.job_phase("web-home", "Running")
    away = await s.job_phase("web-away", "Running")
    first = next(iter(away["status"]["placement"]))
    other = "mesh-c" if first == "mesh-b" else "mesh-b"

    await add_service(s, "web", selector={"app": "web"}, primaryCluster="mesh-a")

    async def fronting(n: int) -> dict[str, Any] | None:
        obj = await s.get("services", "web", "default")
        st = (obj or {}).get("status") or {}
        return obj if st.get("phase") == "Ready" and f"in front of {n} " in st.get(
            "message", "") else None

    svc = await s.wait("the service in front of both replicas", lambda: fronting(2), 60)
    ep = await s.get("endpoints", "web", "default")
    assert ep is not None
    listed = ep["spec"]["endpoints"]
    assert len(listed["mesh-a"]["addresses"]) == 1 and len(listed[first]["addresses"]) == 1
    assert listed[first]["exposed_to_cluster"]  # reached through the link
    url = f"http://{svc['status']['clusterIP']}:80/"
    names = {f"{j['metadata']['name']}-{j['metadata']['uid'][:8]}-0" for j in (home, away)}
    await asyncio.sleep(1)  # HAProxy's first health checks
    answers = await served(url)
    assert {a.split()[0] for a in answers} == names  # both clusters' replicas, one address
    assert any(f"/{first}/" in a for a in answers)

    # the remote replica moves: its cluster is lost, the job runs it on the other linked one;
    # requests go on the whole time, and none fails
    failures: list[str] = []
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            try:
                get(url)
            except OSError as err:
                failures.append(str(err))

    worker = threading.Thread(target=hammer)
    worker.start()
    try:
        (s.state_dirs[first] / "OFFLINE").touch()

        async def moved() -> dict[str, Any] | None:
            job = await s.get("jobs", "web-away")
            st = (job or {}).get("status") or {}
            running = ((st.get("replicaStatus") or {}).get(other) or {}).get("Running")
            return job if st.get("placement") == {other: 1} and running else None

        await s.wait("the replica running on the other linked cluster", moved, 90)
        handle = s.client.get_workflow_handle(service_workflow_id("default", "web"))
        await handle.signal(SIG_REFRESH, Refresh())

        async def follows() -> bool:
            return any(f"/{other}/" in a for a in await served(url, 20))

        await s.wait("traffic reaching the moved replica", follows, 60)
    finally:
        stop.set()
        worker.join()
    assert failures == []

    # the lost cluster's process then dies for good (requests in flight to it die with it):
    # the health checks take it out, and the requests after that all reach live replicas
    for rdir in (s.state_dirs[first] / "replicas").iterdir():
        pid = local_proc.read_pid(rdir)
        if pid:
            local_proc.stop([pid], 0.5)
    await asyncio.sleep(2)
    got = await served(url, 40)  # any failure raises
    clusters = {a.split("/clusters/")[1].split("/")[0] for a in got}
    assert clusters == {"mesh-a", other}  # the dead replica gets nothing
    (s.state_dirs[first] / "OFFLINE").unlink()
    await delete_and_wait_gone(s, "web")


async def test_service_is_reachable_on_the_linked_cluster_until_the_link_goes(
    lifecycle_stack: LifecycleStack,
) -> None:
    """The Link points from the other cluster to the service's one (either direction counts):
    requests sent to the service's address on the linked cluster reach the replicas on both."""
    require_binary("haproxy", "apt-get install haproxy")
    s = lifecycle_stack
    s.start_in_process()
    for name, zone in (("duo-p", "home"), ("duo-q", "remote")):
        await s.add_cluster(name, cpus=1, labels={"zone": zone})
        await s.cluster_phase(name, "Ready")
    await linked(s, "duo-q", "duo-p")
    await web(s, "duo-home", "home", app="duo")
    await web(s, "duo-away", "remote", app="duo")
    jobs = [await s.job_phase(j, "Running") for j in ("duo-home", "duo-away")]
    names = {f"{j['metadata']['name']}-{j['metadata']['uid'][:8]}-0" for j in jobs}
    await add_service(s, "duo", selector={"app": "duo"}, primaryCluster="duo-p")

    async def on_both() -> dict[str, Any] | None:
        obj = await s.get("services", "duo", "default")
        st = (obj or {}).get("status") or {}
        where = {r["cluster"]: r for r in st.get("reachable") or []}
        return st if st.get("phase") == "Ready" and set(where) == {"duo-p", "duo-q"} else None

    st = await s.wait("the service on both clusters", on_both, 60)
    where = {r["cluster"]: r for r in st["reachable"]}
    assert where["duo-p"]["role"] == "primary" and where["duo-q"]["role"] == "linked"
    assert where["duo-p"]["clusterIP"] == st["clusterIP"]
    copy = where["duo-q"]["clusterIP"]
    assert copy and copy != st["clusterIP"]  # an address of its own, on the linked cluster
    url = f"http://{copy}:80/"

    async def both_answer() -> set[str] | None:
        try:
            got = await served(url, 20)
        except OSError:
            return None  # HAProxy's first health checks
        return got if {a.split()[0] for a in got} == names else None

    answers = await s.wait("replicas on both clusters behind the linked address", both_answer,
                           30)
    assert {a.split("/clusters/")[1].split("/")[0] for a in answers} == {"duo-p", "duo-q"}
    ep = await s.get("endpoints", "duo", "default")
    assert ep is not None
    assert {c: len(e["addresses"]) for c, e in ep["spec"]["endpoints"].items()} == {
        "duo-p": 1, "duo-q": 1}

    # the Link goes: the copy goes with it (the linked cluster's HAProxy had only this one)
    await s.delete("links", "duo-q-duo-p")
    await s.wait("link deleted", lambda: _gone(s, "links", "duo-q-duo-p"), 30)
    handle = s.client.get_workflow_handle(service_workflow_id("default", "duo"))
    await handle.signal(SIG_REFRESH, Refresh())

    async def primary_only() -> dict[str, Any] | None:
        obj = await s.get("services", "duo", "default")
        st = (obj or {}).get("status") or {}
        return st if [r["cluster"] for r in st.get("reachable") or []] == ["duo-p"] else None

    await s.wait("the copy removed", primary_only, 60)
    with pytest.raises(OSError):
        get(url)
    # and the primary no longer balances over the replica on the cluster it is not linked with
    home = f"duo-home-{jobs[0]['metadata']['uid'][:8]}-0"
    answers = await served(f"http://{st['clusterIP']}:80/", 20)
    assert {a.split()[0] for a in answers} == {home}
    await delete_and_wait_gone(s, "duo")


async def _gone(s: LifecycleStack, plural: str, name: str) -> bool:
    return await s.get(plural, name) is None
