"""Pure parts of pipelines and schedules: parameters, the DAG rules, cron checks, CLI tables."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from skyshift.cli.tables_flow import dag_table, pipeline_rows, schedule_rows, steps_summary
from skyshift.contract.pipelines import JobEnd, PipelineState, StepDef, StepState
from skyshift.models.params import substitute
from skyshift.models.pipeline import find_cycle, step_job_name
from skyshift.models.schedule import parse_duration, validate_cron
from skyshift.workflows import pipelinestate as ps


def test_substitute_every_string_and_refuse_unknown() -> None:
    job = {"run": "train --lr {{params.lr}} --x {{ params.lr }}", "envs": {"A": "{{ params.a }}"},
           "ports": [80]}
    out = substitute(job, {"lr": "0.1", "a": "b"}, "job")
    assert out == {"run": "train --lr 0.1 --x 0.1", "envs": {"A": "b"}, "ports": [80]}
    with pytest.raises(ValueError, match=r"job\.envs\.A: unknown parameter 'z'"):
        substitute({"envs": {"A": "{{ params.z }}"}}, {}, "job")
    # a value is inserted as text, never evaluated again
    assert substitute("{{ params.a }}", {"a": "{{ params.b }}", "b": "x"}, "s") == "{{ params.b }}"


def test_substitution_cannot_blow_up() -> None:
    """A 4 KiB value referenced 100 times would make 400 KiB out of a 2 KiB string: refused
    before it is built."""
    run = "{{ params.big }}" * 100
    with pytest.raises(ValueError, match=r"job\.run: 409600 characters .*at most 65536"):
        substitute({"run": run}, {"big": "x" * 4096}, "job")


def test_cycles_and_names() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": [], "b": ["a"], "c": ["a", "b"]}) == []
    assert step_job_name("p", "s", 1) == "p-s" and step_job_name("p", "s", 3) == "p-s-3"


@pytest.mark.parametrize("cron", ["0 2 * * *", "*/15 * * * 1-5", "@daily", "0 0 1 JAN,JUL *"])
def test_valid_crons(cron: str) -> None:
    assert validate_cron(cron) == cron


@pytest.mark.parametrize(
    ("cron", "words"),
    [("60 * * * *", "minute 60"), ("* * 0 * *", "day of month 0"), ("* * * 13 *", "month 13"),
     ("*/0 * * * *", "step"), ("* * *", "5 fields"), ("@sometimes", "5 fields")],
)
def test_invalid_crons(cron: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        validate_cron(cron)


def test_durations() -> None:
    assert [parse_duration(d) for d in ("30s", "5m", "2h", "1d")] == [30, 300, 7200, 86400]
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("5 minutes")


STEPS = [StepDef("a"), StepDef("b", ["a"], retries=1, on_failure="SkipDownstream"),
         StepDef("c", ["b"]), StepDef("d", ["a"], on_failure="Continue"), StepDef("e", ["d"])]


def state(**phases: str) -> PipelineState:
    s = PipelineState(steps=ps.initial(STEPS))
    for name, phase in phases.items():
        s.steps[name].phase = phase
    return s


def test_ready_and_skips() -> None:
    assert ps.ready(STEPS, state()) == ["a"]
    assert ps.ready(STEPS, state(a="Succeeded")) == ["b", "d"]
    s = state(a="Succeeded", b="Failed", d="Failed")
    assert ps.skip_blocked(STEPS, s, "now")
    assert s.steps["c"].phase == "Skipped" and s.steps["c"].message == "skipped: step b failed"
    assert ps.ready(STEPS, s) == ["e"]  # d failed with Continue: e still runs
    s.steps["e"].phase = "Succeeded"
    assert ps.verdict(STEPS, s) == ("Failed", "step b failed: ")


def test_retry_then_fail_and_verdicts() -> None:
    st = StepState(phase="Running", attempts=1)
    assert ps.job_ended(STEPS[1], st, JobEnd("Failed", "exit 3"), "t") == "retry"
    assert "attempt 1 failed: exit 3" in st.message
    st.attempts = 2
    assert ps.job_ended(STEPS[1], st, JobEnd("Gone"), "t") == "failed"
    assert st.phase == "Failed" and st.message == "failed after 2 attempts: its job was deleted"
    assert ps.job_ended(STEPS[0], StepState(attempts=1), JobEnd(""), "t") == ""
    done = state(a="Succeeded", b="Succeeded", c="Succeeded", d="Failed", e="Succeeded")
    assert ps.verdict(STEPS, done) == ("Succeeded", "4 of 5 steps succeeded")
    assert ps.verdict(STEPS, state(a="Running")) is None


def test_stop_all_cancels_running_and_skips_the_rest() -> None:
    s = state(a="Succeeded", b="Running", d="Running")
    s.steps["b"].job, s.steps["d"].job = "p-b", "p-d"
    assert sorted(ps.stop_all(s, "stopped", "t")) == ["p-b", "p-d"]
    assert [s.steps[n].phase for n in "abcde"] == [
        "Succeeded", "Cancelled", "Skipped", "Cancelled", "Skipped"]


NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
PIPELINE = {
    "metadata": {"name": "p", "creationTimestamp": "2026-11-24T11:00:00Z"},
    "spec": {"steps": [{"name": "b", "dependsOn": ["a"], "retries": 2},
                       {"name": "a", "onFailure": "Continue"}]},
    "status": {"phase": "Running", "startTime": "2026-11-24T11:00:00Z",
               "steps": {"a": {"phase": "Succeeded", "attempts": 1, "job": "p-a"},
                         "b": {"phase": "Running", "attempts": 2, "job": "p-b-2",
                               "message": "attempt 2"}}},
}


def test_pipeline_tables() -> None:
    assert steps_summary(PIPELINE["status"]["steps"], 2) == "1/2 done, 1 running"
    [row] = pipeline_rows(PIPELINE, True, NOW)
    assert row[:3] == ["p", "Running", "1/2 done, 1 running"] and row[4] == "1h"
    dag = dag_table(PIPELINE).splitlines()
    assert dag[0].split()[:3] == ["STEP", "STATUS", "DEPENDS"]
    assert dag[1].split()[:2] == ["a", "Succeeded"]  # what b depends on comes first
    assert "p-b-2" in dag[2] and "2/3" in dag[2]
    assert pipeline_rows({"metadata": {}}, True, NOW)[0][1] == "Pending"  # nothing crashes


def test_schedule_rows() -> None:
    obj = {"metadata": {"name": "s", "creationTimestamp": "2026-11-24T10:00:00Z"},
           "spec": {"interval": "5m", "pipelineTemplate": {}},
           "status": {"phase": "Active", "runs": 7, "lastScheduleTime": "2026-11-24T11:55:00Z",
                      "nextRunTimes": ["2026-11-24T12:05:00Z"], "lastRun": "s-1"}}
    [row] = schedule_rows(obj, True, NOW)
    assert row == ["s", "every 5m", "Active", "5m ago", "in 5m", "7", "2h", "Pipeline", "Skip",
                   "UTC", "s-1"]
