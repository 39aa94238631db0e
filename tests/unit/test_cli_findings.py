"""Findings from the original's CLI tests (issue 31): duplicate ``-l`` keys, unknown
apiVersions, binary files to ``apply -f``, control characters echoed in "No jobs found"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_cli_commands import FakeClient, run


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKYSHIFT_SERVER", raising=False)


@pytest.mark.parametrize("args", [
    ["create", "job", "j", "-l", "k", "v", "-l", "k", "v2"],
    ["create", "cluster", "c", "--manager", "local", "-l", "k", "v", "-l", "k", "v2"],
    ["create", "fp", "p", "-l", "k", "v", "-l", "k", "v2"],
    ["create", "job", "j", "-e", "k", "v", "-e", "k", "v2"],
])
def test_a_key_given_twice_is_refused_not_silently_the_last(args: list[str]) -> None:
    fake = FakeClient()
    result = run(fake, *args)
    assert result.exit_code == 2
    assert "key 'k' is given more than once ('v' and 'v2'); give each key once" in result.stderr
    assert not [c for c in fake.calls if c[0] == "create"]


def test_distinct_keys_still_work() -> None:
    fake = FakeClient()
    result = run(fake, "create", "job", "j", "-l", "a", "1", "-l", "b", "2")
    assert result.exit_code == 0, result.output
    assert fake.calls[-1][1]["metadata"]["labels"] == {"a": "1", "b": "2"}


def test_unknown_api_version_is_refused_absent_and_v1_are_accepted() -> None:
    fake = FakeClient()
    bad = run(fake, "apply", "-f", "-", stdin="apiVersion: skyshift.io/v999\nkind: Job\n"
                                              "metadata: {name: a}\n")
    assert bad.exit_code == 2
    assert "apiVersion 'skyshift.io/v999' is not served: use skyshift.io/v1" in bad.stderr
    assert not [c for c in fake.calls if c[0] == "apply"]
    for head in ("", "apiVersion: skyshift.io/v1\n"):
        ok = run(fake, "apply", "-f", "-", stdin=f"{head}kind: Job\nmetadata: {{name: a}}\n")
        assert ok.exit_code == 0, ok.output


def test_binary_file_is_named_not_a_bare_unicode_error(tmp_path: Path) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(b"kind: Job\n\x89PNG\r\n\x1a\n\xff\xfe")
    result = run(FakeClient(), "apply", "-f", str(blob))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: {blob}: not a text manifest (byte 0x89 at offset 10 is not UTF-8); "
        "expected YAML or JSON")
    assert "UnicodeDecodeError" not in result.output


def test_no_objects_found_escapes_control_characters_in_the_namespace() -> None:
    result = run(FakeClient(), "get", "jobs", "-n", "evil\x1b[31m")
    assert result.exit_code == 0
    assert result.stderr.strip() == "No jobs found in namespace evil\\x1b[31m."
    assert "\x1b" not in result.stderr
