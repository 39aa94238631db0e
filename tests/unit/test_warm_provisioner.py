"""The control worker gets its provisioner ready at start (``SKYSHIFT_WARM_PROVISIONER``, on by
default): SkyPilot's driver starts its runner, whose SkyPilot import (seconds) the first
provisioned Cluster after a start otherwise waited for inside its launch. Best effort: a
provisioner without ``warm()``, or one that cannot be built or started, is left to the first
launch, which says what is wrong."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skyshift.activities import provisioning
from skyshift.activities.provisioning import register_provisioner, warm_provisioner
from skyshift.workers.common import env_flag


class _Warmable:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def warm(self) -> None:
        self.calls.append("warm")


class _Plain:
    """A provisioner without warm()."""


class _Failing:
    def warm(self) -> None:
        raise OSError("setpriv: not found")


@pytest.fixture
def names() -> Iterator[list[str]]:
    added: list[str] = []
    yield added
    for name in added:
        provisioning._REGISTRY.pop(name, None)


def test_warm_starts_the_provisioner_once_built(names: list[str]) -> None:
    calls: list[str] = []
    names.append("test-warm")
    register_provisioner("test-warm", lambda: _Warmable(calls))  # type: ignore[arg-type,return-value]
    warm_provisioner("test-warm")
    assert calls == ["warm"]


def test_warm_is_optional_and_never_raises(names: list[str],
                                           caplog: pytest.LogCaptureFixture) -> None:
    names.extend(["test-plain", "test-failing"])
    register_provisioner("test-plain", _Plain)  # type: ignore[arg-type]
    register_provisioner("test-failing", _Failing)  # type: ignore[arg-type]
    warm_provisioner("test-plain")
    with caplog.at_level("INFO", logger=provisioning.__name__):
        warm_provisioner("test-failing")
        warm_provisioner("no-such-manager")  # unknown: nothing to warm, and no error
    said = caplog.text
    assert "provisioner test-failing not warmed: setpriv: not found" in said
    assert "provisioner no-such-manager not warmed" in said


def test_the_setting_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "SKYSHIFT_WARM_PROVISIONER"
    monkeypatch.delenv(name, raising=False)
    assert env_flag(name, default=True)
    for off in ("0", "false", "off", "no"):
        monkeypatch.setenv(name, off)
        assert not env_flag(name, default=True)
    monkeypatch.setenv(name, "1")
    assert env_flag(name, default=True)
    monkeypatch.setenv(name, "")
    assert env_flag(name, default=True) and not env_flag(name)
