"""Stored Pipeline -> PipelineInput, and a step's Job manifest (pure functions, no I/O)."""

from __future__ import annotations

from pydantic import ValidationError

from skyshift.contract.pipelines import (
    OWNER_ANNOTATION,
    OWNER_UID_ANNOTATION,
    PIPELINE_LABEL,
    STEP_LABEL,
    PipelineInput,
    StepDef,
)
from skyshift.lifecycle.convert import validation_summary
from skyshift.models.base import Obj
from skyshift.models.params import render_template
from skyshift.models.pipeline import Pipeline, step_job_name


def pipeline_input(obj: Obj) -> PipelineInput:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    inp = PipelineInput(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name")),
        uid=str(meta.get("uid") or ""),
        phase=str((obj.get("status") or {}).get("phase") or "Pending"),
        cancel=bool(spec.get("cancel")),
        deleting=bool(meta.get("deletionTimestamp")),
        owner=str((meta.get("annotations") or {}).get(OWNER_ANNOTATION) or ""),
    )
    try:
        pipeline = Pipeline.model_validate(obj)
    except ValidationError as exc:
        inp.invalid = f"invalid pipeline spec: {validation_summary(exc)}"
        return inp
    inp.steps = [
        StepDef(s.name, list(s.dependsOn), s.retries, s.onFailure) for s in pipeline.spec.steps
    ]
    return inp


def step_job(pipeline: Obj, step: str, attempt: int, owner: str) -> Obj:
    """The Job manifest of ``step``'s ``attempt`` (parameters substituted), not yet created."""
    model = Pipeline.model_validate(pipeline)
    meta = pipeline.get("metadata") or {}
    found = next((s for s in model.spec.steps if s.name == step), None)
    if found is None:
        raise KeyError(f"pipeline {model.metadata.name} has no step {step!r}")
    spec = render_template(found.job, model.spec.parameters, f"steps.{step}.job")
    labels = {**found.labels, PIPELINE_LABEL: model.metadata.name, STEP_LABEL: step}
    return {
        "kind": "Job",
        "metadata": {
            "name": step_job_name(model.metadata.name, step, attempt),
            "namespace": model.metadata.namespace or "default",
            "labels": labels,
            "annotations": {OWNER_ANNOTATION: owner, OWNER_UID_ANNOTATION: str(meta.get("uid"))},
        },
        "spec": spec,
    }
