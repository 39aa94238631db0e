"""Error mapping, settings and kubeconfig helpers of the Kubernetes adapter (no cluster)."""

from __future__ import annotations

import json

import pytest
import urllib3
import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from skyshift.compat import create_manager
from skyshift.compat.errors import NotFound, Permanent, Transient, Unsupported
from skyshift.compat.kubernetes.adapter import KubernetesManager
from skyshift.compat.kubernetes.api import (
    Conflict,
    KubeSettings,
    error_for_status,
    list_contexts,
    resolve_context,
    translate,
)


def status_body(reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "status": "Failure", "reason": reason,
                       "message": message}).encode()


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, Permanent), (401, Permanent), (403, Permanent), (404, NotFound), (405, Unsupported),
     (409, Conflict), (410, Transient), (422, Permanent), (429, Transient), (500, Transient),
     (503, Transient), (504, Transient)],
)
def test_error_for_status(status, kind):
    err = error_for_status(status, status_body("Reason", "the message"), "create pod p")
    assert type(err) is kind
    assert "create pod p" in str(err) and "the message" in str(err) and str(status) in str(err)


def test_conflict_is_permanent_for_callers_that_do_not_adopt():
    assert isinstance(error_for_status(409, b"", "x"), Permanent)


def test_forbidden_while_service_account_or_namespace_catch_up_is_transient():
    msg = 'pods "p" is forbidden: error looking up service account skyshift/default: not found'
    assert type(error_for_status(403, status_body("Forbidden", msg), "x")) is Transient
    msg = "unable to create new content in namespace skyshift because it is being terminated"
    assert type(error_for_status(403, status_body("Forbidden", msg), "x")) is Transient


def test_non_json_body_is_kept():
    err = error_for_status(502, b"<html>bad gateway</html>", "x")
    assert type(err) is Transient and "bad gateway" in str(err)


def test_translate_client_exceptions():
    assert type(translate(ApiException(status=404, reason="Not Found"), "x")) is NotFound
    assert type(translate(ApiException(status=0, reason="Handshake status 403 Forbidden"),
                          "x")) is Permanent
    assert type(translate(ApiException(status=0, reason="Handshake status 404 Not Found"),
                          "x")) is NotFound
    assert type(translate(ApiException(status=0, reason="SSL: CERTIFICATE_VERIFY_FAILED"),
                          "x")) is Permanent
    refused = urllib3.exceptions.MaxRetryError(
        None, "/api", reason=ConnectionRefusedError()  # type: ignore[arg-type]
    )
    assert type(translate(refused, "x")) is Transient
    timeout = urllib3.exceptions.ReadTimeoutError(None, "/", "timed out")  # type: ignore[arg-type]
    assert type(translate(timeout, "x")) is Transient
    assert type(translate(ConnectionResetError(), "x")) is Transient
    assert type(translate(ConfigException("no context"), "x")) is Permanent
    same = NotFound("already mapped")
    assert translate(same, "x") is same


def test_settings_parse_and_reject():
    s = KubeSettings.parse("c", {"context": "ctx", "namespace": "team-a", "grace_period": 3})
    assert (s.context, s.namespace, s.grace_period, s.watch) == ("ctx", "team-a", 3, True)
    for bad in ({"namespace": "Team_A"}, {"image_pull_policy": "Sometimes"},
                {"annotations": {"a": 1}}, {"grace_period": -1}, {"request_timeout": 0},
                {"context": ""}, {"unknown_key": 1}):
        with pytest.raises(Permanent, match="kubernetes cluster c"):
            KubeSettings.parse("c", bad)


def test_create_manager_builds_k8_when_registered():
    manager = create_manager("c", "k8", {"context": "ctx"})
    assert isinstance(manager, KubernetesManager) and manager.manager == "k8"


def kubeconfig(tmp_path, contexts: list[str], current: str) -> str:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": c, "cluster": {"server": "https://127.0.0.1:1"}} for c in contexts],
        "users": [{"name": c, "user": {"token": "t"}} for c in contexts],
        "contexts": [{"name": c, "context": {"cluster": c, "user": c}} for c in contexts],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_list_contexts_current_first(tmp_path):
    path = kubeconfig(tmp_path, ["a", "b", "c"], current="b")
    assert list_contexts(path) == ["b", "a", "c"]
    with pytest.raises(Permanent):
        list_contexts(str(tmp_path / "missing"))


