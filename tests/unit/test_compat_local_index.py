"""The local adapter's replica index and locking: what other instances and processes did shows
up, finished replicas are served from memory, calls read only what changed, a restart re-discovers
all, reads never wait for submits, and a replica being started holds up only itself."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from skyshift.compat.errors import Transient
from skyshift.compat.local import adapter as local
from skyshift.compat.local import index as local_index
from skyshift.compat.local import proc as local_proc
from skyshift.compat.local.adapter import LocalManager
from skyshift.compat.local.index import Journal, Replica
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, ReplicaStatus
from skyshift.models.quantity import Resources
from tests.fixtures.compat import local_config, local_factory, make_spec, new_job, wait_state
from tests.unit.test_compat_local import sessions_of

__all__ = ["local_factory"]  # a fixture, imported explicitly (see test_compat_local.py)

Factory = Callable[..., LocalManager]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def pair(local_factory: Factory) -> AsyncIterator[tuple[LocalManager, LocalManager]]:
    """Two adapter instances on one state dir, both with their index loaded."""
    a, b = local_factory(), local_factory()
    await a.connect()
    await b.connect()
    assert await a.replicas() == [] and await b.replicas() == []
    yield a, b
    for status in await a.replicas():
        await a.delete_job(status.job_uid)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Replica names whose files the index reads (status and spec), counted."""
    seen: Counter[str] = Counter()
    real = local_index.read_status

    def counting(rep: Replica) -> tuple[ReplicaStatus, object]:
        seen[rep.spec.name] += 1
        return real(rep)

    monkeypatch.setattr(local_index, "read_status", counting)
    return seen


def by_name(statuses: list[ReplicaStatus]) -> dict[str, ReplicaStatus]:
    return {s.name: s for s in statuses}


async def test_replica_created_by_another_instance_appears(
    pair: tuple[LocalManager, LocalManager],
) -> None:
    a, b = pair
    spec = make_spec("sleep 600", resources=Resources(cpus=1, memory=10))
    await b.submit([spec])
    assert by_name(await a.replicas())[spec.name].state == RUNNING
    assert sum(n.allocatable.cpus for n in (await a.state()).nodes) == 3


async def test_new_attempt_by_another_instance_replaces_what_is_known(
    pair: tuple[LocalManager, LocalManager],
) -> None:
    a, b = pair
    spec = make_spec("sleep 600")
    await a.submit([spec])
    spec.attempt = 1
    await b.submit([spec])
    status = by_name(await a.replicas())[spec.name]
    assert (status.state, status.attempt) == (RUNNING, 1)


async def test_replica_deleted_by_another_instance_disappears(
    pair: tuple[LocalManager, LocalManager],
) -> None:
    a, b = pair
    big = Resources(cpus=2, memory=10)
    gone, kept = make_spec("sleep 600", resources=big), make_spec("sleep 600", resources=big)
    await a.submit([gone, kept])
    await b.delete([gone.name])
    assert [s.name for s in await a.replicas()] == [kept.name]
    assert sorted(n.allocatable.cpus for n in (await a.state()).nodes) == [0, 2]
    await b.delete_job(kept.job_uid)
    assert await a.replicas() == []


async def test_replicas_added_or_removed_by_hand_are_seen_through_the_directory(
    pair: tuple[LocalManager, LocalManager], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_index, "SETTLE_NS", 0)
    monkeypatch.setattr(local_index, "SCRUB", 0)  # only the replicas/ directory tells
    a, _ = pair
    replicas = a.config.state_dir / "replicas"

    def next_tick() -> None:  # what a later change looks like on a coarse clock
        st = replicas.stat()
        os.utime(replicas, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))

    spec = make_spec("true")
    await a.submit([spec])
    await wait_state(a, spec.name, SUCCEEDED)
    (replicas / spec.name).rename(tmp_path / "elsewhere")
    next_tick()
    assert await a.replicas() == []
    (tmp_path / "elsewhere").rename(replicas / spec.name)
    next_tick()
    assert [s.state for s in await a.replicas()] == [SUCCEEDED]


