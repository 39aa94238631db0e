"""Local adapter behaviour beyond the shared contract: placement, fault injection, survival of
the launching process, restarts by attempt, crash recovery, exec and logs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from skyshift.compat.errors import NotFound, Permanent, Transient
from skyshift.compat.local.adapter import LocalManager
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED
from skyshift.models.quantity import Resources
from tests.fixtures.compat import local_config, local_factory, make_spec, wait_state

# local_factory is a fixture; listing it marks the explicit import as used (it is not in the
# root conftest's plugins)
__all__ = ["local_factory"]

Factory = Callable[..., LocalManager]
REPO = Path(__file__).resolve().parents[2]


def sessions_of(name: str) -> set[int]:
    """Sessions of live processes running replica ``name`` (one session per launch)."""
    marker = f"SKYSHIFT_REPLICA={name}".encode()
    sessions = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if marker in env and fields[0] != "Z":
            sessions.add(int(fields[3]))
    return sessions


def pid_of(manager: LocalManager, name: str) -> int:
    fields = (manager.config.state_dir / "replicas" / name / "pid").read_text().split()
    return int(fields[3] if len(fields) > 3 else fields[0])  # the process group


@pytest.fixture
async def local(local_factory: Factory) -> AsyncIterator[LocalManager]:
    manager = local_factory()
    await manager.connect()
    yield manager
    offline = manager.config.state_dir / "OFFLINE"
    offline.unlink(missing_ok=True)
    for status in await manager.replicas():
        await manager.delete_job(status.job_uid)


async def test_submit_is_running_at_once(local: LocalManager) -> None:
    [status] = await local.submit([make_spec("sleep 600")])
    assert status.state == RUNNING and status.started_at is not None


async def test_offline_file_makes_every_call_transient(local: LocalManager) -> None:
    spec = make_spec("sleep 600")
    await local.submit([spec])
    offline = local.config.state_dir / "OFFLINE"
    offline.touch()
    calls = [
        local.connect(), local.state(), local.replicas(), local.submit([make_spec("true")]),
        local.delete([spec.name]), local.delete_job(spec.job_uid), local.logs(spec.name),
        local.exec(spec.name, ["true"]),
    ]
    for call in calls:
        with pytest.raises(Transient, match="cluster local-test is unreachable"):
            await call
    offline.unlink()
    [status] = await local.replicas()
    assert status.name == spec.name and status.state == RUNNING


async def test_replica_larger_than_any_node_is_permanent(local: LocalManager) -> None:
    # 4 cpus split into 2 nodes of 2: 3 cpus fit the cluster total but never one node
    with pytest.raises(Permanent, match="can never fit"):
        await local.submit([make_spec("true", resources=Resources(cpus=3, memory=1))])
    assert await local.replicas() == []


async def test_first_fit_and_transient_when_full(local: LocalManager) -> None:
    big = Resources(cpus=2, memory=100)
    specs = [make_spec("sleep 600", resources=big) for _ in range(3)]
    with pytest.raises(Transient, match=r"does not fit .* right now"):
        await local.submit(specs)
    state = await local.state()
    assert [n.allocatable.cpus for n in state.nodes] == [0, 0]
    assert state.labels == {"region": "here"}
    assert {s.name for s in await local.replicas()} == {specs[0].name, specs[1].name}
    await local.delete([specs[0].name])
    statuses = await local.submit(specs[1:])  # adopts the second, places the third
    assert [s.state for s in statuses] == [RUNNING, RUNNING]
    assert [n.allocatable.cpus for n in (await local.state()).nodes] == [0, 0]


async def test_idempotent_submit_starts_one_process(local_factory: Factory,
                                                    local: LocalManager) -> None:
    spec = make_spec("sleep 600")
    other = local_factory()
    await asyncio.gather(local.submit([spec, spec]), other.submit([spec]), local.submit([spec]))
    await local.submit([spec])
    assert len(sessions_of(spec.name)) == 1


async def test_replica_survives_kill_9_of_the_launching_process(
    local: LocalManager, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    spec = make_spec(f'while [ ! -f "{go}" ]; do sleep 0.05; done; echo ok; exit 3')
    script = (
        "import asyncio, json, sys, time\n"
        "from skyshift.compat.local.adapter import LocalManager\n"
        "from skyshift.compat.types import ReplicaSpec\n"
        "m = LocalManager('local-test', json.loads(sys.argv[1]))\n"
        "asyncio.run(m.submit([ReplicaSpec.from_dict(json.loads(sys.argv[2]))]))\n"
        "print('submitted', flush=True)\n"
        "time.sleep(600)\n"
    )
    config = local_config(local.config.state_dir)
    worker = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(config), json.dumps(spec.to_dict())],
        stdout=subprocess.PIPE, cwd=REPO, text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "submitted"
    finally:
        worker.kill()  # SIGKILL: the worker dies without any cleanup
        worker.wait()
    [status] = await LocalManager("local-test", config).replicas()
    assert status.state == RUNNING
    go.touch()
    status = await wait_state(local, spec.name, FAILED, SUCCEEDED)
    assert (status.state, status.exit_code, status.reason) == (FAILED, 3, "Error")
    assert "ok" in await local.logs(spec.name)


async def test_recycled_pid_is_not_mistaken_for_the_replica(local: LocalManager) -> None:
    spec = make_spec("true")
    await local.submit([spec])
    await wait_state(local, spec.name, SUCCEEDED)
    rdir = local.config.state_dir / "replicas" / spec.name
    (rdir / "exit_code").unlink()
    ticks = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]
    # a live pid (ours) that started at another time than the recorded wrapper
    (rdir / "pid").write_text(f"{os.getpid()} {int(ticks) + 1} 1.0\n")
    [status] = await local.replicas()
    assert (status.state, status.reason) == (FAILED, "Lost")
    (rdir / "pid").write_text(f"{os.getpid()} {ticks} 1.0\n")  # same start time: it is alive
    [status] = await local.replicas()
    assert status.state == RUNNING
    (rdir / "exit_code").write_text("0\n")  # never let teardown signal the test process
    (rdir / "pid").unlink()


async def test_vanished_process_is_lost(local: LocalManager) -> None:
    spec = make_spec("sleep 600")
    await local.submit([spec])
    os.killpg(pid_of(local, spec.name), signal.SIGKILL)  # nobody left to record an exit code
    status = await wait_state(local, spec.name, FAILED)
    assert status.reason == "Lost" and status.exit_code is None


async def test_command_killed_by_signal(local: LocalManager) -> None:
    spec = make_spec("kill -TERM $$")
    await local.submit([spec])
    status = await wait_state(local, spec.name, FAILED)
    assert (status.exit_code, status.reason) == (143, "Signaled")
    assert "SIGTERM" in status.message


async def test_higher_attempt_restarts_a_finished_replica(local: LocalManager) -> None:
    spec = make_spec("echo x >> runs; echo run-$(wc -l < runs); exit 1")
    await local.submit([spec])
    await wait_state(local, spec.name, FAILED)
    spec.attempt = 1
    [status] = await local.submit([spec])
    assert status.attempt == 1
    status = await wait_state(local, spec.name, FAILED)
    assert status.attempt == 1
    assert "run-2" in await local.logs(spec.name)  # the working directory is kept
    rdir = local.config.state_dir / "replicas" / spec.name
    assert "run-1" in (rdir / "log.0").read_text()  # the old attempt's log is rotated
    spec.attempt = 0  # a stale retry adopts the newer attempt and runs nothing
    [status] = await local.submit([spec])
    assert (status.attempt, status.state) == (1, FAILED)
    assert "run-1" not in await local.logs(spec.name)


async def test_higher_attempt_replaces_a_running_replica(local: LocalManager) -> None:
    spec = make_spec("sleep 600")
    await local.submit([spec])
    old = sessions_of(spec.name)
    spec.attempt = 1
    [status] = await local.submit([spec])
    assert (status.state, status.attempt) == (RUNNING, 1)
    new = sessions_of(spec.name)
    assert len(new) == 1 and new != old


async def test_interrupted_launch_is_finished_by_the_next_submit(local: LocalManager) -> None:
    spec = make_spec("sleep 600", resources=Resources(cpus=1, memory=10))
    rdir = local.config.state_dir / "replicas" / spec.name
    rdir.mkdir(parents=True)  # what a crash between creating the replica and launching leaves
    (rdir / "spec.json").write_text(json.dumps({"spec": spec.to_dict(), "node": "local-test-0"}))
    [status] = await local.replicas()
    assert status.state == PENDING
    assert (await local.state()).nodes[0].allocatable.cpus == 1
    [status] = await local.submit([spec])
    assert status.state == RUNNING and len(sessions_of(spec.name)) == 1


async def test_delete_kills_the_whole_process_group(local: LocalManager) -> None:
    spec = make_spec("sleep 600 & sleep 600; wait")
    await local.submit([spec])
    await wait_state(local, spec.name, RUNNING)
    assert sessions_of(spec.name)
    await local.delete([spec.name])
    assert sessions_of(spec.name) == set()
    assert not (local.config.state_dir / "replicas" / spec.name).exists()


async def test_delete_kills_a_child_that_ignores_sigterm(local: LocalManager) -> None:
    """The command exits on SIGTERM, and with it the supervisor, but a child that ignores
    SIGTERM lives on in the replica's group: delete must not return until it is killed."""
    spec = make_spec("(trap '' TERM; exec sleep 600) & exec sleep 600")
    await local.submit([spec])
    await wait_state(local, spec.name, RUNNING)
    assert len(sessions_of(spec.name)) == 1
    await local.delete([spec.name])
    assert sessions_of(spec.name) == set()


