"""Names, label keys and values, and the other strings the models check with a regex, refuse a
trailing newline: ``$`` also matches before a final "\\n", so ``re.match`` on ``^...$`` let
"web\\n" through, and the newline then reached file names, HAProxy's configuration and
command lines."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from skyshift.models.cluster_provision import check_infra
from skyshift.models.image import validate_image
from skyshift.models.meta import (
    ObjectMeta,
    validate_label_key,
    validate_label_value,
    validate_name,
)
from skyshift.models.schedule import parse_duration
from skyshift.store.selectors import parse_selector


@pytest.mark.parametrize("bad", ["web\n", "a\n"])
def test_name_with_trailing_newline_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="DNS-1123"):
        validate_name(bad)
    with pytest.raises(ValidationError):
        ObjectMeta(name=bad)
    with pytest.raises(ValidationError):
        ObjectMeta(name="ok", namespace=bad)


def test_label_key_and_value_with_trailing_newline_are_refused() -> None:
    with pytest.raises(ValueError):
        validate_label_key("app\n")
    with pytest.raises(ValueError):
        validate_label_key("example.com\n/app")
    with pytest.raises(ValueError):
        validate_label_value("web\n")
    with pytest.raises(ValidationError):
        ObjectMeta(name="ok", labels={"app": "web\n"})
    assert validate_label_value("web") == "web"


def test_other_regex_checks_refuse_a_trailing_newline() -> None:
    with pytest.raises(ValueError):
        validate_image("ubuntu:22.04\n")
    with pytest.raises(ValueError):
        check_infra("aws\n", "spec.infra")
    assert parse_duration("5m") == 300
    assert str(parse_selector("app=web")) == "app=web"
