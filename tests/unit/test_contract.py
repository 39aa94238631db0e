"""The Temporal contract's names agree with what the workers register and the dev stack creates."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

from temporalio import activity, workflow
from temporalio.converter import DataConverter

import skyshift.activities
from skyshift.contract import activity_names, names
from skyshift.contract.jobs import JobConfig, JobInput
from skyshift.devstack.components import SEARCH_ATTRIBUTES
from skyshift.lifecycle import converter
from skyshift.lifecycle.convert import job_input
from skyshift.lifecycle.converter import DATA_CONVERTER
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


def sample_job_input() -> JobInput:
    return job_input({
        "kind": "Job",
        "metadata": {"name": "a", "namespace": "ns", "uid": "1234-5678", "generation": 2,
                     "creationTimestamp": "2026-11-25T10:00:00Z"},
        "spec": {"run": "sleep 1", "replicas": 3, "resources": {"cpus": 1, "memory": 100},
                 "envs": {"A": "1"}},
        "status": {"placement": {"c1": 2}},
    })


def test_payloads_are_the_default_converters_json_both_ways() -> None:
    """Histories recorded with Temporal's default converter decode with ours, and the other way
    round: same encoding, same JSON (key order aside)."""
    inp = sample_job_input()
    assert inp.template is not None and inp.clusters == ["c1"]
    ours, default = DATA_CONVERTER.payload_converter, DataConverter.default.payload_converter
    mine = ours.to_payloads([inp])
    theirs = default.to_payloads([inp])
    assert mine[0].metadata["encoding"] == theirs[0].metadata["encoding"] == b"json/plain"
    assert json.loads(mine[0].data) == json.loads(theirs[0].data)
    assert ours.from_payloads(theirs, [JobInput]) == [inp]
    assert default.from_payloads(mine, [JobInput]) == [inp]


def test_older_payloads_without_newer_fields_decode_with_defaults() -> None:
    data = json.loads(DATA_CONVERTER.payload_converter.to_payloads([sample_job_input()])[0].data)
    del data["owner"], data["config"]  # fields added after the first histories were recorded
    payload = DataConverter.default.payload_converter.to_payloads([data])
    got = DATA_CONVERTER.payload_converter.from_payloads(payload, [JobInput])[0]
    assert got.owner == "" and got.config == JobConfig() and got.name == "a"


def test_each_new_converter_reuses_the_process_type_adapters() -> None:
    """The SDK makes a payload converter per workflow instance: type adapters must not be built
    again for each (temporalio.contrib.pydantic's per-converter cache took ~8 ms per JobInput)."""
    payload = DATA_CONVERTER.payload_converter.to_payloads([sample_job_input()])
    DATA_CONVERTER._new_payload_converter().from_payloads(payload, [JobInput])
    before = converter._adapter.cache_info()
    for _ in range(5):
        DATA_CONVERTER._new_payload_converter().from_payloads(payload, [JobInput])
    after = converter._adapter.cache_info()
    assert after.misses == before.misses and after.hits >= before.hits + 5


def test_every_lifecycle_has_an_input_its_workflow_and_its_readable_id() -> None:
    """The table of lifecycles is what the starter, the reconciler and the control worker read:
    each kind in it has an input converter and a registered workflow, and its ids keep the
    readable schemes running workflows were started under."""
    from skyshift.contract.lifecycles import BY_KIND, LIFECYCLES
    from skyshift.lifecycle.starter import INPUTS
    from skyshift.workers.reconciler import QUERY

    registered = {workflow._Definition.must_from_class(cls).name for cls in WORKFLOWS}
    assert set(INPUTS) == set(BY_KIND)
    assert {lc.workflow for lc in LIFECYCLES} <= registered
    assert all(f"'{lc.kind}'" in QUERY for lc in LIFECYCLES)
    ids = {lc.kind: lc.object_workflow_id({"metadata": {"name": "a", "namespace": "ns"}})
           for lc in LIFECYCLES}
    assert ids == {"Job": "job/ns/a", "Cluster": "cluster/a", "Service": "service/ns/a",
                   "Pipeline": "pipeline/ns/a", "Link": "link/a", "Schedule": "schedule/ns/a"}
    assert names.job_workflow_id("ns", "a") == "job/ns/a"
    assert names.cluster_workflow_id("a") == "cluster/a"
