"""The control worker's workflows come from the table of lifecycle kinds: every kind in
skyshift/contract/lifecycles.py has a class registered under its workflow type, the control
worker hands it to Temporal, and a kind without a class stops the worker naming the kind."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from temporalio import workflow

from skyshift.contract.lifecycles import LIFECYCLES
from skyshift.workers import control
from skyshift.workflows.registry import LIFECYCLE_CLASSES, lifecycle_workflows


def _type_name(cls: type) -> str:
    return workflow._Definition.must_from_class(cls).name


def test_every_kind_has_a_class_defined_under_its_workflow_type() -> None:
    classes = lifecycle_workflows()
    assert [_type_name(cls) for cls in classes] == [lc.workflow for lc in LIFECYCLES]
    assert all(_type_name(cls) == name for name, cls in LIFECYCLE_CLASSES.items())


def test_the_control_worker_registers_every_kinds_workflow(monkeypatch: pytest.MonkeyPatch) -> None:
    given: dict[str, Any] = {}

    def worker(client: object, **kwargs: Any) -> object:
        given.update(kwargs)
        return object()

    monkeypatch.setattr(control, "Worker", worker)
    control.control_worker(object(), object())  # type: ignore[arg-type]
    registered = {_type_name(cls) for cls in given["workflows"]}
    assert {lc.workflow for lc in LIFECYCLES} <= registered
    assert {"SchedulerWorkflow", "ReplicaOpWorkflow", "ScheduledRunWorkflow"} <= registered


def test_a_kind_without_a_class_is_named() -> None:
    new_kind = replace(LIFECYCLES[0], kind="Notebook", workflow="NotebookWorkflow")
    with pytest.raises(LookupError, match=r"Notebook \(NotebookWorkflow\)"):
        lifecycle_workflows((*LIFECYCLES, new_kind))