async def test_interrupted_delete_is_finished_on_connect(local_factory: Factory,
                                                         local: LocalManager) -> None:
    spec = make_spec("sleep 600")
    await local.submit([spec])
    root = local.config.state_dir
    (root / "replicas" / spec.name).rename(root / "trash" / f"{spec.name}.deadbeef")
    await local_factory().connect()
    assert sessions_of(spec.name) == set()
    assert list((root / "trash").iterdir()) == []


async def test_exec_runs_with_replica_env_in_its_directory(local: LocalManager) -> None:
    spec = make_spec("echo data > f; sleep 600", envs={"FOO": "bar"})
    await local.submit([spec])
    result = await local.exec(spec.name, ["sh", "-c", 'while [ ! -s f ]; do sleep 0.05; done; '
                                          'echo "$FOO $SKYSHIFT_RANK $(cat f)"; pwd'])
    assert result.exit_code == 0
    assert result.stdout.split("\n")[:2] == [
        "bar 0 data", str(local.config.state_dir / "replicas" / spec.name / "work")
    ]
    assert (await local.exec(spec.name, ["no-such-binary-xyz"])).exit_code == 127
    with pytest.raises(Transient, match="timed out"):
        await local.exec(spec.name, ["sleep", "30"], timeout=0.2)
    with pytest.raises(Permanent):
        await local.exec(spec.name, [])


