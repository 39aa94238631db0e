"""docs/python-client.md's examples run as written, in order, against a live API on the real
etcd (auth on, lifecycles off), so the document cannot drift from the client."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.integration.test_cli import cli_api  # noqa: F401  (the module-scoped API fixture)

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-client.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_every_example_runs(cli_api: tuple[str, str],  # noqa: F811
                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url, token = cli_api
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SKYSHIFT_SERVER", url)
    monkeypatch.setenv("SKYSHIFT_TOKEN", token)
    code = blocks()
    assert len(code) >= 6
    scope: dict[str, object] = {"__name__": "doc"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(code):
            exec(compile(block, f"{DOC.name}[{i}]", "exec"), scope)
    text = out.getvalue()
    assert "someone changed it first:" in text
    assert re.search(r"timed out after 2s waiting for job hello-\w+ to reach "
                     r"phase=Succeeded: its phase is Pending", text), text
    assert re.search(r"^4\d\d \w+ spec.replicas - ", text, flags=re.MULTILINE), text
