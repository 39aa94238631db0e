"""The order in which a parallel run (``SKYSHIFT_TEST_WORKERS``) hands out its units: the
longest first, so that no long unit starts last and ends the run alone."""

from __future__ import annotations

from tests.conftest import _rank


def test_longest_units_go_first_and_unit_tests_last() -> None:
    units = [
        ("tests/unit/test_models.py::test_a", ""),
        ("tests/integration/test_api.py::test_b", ""),
        ("tests/integration/test_links.py::test_c", "tests/integration/test_links.py"),
        ("tests/workflows/test_job_workflow.py::test_d", ""),
        ("tests/faults/test_api_fuzz.py::test_e", ""),
        ("tests/e2e/test_k8s_e2e.py::test_f", "k8s"),
        ("tests/e2e/test_provision_e2e.py::test_g", "skypilot"),
        ("tests/integration/test_quota_beds.py::test_h", "k8s+slurm"),
    ]
    ordered = [nodeid.split("::")[1] for nodeid, group in
               sorted(units, key=lambda unit: _rank(*unit))]
    assert ordered == ["test_g", "test_f", "test_h", "test_e", "test_c", "test_b", "test_d",
                       "test_a"]
