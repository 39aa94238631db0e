"""User names: as wide as the original's (``john_doe``, ``JohnDoe``), still safe as keys and
URL segments (no '/', '.', spaces or control characters, at most 63 characters)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from skyshift.models import Job
from skyshift.models.user import User


@pytest.mark.parametrize("name", ["john_doe", "JohnDoe", "a", "x-y_z9", "j" * 63])
def test_accepted(name: str) -> None:
    assert User.model_validate({"metadata": {"name": name}}).metadata.name == name


@pytest.mark.parametrize("name", ["a/b", "../x", "_x", "x_", "a.b", "a b", "x\n", "x\x00y",
                                  "", "j" * 64, "é"])
def test_refused_naming_the_rule(name: str) -> None:
    with pytest.raises(ValidationError, match="letters, digits, '_' and '-'"):
        User.model_validate({"metadata": {"name": name}})


def test_other_kinds_keep_dns_names() -> None:
    with pytest.raises(ValidationError, match="DNS-1123"):
        Job.model_validate({"metadata": {"name": "john_doe"}})
