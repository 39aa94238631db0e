"""Shared fixtures: each component's fixtures live in tests/fixtures/<component>.py."""

pytest_plugins = [
    "tests.fixtures.etcd",
    "tests.fixtures.temporal",
    "tests.fixtures.stack",
    "tests.fixtures.api",
    "tests.fixtures.slurm",
    "tests.fixtures.k8s",
    "tests.fixtures.auth",
    "tests.fixtures.skypilot",
]