async def test_reads_do_not_queue_behind_submits_waiting_for_the_lock(
    pair: tuple[LocalManager, LocalManager],
) -> None:
    a, _ = pair
    done = make_spec("true")
    await a.submit([done])
    with (a.config.state_dir / "lock").open("a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another process submitting
        small = Resources(cpus=0.1, memory=1)
        blocked = [asyncio.ensure_future(a.submit([make_spec("sleep 600", resources=small)]))
                   for _ in range(12)]
        await asyncio.sleep(0.2)  # they fill asyncio's default executor, waiting for the lock
        assert [s.name for s in await asyncio.wait_for(a.replicas(), 20)] == [done.name]
        assert (await asyncio.wait_for(a.state(), 20)).nodes
        fcntl.flock(held, fcntl.LOCK_UN)
    assert all(s.state == RUNNING for batch in await asyncio.gather(*blocked) for s in batch)


@pytest.fixture
def slow_launch(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """(started, go): the launch of a replica named "slow-*" blocks until ``go`` is set."""
    started, go = threading.Event(), threading.Event()
    real = local_proc.launch

    def launch(rdir: Path, argv: list[str], env: dict[str, str], timeout: float = 30.0) -> None:
        if rdir.name.startswith("slow-"):
            started.set()
            assert go.wait(30)
        real(rdir, argv, env, timeout)

    monkeypatch.setattr(local_proc, "launch", launch)
    return started, go


async def test_a_launch_holds_up_only_its_own_replica(
    pair: tuple[LocalManager, LocalManager], slow_launch: tuple[threading.Event, threading.Event],
) -> None:
    a, b = pair
    started, go = slow_launch
    slow = make_spec("sleep 600", job=("slow", new_job()[1]))
    first = asyncio.ensure_future(a.submit([slow]))
    assert await asyncio.to_thread(started.wait, 20)
    [other] = await asyncio.wait_for(b.submit([make_spec("sleep 600")]), 20)  # meanwhile
    assert other.state == RUNNING
    assert by_name(await b.replicas())[slow.name].state == PENDING
    again = asyncio.ensure_future(b.submit([slow]))  # the same replica: waits for its launch
    await asyncio.sleep(0.3)
    assert not again.done()
    go.set()
    assert [s.state for s in await first + await again] == [RUNNING, RUNNING]
    assert len(sessions_of(slow.name)) == 1


async def test_delete_during_a_launch_stops_what_it_started(
    pair: tuple[LocalManager, LocalManager], slow_launch: tuple[threading.Event, threading.Event],
) -> None:
    a, b = pair
    started, go = slow_launch
    slow = make_spec("sleep 600", job=("slow", new_job()[1]))
    first = asyncio.ensure_future(a.submit([slow]))
    assert await asyncio.to_thread(started.wait, 20)
    deleting = asyncio.ensure_future(b.delete([slow.name]))
    await asyncio.sleep(0.3)
    assert not deleting.done()
    go.set()
    await first
    await deleting
    assert sessions_of(slow.name) == set()
    assert await a.replicas() == []


def test_young_stamps_are_not_trusted(tmp_path: Path) -> None:
    st = tmp_path.stat()
    assert local_index._stamp(st, st.st_ctime_ns + local_index.SETTLE_NS - 1) is None
    assert local_index._stamp(st, st.st_ctime_ns + local_index.SETTLE_NS) == (
        st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


async def test_no_overcommit_between_instances(pair: tuple[LocalManager, LocalManager]) -> None:
    a, b = pair  # 2 nodes of 2 cpus
    big = Resources(cpus=2, memory=10)
    await a.submit([make_spec("sleep 600", resources=big) for _ in range(2)])
    with pytest.raises(Transient, match="does not fit"):
        await b.submit([make_spec("sleep 600", resources=big)])


async def test_capacity_freed_by_an_ended_replica_is_used_at_once(
    pair: tuple[LocalManager, LocalManager], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local, "_LIVENESS_TTL", 600.0)  # placement would reuse stale liveness
    a, _ = pair
    big = Resources(cpus=2, memory=10)
    go = tmp_path / "go"
    first = make_spec(f'while [ ! -f "{go}" ]; do sleep 0.02; done', resources=big)
    await a.submit([first, make_spec("sleep 600", resources=big)])
    await a.state()  # the liveness a placement may reuse: both running
    go.touch()
    while os.path.exists(f"/proc/{pid_of(a, first.name)}"):
        await asyncio.sleep(0.02)
    [status] = await a.submit([make_spec("sleep 600", resources=big)])
    assert status.state == RUNNING  # placed where the ended one was, not "does not fit"


def pid_of(manager: LocalManager, name: str) -> int:
    return int((manager.config.state_dir / "replicas" / name / "pid").read_text().split()[0])


async def test_finished_status_is_served_from_memory_until_a_new_attempt(
    pair: tuple[LocalManager, LocalManager], reads: Counter[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_index, "SETTLE_NS", 0)  # trust every stamp at once
    monkeypatch.setattr(local_index, "SCRUB", 0)  # a new attempt is known from the journal
    a, b = pair
    spec = make_spec("echo done; exit 3")
    await a.submit([spec])
    first = await wait_state(a, spec.name, FAILED)
    reads.clear()
    for _ in range(3):
        assert by_name(await a.replicas())[spec.name] == first
        await a.state()
    assert reads[spec.name] == 0
    spec.attempt = 1
    spec.run = "sleep 600"
    await b.submit([spec])
    status = by_name(await a.replicas())[spec.name]
    assert (status.state, status.attempt, status.exit_code) == (RUNNING, 1, None)


async def test_calls_read_only_what_changed(
    pair: tuple[LocalManager, LocalManager], reads: Counter[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_index, "SETTLE_NS", 0)
    a, b = pair
    job = new_job()
    small = Resources(cpus=0.1, memory=1)
    done = [make_spec("true", job=job, rank=r, resources=small) for r in range(20)]
    running = [make_spec("sleep 600", job=job, rank=20 + r, resources=small) for r in range(3)]
    await a.submit(done + running)
    for spec in done:
        await wait_state(a, spec.name, SUCCEEDED)
    await a.replicas()
    reads.clear()
    for _ in range(3):
        assert len(await a.replicas()) == 23
        await a.state()
    assert sum(reads.values()) == 0  # running ones: a liveness check, no file read
    new = make_spec("sleep 600")
    await b.submit([new])
    reads.clear()
    assert len(await a.replicas()) == 24
    assert set(reads) == {new.name}
    reads.clear()
    await a.submit([running[0]])  # a retry: reads that replica only
    assert set(reads) == {running[0].name}


async def test_journal_started_anew_is_caught_up(
    pair: tuple[LocalManager, LocalManager], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_index, "JOURNAL_MAX", 200)  # a few lines per journal
    a, b = pair
    spec = make_spec("sleep 600")
    await a.submit([spec])
    await a.replicas()
    others = [make_spec("sleep 600") for _ in range(6)]
    for other in others:
        await b.submit([other])
    spec.attempt = 2
    await b.submit([spec])
    statuses = by_name(await a.replicas())
    assert set(statuses) == {spec.name} | {o.name for o in others}
    assert statuses[spec.name].attempt == 2


async def test_kill_9_of_the_launching_process_then_a_fresh_adapter_finds_all(
    local_factory: Factory, tmp_path: Path,
) -> None:
    watcher = local_factory()  # an instance that was there all along
    await watcher.connect()
    job = new_job()
    specs = [
        make_spec("echo early", job=job, rank=0),
        make_spec("sleep 600", job=job, rank=1, resources=Resources(cpus=1, memory=10)),
        make_spec("exit 4", job=job, rank=2),
    ]
    script = (
        "import asyncio, json, sys, time\n"
        "from skyshift.compat.local.adapter import LocalManager\n"
        "from skyshift.compat.types import ReplicaSpec\n"
        "m = LocalManager('local-test', json.loads(sys.argv[1]))\n"
        "asyncio.run(m.submit([ReplicaSpec.from_dict(d) for d in json.loads(sys.argv[2])]))\n"
        "print('submitted', flush=True)\n"
        "time.sleep(600)\n"
    )
    config = local_config(watcher.config.state_dir)
    worker = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(config),
         json.dumps([s.to_dict() for s in specs])],
        stdout=subprocess.PIPE, cwd=REPO, text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "submitted"
    finally:
        worker.kill()
        worker.wait()
    fresh = LocalManager("local-test", config)
    try:
        for manager in (fresh, watcher):
            await wait_state(manager, specs[0].name, SUCCEEDED)
            await wait_state(manager, specs[2].name, FAILED)
            statuses = by_name(await manager.replicas())
            assert [statuses[s.name].state for s in specs] == [SUCCEEDED, RUNNING, FAILED]
            assert statuses[specs[2].name].exit_code == 4
            assert sum(n.allocatable.cpus for n in (await manager.state()).nodes) == 3
    finally:
        assert sorted(await fresh.delete_job(job[1])) == sorted(s.name for s in specs)
    assert await watcher.replicas() == []


def test_journal_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader = Journal(tmp_path / "journal"), Journal(tmp_path / "journal")
    assert reader.read() == []  # no journal yet
    writer.append(["a-0", "b-1"])
    assert reader.read() is None  # a journal it has not followed: compare everything
    writer.append(["c-2"])
    assert reader.read() == ["c-2"]
    assert reader.read() == []
    with open(tmp_path / "journal", "ab") as f:
        f.write(b"d-3\nhalf")  # a line still being written is read once complete
    assert reader.read() == ["d-3"]
    with open(tmp_path / "journal", "ab") as f:
        f.write(b"-4\n../etc\n")
    assert reader.read() == ["half-4"]  # only replica names
    monkeypatch.setattr(local_index, "JOURNAL_MAX", 60)
    writer.append(["e-5"])  # too long: started anew
    assert reader.read() is None
    writer.append(["f-6"])
    assert reader.read() == ["f-6"]


async def test_usage_follows_replicas_that_start_end_and_go(
    pair: tuple[LocalManager, LocalManager], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The usage sums are kept per change (not re-summed per submit): after replicas start,
    end by themselves, are deleted, or are created by the other instance, both instances
    count what a full sum of the unfinished replicas gives."""
    monkeypatch.setattr(local, "_LIVENESS_TTL", 0.0)  # each state() checks every process
    a, b = pair  # 2 nodes of 2 cpus
    small = Resources(cpus=0.3, memory=10)
    go = tmp_path / "go"
    ending = [make_spec(f'while [ ! -f "{go}" ]; do sleep 0.02; done', resources=small)
              for _ in range(3)]
    staying = [make_spec("sleep 600", resources=small) for _ in range(4)]
    await a.submit(ending + staying[:2])
    await b.submit(staying[2:])

    async def cpus_used(m: LocalManager) -> float:
        return round(sum(n.capacity.cpus - n.allocatable.cpus
                         for n in (await m.state()).nodes), 6)

    assert await cpus_used(a) == await cpus_used(b) == round(0.3 * 7, 6)
    go.touch()
    for spec in ending:
        await wait_state(a, spec.name, SUCCEEDED)
    assert await cpus_used(a) == await cpus_used(b) == round(0.3 * 4, 6)
    await b.delete_job(staying[0].job_uid)
    assert await cpus_used(a) == await cpus_used(b) == round(0.3 * 3, 6)
    for spec in staying[1:]:
        await a.delete_job(spec.job_uid)
    assert await cpus_used(a) == await cpus_used(b) == 0.0
    # everything is free again: a replica the size of a whole node fits on each node
    whole = [make_spec("sleep 600", resources=Resources(cpus=2, memory=10)) for _ in range(2)]
    assert [s.state for s in await b.submit(whole)] == [RUNNING, RUNNING]
