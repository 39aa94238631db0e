"""Every activity is idempotent under retry (issue 32).

Temporal retries an activity whose completion it did not record, even when the first attempt
did everything: a worker killed after the work, a server that died before writing the result.
For every activity named in ``skyshift.contract.activity_names`` this runs the activity, then
runs it again with the same input as attempt 2 (and, for those that decide or race other
writers, after the world moved on: capacity changed, another object was written, time passed)
and checks that the retry returns the same outcome and changes nothing the first attempt had
not already done (no second replica, run, step or job, no different decision signalled, no
status regression). See retry_harness for what is compared.

Real etcd, the real ``local`` cluster adapter, a recording Temporal client (see the harness).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from skyshift.activities.clusters import SignalsFailed
from skyshift.compat.errors import Transient
from skyshift.contract import activity_names
from skyshift.contract.jobs import UNREACHABLE, ReplicaOpInput
from skyshift.contract.names import SIG_CLUSTER, job_workflow_id
from skyshift.store import ObjectStore
from tests.integration import retry_cases_control, retry_cases_skylet
from tests.integration.retry_cases_control import CONTROL_CASES, CONTROL_MOVES_ON
from tests.integration.retry_cases_skylet import SKYLET_CASES, SKYLET_MOVES_ON
from tests.integration.retry_harness import (
    Prepared,
    RecordingClient,
    World,
    activity_name,
    check_retry,
    run_attempt,
)
from tests.integration.retry_world import add_job

pytestmark = [pytest.mark.integration]

CASES = {**SKYLET_CASES, **CONTROL_CASES}
MOVES_ON = SKYLET_MOVES_ON | CONTROL_MOVES_ON


def every_activity_name() -> set[str]:
    return {v for k, v in vars(activity_names).items() if k.isupper() and isinstance(v, str)}


def params() -> list[object]:
    out: list[object] = []
    for name in sorted(CASES):
        for moved in (False, True) if name in MOVES_ON else (False,):
            out.append(pytest.param(name, moved,
                                    id=f"{name}-{'moved-on' if moved else 'same-world'}"))
    return out


@pytest_asyncio.fixture
async def world(store: ObjectStore, tmp_path: Path) -> AsyncIterator[World]:
    w = World(store, RecordingClient(), tmp_path)
    try:
        yield w
    finally:
        await w.close()


def test_every_activity_has_a_retry_case() -> None:
    """A new activity without a row here fails the suite."""
    assert set(CASES) == every_activity_name()


@pytest.mark.parametrize(("name", "moved"), params())
async def test_a_retry_repeats_the_first_attempt(world: World, name: str, moved: bool) -> None:
    prepared = await CASES[name](world)
    assert activity_name(prepared.fn) == name, "the case runs another activity"
    assert (prepared.move_on is not None) == (name in MOVES_ON), "MOVES_ON is out of date"
    await check_retry(world, prepared, moved)


# ---- a first attempt that died half way --------------------------------------------------------

async def test_a_teardown_whose_signals_failed_tells_the_jobs_on_retry(world: World) -> None:
    """The first attempt deleted the replicas and forgot them, then could not tell the jobs
    (Temporal down); the retry, by a new skylet, tells both from the record in etcd."""
    prepared = await retry_cases_skylet.teardown_cluster(world)
    world.client.unavailable = True
    with pytest.raises(SignalsFailed):
        await run_attempt(prepared, 1)
    world.client.unavailable = False
    assert prepared.move_on is not None
    await prepared.move_on()  # the skylet was replaced
    result = await run_attempt(prepared, 2)
    told = sorted(s.workflow_id for s in world.client.sent if s.name == SIG_CLUSTER)
    assert told == [job_workflow_id("default", "ta"), job_workflow_id("default", "tb")]
    assert (result.jobs, result.deleted) == (told, 2)
    assert await world.clusters[-1].replicas() == []


async def test_a_teardown_gives_up_on_a_cluster_that_stopped_answering(world: World) -> None:
    """The cluster was shut down right after its deletion: the first attempt fails (retried),
    one after the cluster has been unreachable for ``give_up_after`` tells both jobs to move
    and says, on the Cluster and in its result, that their replicas may be left there."""
    prepared = await retry_cases_skylet.teardown_cluster(world)
    acts: Any = prepared.fn.__self__
    acts.teardown.give_up_after = 0.3
    offline = world.tmp / "cluster" / "OFFLINE"
    offline.touch()
    with pytest.raises(Transient, match="unreachable"):
        await run_attempt(prepared, 1)
    assert not [s for s in world.client.sent if s.name == SIG_CLUSTER]
    await asyncio.sleep(0.4)
    result = await run_attempt(prepared, 2)
    told = sorted(s.workflow_id for s in world.client.sent if s.name == SIG_CLUSTER)
    assert told == sorted(result.jobs) == [job_workflow_id("default", "ta"),
                                           job_workflow_id("default", "tb")]
    assert result.message.startswith(f"{UNREACHABLE}: cluster c1 was deleted while unreachable")
    assert "replicas may be left running on it" in result.message
    status = (await world.store.get("clusters", "c1"))["status"]
    assert status["message"] == result.message
    offline.unlink()
    assert len(await world.clusters[-1].replicas()) == 2  # left there, as the message says


async def test_a_run_created_before_a_crash_is_counted_by_the_retry(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first attempt created the run and died before writing the schedule's status; the
    retry takes that run and counts it once (runs 1, lastRun its name)."""
    prepared = await retry_cases_control.start_run(world)
    acts: Any = prepared.fn.__self__

    async def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("worker killed")

    monkeypatch.setattr(acts, "_status", crash)
    with pytest.raises(RuntimeError):
        await run_attempt(prepared, 1)
    monkeypatch.undo()
    ref = await run_attempt(prepared, 2)
    await run_attempt(prepared, 3)  # and a retry of that one counts nothing more
    runs = (await world.store.list("jobs", "default")).items
    assert [r["metadata"]["name"] for r in runs] == [ref.name] == ["sr-20300101-000000"]
    status = (await world.store.get("schedules", "sr", "default"))["status"]
    assert (status["runs"], status["lastRun"]) == (1, ref.name)


async def test_a_retried_exec_runs_its_command_once(world: World) -> None:
    """An exec's command is not idempotent (here it appends a line): a retry of the same
    request returns the first attempt's outcome, and the line is there once."""
    acts, manager = retry_cases_skylet.skylet(world)
    job = await add_job(world.store, "ex", placement={retry_cases_skylet.CLUSTER: 1})
    await acts.submit_replicas(retry_cases_skylet.submit_input(job))
    await retry_cases_skylet.started(manager, job)
    ran = world.tmp / "ran"
    command = ["sh", "-c", f"echo ran >> {ran}; wc -l < {ran}"]
    inp = ReplicaOpInput("exec", [retry_cases_skylet.CLUSTER],
                         [retry_cases_skylet.spec_of(job).name], command=command)
    prepared = Prepared(acts.replica_op, inp)
    first = await run_attempt(prepared, 1)
    second = await run_attempt(prepared, 2)
    assert (first.exit_code, first.stdout.strip(), first.error) == (0, "1", "")
    assert second == first
    assert ran.read_text() == "ran\n"
