"""Bounds on a Job's environment variables, checked when the Job is created.

Every cluster manager passes ``envs`` through ``execve``, whose arguments and environment
together are limited (Linux: 128 KiB per string, about 2 MiB in all, less on some hosts; a Slurm
batch script carries them too). A larger env used to be accepted by the API and then fail on the
cluster with "Argument list too long", submission after submission. The limits here leave room
for the command and the cluster's own environment; they are also what keeps workflow inputs,
where env values travel (see docs/security.md), small.
"""

from __future__ import annotations

KIB = 1024
MAX_ENV_VALUE_BYTES = 32 * KIB
MAX_ENV_TOTAL_BYTES = 96 * KIB


def env_size(name: str, value: str) -> int:
    """Bytes ``NAME=value`` takes in a process environment (with its terminating NUL)."""
    return len(name.encode()) + len(value.encode()) + 2


def validate_env_name(name: str) -> str:
    if not name:
        raise ValueError("an environment variable name must not be empty")
    if "=" in name or "\0" in name:
        raise ValueError(f"environment variable name {name!r} must not contain '=' or NUL")
    return name


def validate_env_value(value: str) -> str:
    if "\0" in value:
        raise ValueError("an environment variable value must not contain NUL")
    size = len(value.encode())
    if size > MAX_ENV_VALUE_BYTES:
        raise ValueError(
            f"the value is {size} bytes; at most {MAX_ENV_VALUE_BYTES} bytes "
            f"({MAX_ENV_VALUE_BYTES // KIB} KiB) are allowed per value (put large data in a "
            "file the job reads instead)"
        )
    return value


def validate_env_total(envs: dict[str, str]) -> dict[str, str]:
    total = sum(env_size(k, v) for k, v in envs.items())
    if total > MAX_ENV_TOTAL_BYTES:
        raise ValueError(
            f"names and values take {total} bytes together; at most {MAX_ENV_TOTAL_BYTES} bytes "
            f"({MAX_ENV_TOTAL_BYTES // KIB} KiB) are allowed"
        )
    return envs
