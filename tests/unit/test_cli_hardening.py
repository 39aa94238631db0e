"""What the original's CLI tests caught in skyctl: empty names, unchecked e-mails, Links whose
ends are missing or the same (click's CliRunner and the models, no server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from skyshift.cli.main import cli
from skyshift.models.link import Link


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYSHIFT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SKYSHIFT_SERVER", "http://127.0.0.1:9")  # never reached


@pytest.mark.parametrize("args", [
    ["get", "cluster", ""], ["get", "jobs", "  "], ["describe", "job", ""],
    ["delete", "job", "ok", ""], ["logs", ""], ["create", "job", "", "--run", "true"],
])
def test_an_empty_name_is_a_usage_error_not_a_listing(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "must not be empty" in result.stderr and "Traceback" not in result.output


def test_register_checks_the_email_before_anything_else() -> None:
    result = CliRunner().invoke(cli, ["register", "bob", "pw-long-enough-1", "--invite", "x",
                                      "--email", "bob@nowhere"])
    assert result.exit_code == 2
    assert "--email" in result.stderr and "not a valid e-mail address" in result.stderr
    assert "cannot reach" not in result.stderr  # refused before any request


@pytest.mark.parametrize(("spec", "why"), [
    ({"source_cluster": "", "target_cluster": "b"}, "source_cluster"),
    ({"target_cluster": "b"}, "source_cluster"),
    ({"source_cluster": "a"}, "target_cluster"),
    ({"source_cluster": "a", "target_cluster": "a"}, "two different clusters"),
])
def test_a_link_needs_two_different_named_ends(spec: dict[str, str], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        Link.model_validate({"metadata": {"name": "l"}, "spec": spec})


def test_a_link_between_two_clusters_is_valid() -> None:
    link = Link.model_validate({"metadata": {"name": "l"},
                                "spec": {"source_cluster": "a", "target_cluster": "b"}})
    assert (link.spec.source_cluster, link.spec.target_cluster) == ("a", "b")


def test_exposed_endpoints_need_a_named_primary_cluster_as_the_help_says() -> None:
    helped = CliRunner().invoke(cli, ["create", "edps", "--help"])
    assert "--exposed" in helped.stdout and "must be named" in helped.stdout
    result = CliRunner().invoke(cli, ["create", "edps", "e", "--exposed", "--dry-run"])
    assert result.exit_code == 2 and "--exposed needs --primary_cluster" in result.stderr
    ok = CliRunner().invoke(cli, ["create", "edps", "e", "--exposed", "--primary_cluster", "c1",
                                  "--num_endpoints", "2", "--dry-run"])
    assert ok.exit_code == 0, ok.output
    assert "exposed_to_cluster: true" in ok.stdout


def test_the_originals_context_name_admin_default_selects_the_local_context() -> None:
    runner = CliRunner()
    made = runner.invoke(cli, ["config", "set-context", "other", "--server",
                               "http://10.0.0.5:50051", "--namespace", "dev", "--user", "alice",
                               "--use"])
    assert made.exit_code == 0, made.output
    result = runner.invoke(cli, ["config", "use-context", "admin-default"])
    assert result.exit_code == 0, result.output
    assert "Switched to context 'local'" in result.stdout
    assert runner.invoke(cli, ["config", "current-context"]).stdout == "local\n"
    assert runner.invoke(cli, ["config", "use-context", "alice-dev"]).exit_code == 0
    assert runner.invoke(cli, ["config", "current-context"]).stdout == "other\n"
    missing = runner.invoke(cli, ["config", "use-context", "bob-prod"])
    assert missing.exit_code == 1 and "not found" in missing.stderr


@pytest.mark.parametrize(("args", "named"), [
    (["create", "job", "c8", "-n", "ns", "--run", "echo \udcff"], "--run: "),
    (["create", "job", "c8", "--run=echo \udcff"], "--run: "),
    (["create", "job", "c8", "-e", "K", "v\udcff"], "argument 'v\\udcff'"),
    (["create", "job", "c\udcff"], "argument 'c\\udcff'"),
    (["exec", "c8", "--", "echo", "\udcff"], "argument '\\udcff'"),
])
def test_an_argument_that_is_not_utf8_is_a_usage_error_naming_it(
    args: list[str], named: str
) -> None:
    """A non-UTF-8 byte arrives as a lone surrogate, which no request can carry."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {named}"), result.stderr
    assert "not valid UTF-8 text (byte 0xff)" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "cannot reach" not in result.stderr


def test_the_console_script_refuses_a_non_utf8_option_value_before_any_request() -> None:
    argv = [sys.executable, "-m", "skyshift.cli.main", "create", "job", "c8", "--run"]
    done = subprocess.run([*argv, b"echo \xff"], capture_output=True, env=os.environ,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == b"error: --run: the value is not valid UTF-8 text (byte 0xff)\n"


@pytest.mark.parametrize("body, key, got", [
    ("kind: Job\nmetadata: abc\nspec: {image: x}\n", "metadata", "str"),
    ("kind: Job\nmetadata: [a, b]\n", "metadata", "list"),
    ("kind: Job\nmetadata: {name: a}\nspec: 3\n", "spec", "int"),
])
def test_a_manifest_of_the_wrong_shape_names_the_file_and_key(
    tmp_path: Path, body: str, key: str, got: str
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(body)
    for args in (["apply", "-f", str(path)], ["apply", "-f", str(path), "--dry-run"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code != 0
        assert f"{path}: {key} must be a mapping, got {got}" in result.output, result.output
        assert "Traceback" not in result.output and "ValueError" not in result.output


def test_a_config_file_of_the_wrong_shape_names_the_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "home" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("contexts: 5\n")
    result = CliRunner().invoke(cli, ["config", "current-context"])
    assert result.exit_code != 0
    assert f"{config}: contexts must be a list of mappings" in result.output, result.output
    assert "TypeError" not in result.output and "Traceback" not in result.output
