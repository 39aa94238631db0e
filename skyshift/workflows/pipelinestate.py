"""The bookkeeping of a pipeline's DAG (pure functions on PipelineState; no Temporal calls).

Step phases: Pending -> Running -> Succeeded | Failed, or Skipped / Cancelled without running.
A step *satisfies* its dependents when it Succeeded, or Failed with ``onFailure: Continue``.
"""

from __future__ import annotations

from skyshift.contract.pipelines import STEP_TERMINAL, JobEnd, PipelineState, StepDef, StepState


def initial(steps: list[StepDef]) -> dict[str, StepState]:
    return {s.name: StepState() for s in steps}


def _satisfied(defs: dict[str, StepDef], s: PipelineState, name: str) -> bool:
    st = s.steps[name]
    return st.phase == "Succeeded" or (st.phase == "Failed" and defs[name].on_failure == "Continue")


def _blocking(defs: dict[str, StepDef], s: PipelineState, name: str) -> bool:
    """Whether ``name`` ended in a way that keeps its dependents from ever running."""
    st = s.steps[name]
    if st.phase in ("Skipped", "Cancelled"):
        return True
    return st.phase == "Failed" and defs[name].on_failure != "Continue"


def ready(steps: list[StepDef], s: PipelineState) -> list[str]:
    """Pending steps whose dependencies all satisfied them, in spec order."""
    defs = {d.name: d for d in steps}
    return [
        d.name for d in steps
        if s.steps[d.name].phase == "Pending"
        and all(_satisfied(defs, s, dep) for dep in d.depends_on)
    ]


def skip_blocked(steps: list[StepDef], s: PipelineState, now: str) -> bool:
    """Skip every Pending step downstream of one that cannot satisfy it; True if any changed."""
    defs = {d.name: d for d in steps}
    changed = True
    any_changed = False
    while changed:
        changed = False
        for d in steps:
            st = s.steps[d.name]
            if st.phase != "Pending":
                continue
            blocker = next((dep for dep in d.depends_on if _blocking(defs, s, dep)), None)
            if blocker is not None:
                st.phase, st.finished = "Skipped", now
                st.message = f"skipped: step {blocker} {s.steps[blocker].phase.lower()}"
                changed = any_changed = True
    return any_changed


def job_ended(
    d: StepDef, st: StepState, end: JobEnd, now: str,
) -> str:
    """Fold a step job's end into its state; returns "retry", "failed" or "" (succeeded or
    still running)."""
    if not end.phase:
        return ""
    if end.phase == "Succeeded":
        st.phase, st.message, st.finished = "Succeeded", end.message, now
        return ""
    why = "its job was deleted" if end.phase == "Gone" else (end.message or "job failed")
    if st.attempts <= d.retries:
        st.message = f"attempt {st.attempts} failed: {why}; retrying"
        return "retry"
    st.phase, st.finished = "Failed", now
    st.message = why if st.attempts == 1 else f"failed after {st.attempts} attempts: {why}"
    return "failed"


def stop_all(s: PipelineState, reason: str, now: str) -> list[str]:
    """Stop the pipeline: running steps Cancelled (their jobs to delete, returned), the steps
    not started Skipped (or Cancelled when the pipeline itself was cancelled)."""
    running: list[str] = []
    for st in s.steps.values():
        if st.phase == "Running":
            running.append(st.job)
            st.phase, st.message, st.finished = "Cancelled", reason, now
        elif st.phase == "Pending":
            st.phase = "Cancelled" if s.cancel else "Skipped"
            st.message, st.finished = reason, now
    return running


def verdict(steps: list[StepDef], s: PipelineState) -> tuple[str, str] | None:
    """(phase, message) once every step ended, else None."""
    if not all(st.phase in STEP_TERMINAL for st in s.steps.values()):
        return None
    defs = {d.name: d for d in steps}
    failed = [
        n for n, st in s.steps.items()
        if st.phase == "Failed" and defs[n].on_failure != "Continue"
    ]
    if failed:
        first = failed[0]
        return "Failed", f"step {first} failed: {s.steps[first].message}"
    done = sum(1 for st in s.steps.values() if st.phase == "Succeeded")
    return "Succeeded", f"{done} of {len(s.steps)} steps succeeded"


def running_jobs(s: PipelineState) -> dict[str, str]:
    """Job name -> uid of every running step (what to look at)."""
    return {st.job: st.job_uid for st in s.steps.values() if st.phase == "Running" and st.job}


def step_of_job(s: PipelineState, job: str) -> str | None:
    return next((n for n, st in s.steps.items() if st.job == job), None)