async def test_unreachable_cluster_is_transient_and_unknown_context_permanent(tmp_path):
    path = kubeconfig(tmp_path, ["a"], current="a")  # nothing listens on port 1
    manager = KubernetesManager("c", {"kubeconfig": path})
    with pytest.raises(Transient):
        await manager.connect()
    with pytest.raises(Transient):
        await manager.state()
    await manager.close()
    with pytest.raises(Permanent, match="nope"):
        await KubernetesManager("c", {"kubeconfig": path, "context": "nope"}).connect()


@pytest.mark.parametrize(
    ("channel", "code"),
    [("", 0), ('{"status":"Success"}', 0),
     ('{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":'
      '[{"reason":"ExitCode","message":"42"}]}}', 42),
     ('{"status":"Failure","message":"cmd wait: sh -c x: exit status 3"}', 3)],
)
def test_exec_exit_codes(channel, code):
    assert KubernetesManager._exit_code(channel, "exec") == code


def test_exec_without_exec_support_is_unsupported():
    with pytest.raises(Unsupported):
        KubernetesManager._exit_code('{"status":"Failure","message":"no exec found for x"}', "e")


def _cause_chain(err: BaseException) -> list[BaseException]:
    """The ``__cause__`` chain of ``err``; fails on a cycle (which made the skylet recurse)."""
    seen: list[BaseException] = []
    while err is not None:
        assert all(err is not s for s in seen), f"{type(err).__name__} is its own cause"
        seen.append(err)
        err = err.__cause__  # type: ignore[assignment]
    return seen


async def test_compat_errors_are_not_chained_to_themselves(tmp_path):
    """A Permanent raised below request()/open_watch() must reach the caller as it was.

    ``raise translate(exc) from exc`` returned the same CompatError and chained it to itself;
    Temporal's failure converter then recursed until RecursionError (megabytes of log per minute)
    and the permanent error was retried without limit.
    """
    from temporalio.api.failure.v1 import Failure
    from temporalio.converter import DataConverter
    from temporalio.exceptions import ApplicationError

    path = kubeconfig(tmp_path, ["a"], current="a")
    api = KubernetesManager("c", {"kubeconfig": path, "context": "nope"}).api
    for call in (lambda: api.request("GET", "/api/v1/pods"),
                 lambda: api.open_watch("/api/v1/pods", {}, 1.0)):
        with pytest.raises(Permanent, match="nope") as info:
            call()
        _cause_chain(info.value)
        # what an activity does with it: a non-retryable ApplicationError, encoded for Temporal
        try:
            raise ApplicationError(str(info.value), non_retryable=True) from info.value
        except ApplicationError as app_err:
            failure = Failure()
            DataConverter.default.failure_converter.to_failure(
                app_err, DataConverter.default.payload_converter, failure
            )
        assert failure.application_failure_info.non_retryable
        assert "nope" in failure.message


def test_context_defaults_to_the_cluster_name_or_the_only_one(tmp_path):
    """Issue 31: ``create cluster sim-k8s-2`` without --context took the current context, so
    two SkyShift clusters were one physical cluster. The original's rule: the context named
    like the cluster; one context only: that one; several and none so named: refuse."""
    path = kubeconfig(tmp_path, ["sim-k8s-1", "sim-k8s-2"], current="sim-k8s-1")
    assert resolve_context("sim-k8s-2", path, None) == "sim-k8s-2"
    assert resolve_context("sim-k8s-1", path, None) == "sim-k8s-1"
    assert resolve_context("other", path, "sim-k8s-2") == "sim-k8s-2"  # explicit wins
    with pytest.raises(Permanent) as err:
        resolve_context("other", path, None)
    assert "sim-k8s-1, sim-k8s-2" in str(err.value) and "--context" in str(err.value)
    single = tmp_path / "single"
    single.mkdir()
    assert resolve_context("other", kubeconfig(single, ["only"], current="only"), None) == "only"


async def test_ambiguous_kubeconfig_fails_to_attach(tmp_path):
    path = kubeconfig(tmp_path, ["a", "b"], current="a")
    with pytest.raises(Permanent, match="none is named c"):
        await KubernetesManager("c", {"kubeconfig": path}).connect()