async def test_exec_needs_a_running_replica(local: LocalManager) -> None:
    spec = make_spec("true")
    await local.submit([spec])
    await wait_state(local, spec.name, SUCCEEDED)
    with pytest.raises(Permanent, match="exec needs a running replica"):
        await local.exec(spec.name, ["true"])


async def test_logs_tail(local: LocalManager) -> None:
    spec = make_spec("for i in 1 2 3 4 5; do echo line$i; done; printf partial")
    await local.submit([spec])
    await wait_state(local, spec.name, SUCCEEDED)
    assert await local.logs(spec.name, tail=2) == "line5\npartial"
    assert await local.logs(spec.name, tail=0) == ""
    assert await local.logs(spec.name, tail=100) == await local.logs(spec.name)


async def test_names_are_checked(local: LocalManager) -> None:
    with pytest.raises(Permanent, match="invalid replica name"):
        await local.submit([make_spec("true").__class__(
            name="../escape", job_name="j", namespace="n", job_uid="u", rank=0)])
    with pytest.raises(NotFound):
        await local.logs("../../etc")
    with pytest.raises(Permanent, match="invalid environment variable"):
        await local.submit([make_spec("true", envs={"A=B": "x"})])
    spec = make_spec("sleep 600")
    await local.submit([spec])
    thief = make_spec("true")
    thief.name = spec.name
    with pytest.raises(Permanent, match="taken by job"):
        await local.submit([thief])


async def test_declared_ports_get_host_ports_of_their_own(local: LocalManager) -> None:
    """Two replicas of a server on port 8080 cannot both bind it on one host: each gets a free
    host port (SKYSHIFT_PORT_8080, SKYSHIFT_PORT), kept across restarts, and serves on it."""
    import urllib.request

    serve = ("mkdir -p site && echo $SKYSHIFT_REPLICA > site/index.html && "
             "exec python3 -m http.server $SKYSHIFT_PORT_8080 --bind 127.0.0.1 -d site")
    job = ("web", "1f2e3d4c-0000-4000-8000-000000000001")
    specs = [make_spec(serve, job=job, rank=r) for r in (0, 1)]
    for spec in specs:
        spec.ports = [8080]
    await local.submit(specs)
    addresses = await local.replica_addresses([job[1]], 8080)
    assert len(addresses) == 2 and len(set(addresses)) == 2
    assert all(a.startswith("127.0.0.1:") and a != "127.0.0.1:8080" for a in addresses)
    served = set()
    for address in addresses:
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://{address}/", timeout=2) as resp:
                    served.add(resp.read().decode().strip())
                break
            except OSError:
                await asyncio.sleep(0.1)
    assert served == {specs[0].name, specs[1].name}
    assert await local.replica_addresses([job[1]], 9999) == []  # not a port they declared
    specs[0].attempt = 1  # a restart keeps the replica's port
    await local.submit([specs[0]])
    assert sorted(await local.replica_addresses([job[1]], 8080)) == sorted(addresses)
