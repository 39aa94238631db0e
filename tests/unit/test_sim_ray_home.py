"""Where ``skyshift sim ray`` keeps its heads by default: as root, outside the 0700 home that
`skyshift up` keeps (the heads run as skyshift-run, which must enter it), and never in a /tmp
entry that is not root's own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skyshift.devstack.sim import ray as sim_ray


def test_an_ordinary_user_keeps_the_heads_under_the_skyshift_home(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "sk"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert sim_ray.default_home() == tmp_path / "sk" / "sim" / "ray"


def test_root_keeps_them_in_a_short_tmp_dir_of_each_home(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "one"))
    one = sim_ray.default_home()
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "two"))
    two = sim_ray.default_home()
    assert one.parent == two.parent == Path("/tmp") and one != two
    assert len(str(one)) < 40  # Ray's socket paths go under it


def test_root_refuses_a_link_in_its_place(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "skyshift-ray-x"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(sim_ray.SimRayError, match="not a directory of root's"):
        sim_ray.make_default_home(link)
