"""The Temporal contract's names agree with what the workers register and the dev stack creates."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

from temporalio import activity, workflow

import skyshift.activities
from skyshift.contract import activity_names, names
from skyshift.devstack.components import SEARCH_ATTRIBUTES
from skyshift.workers.control import WORKFLOWS

ROOT = Path(__file__).resolve().parents[2] / "skyshift"


def constants(module: object, prefix: str = "") -> dict[str, str]:
    return {k: v for k, v in vars(module).items()
            if k.isupper() and k.startswith(prefix) and isinstance(v, str)}


def defined_activities() -> set[str]:
    """The name of every activity the activity modules define (methods of classes included)."""
    found: set[str] = set()
    for info in pkgutil.iter_modules(skyshift.activities.__path__, "skyshift.activities."):
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module):
            members = inspect.getmembers(obj) if inspect.isclass(obj) else [("", obj)]
            for _, fn in members:
                if callable(fn) and hasattr(fn, "__temporal_activity_definition"):
                    defn = activity._Definition.from_callable(fn)
                    assert defn is not None and defn.name is not None
                    found.add(defn.name)
    return found


def test_every_activity_has_its_name_in_the_contract_and_every_name_an_activity() -> None:
    assert defined_activities() == set(constants(activity_names).values())


def test_activity_name_constants_are_unique() -> None:
    values = list(constants(activity_names).values())
    assert len(values) == len(set(values))


def test_every_workflow_type_is_named_in_the_contract() -> None:
    registered = {workflow._Definition.must_from_class(cls).name for cls in WORKFLOWS}
    assert registered == set(constants(names, "WF_").values())


def test_workflows_and_activities_call_activities_by_contract_name_not_by_string() -> None:
    """``execute_activity("x", ...)`` would compile with a typo; the constants do not."""
    call = re.compile(r'(execute_activity|execute_local_activity|start_activity)\(\s*"')
    offenders = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                 if call.search(p.read_text())]
    assert offenders == []


def test_dev_stack_registers_the_contracts_search_attributes() -> None:
    assert tuple(key.name for key in names.SEARCH_ATTRIBUTES) == SEARCH_ATTRIBUTES
