"""The pure parts of the API's hardening: YAML event scan, decoded-size walk, bounded patches,
lockouts, the audit budget, client addresses behind proxies, e-mail syntax."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skyshift.api import body, patches, safeyaml
from skyshift.api.auth.audit import Budget
from skyshift.api.auth.throttle import LoginThrottle
from skyshift.api.clientaddr import client_address, parse_proxies
from skyshift.api.errors import ApiError
from skyshift.api.limits import Limits, check_tree, field_path, measure
from skyshift.models.user import email_problem

SMALL = Limits(max_bytes=4096, max_depth=4, max_nodes=50, max_patch_ops=5)


def raises(code: int, fn: Any, *args: Any) -> ApiError:
    with pytest.raises(ApiError) as exc:
        fn(*args)
    assert exc.value.code == code, exc.value.message
    return exc.value


def test_field_path() -> None:
    assert field_path(["spec", "rules", 0, "actions"]) == "spec.rules[0].actions"
    assert field_path([]) is None
    assert field_path(["k"] * 200).endswith("...")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("a: &x 1\nb: *x\n", "a"),
        ("a: [1, &x {b: 1}]\n", "a[1]"),
        ("a:\n  b: [1, 2, *x]\n", "a.b[2]"),
        ("&top {a: 1}\n", None),
    ],
)
def test_yaml_anchors_and_aliases_are_refused_with_their_path(text: str, field: str) -> None:
    err = raises(400, safeyaml.scan, text, SMALL)
    assert err.field == field and "aliases" in err.message


def test_yaml_scan_bounds_depth_nodes_and_size() -> None:
    assert raises(400, safeyaml.scan, "a: {b: {c: {d: {e: 1}}}}\n", SMALL).field == "a.b.c.d"
    assert raises(413, safeyaml.scan, "[" + ",".join("1" * 60) + "]", SMALL).code == 413
    assert raises(413, safeyaml.scan, "a: " + "x" * 5000, SMALL).field == "a"
    assert safeyaml.scan("---\na: 1\n---\nb: 2\n", SMALL) == 2
    assert safeyaml.load("# only a comment\n---\na: [1, 2]\n", SMALL) == [{"a": [1, 2]}]


def test_check_tree() -> None:
    check_tree({"a": [1, {"b": "c"}]}, SMALL)
    assert raises(400, check_tree, {"a": {"b": {"c": {"d": {}}}}}, SMALL).field == "a.b.c.d"
    assert raises(413, check_tree, list(range(60)), SMALL).code == 413
    assert raises(413, check_tree, {"s": "x" * 5000}, SMALL).field == "s"
    deep: Any = 1
    for _ in range(100_000):  # deeper than any recursion limit: the walk is iterative
        deep = [deep]
    assert raises(400, check_tree, deep, SMALL).field == "[0][0][0][0]"


def test_measure_stops_at_its_budget() -> None:
    assert measure({"ab": "cd"}, 100) == 2 + 6 + 4
    big = ["x" * 100] * 1000
    assert measure(big, 500) == 501


def test_json_parse_depth_and_numbers() -> None:
    deep = b'{"a": ' * 5000 + b"1" + b"}" * 5000
    err = raises(400, body.parse_json, deep, SMALL)
    assert err.field == "a.a.a.a" and "nested more than 4 levels" in err.message
    with_strings = b'{"x": "[[[[{{", "l": [1, [2, [3, [4, [5]]]]]}'
    assert raises(400, body.parse_json, with_strings, SMALL).field == "l[1][1][1]"
    assert raises(400, body.parse_json, b"9" * 5000, SMALL).code == 400


def stored() -> dict[str, Any]:
    return {"kind": "Cluster", "metadata": {"name": "c", "labels": {}}, "spec": {"n": "x" * 100}}


def test_json_patch_copies_are_bounded_before_they_are_made() -> None:
    ops = [{"op": "copy", "from": "/spec", "path": f"/spec/c{i}"} for i in range(5)]
    limits = Limits(max_bytes=1000, max_patch_ops=10)
    err = raises(413, patches.apply_patch, stored(), "json-patch", ops, limits)
    assert err.field == "[3].from"  # 100, 200, 400 fit; 800 more would not
    ok = patches.apply_patch(stored(), "json-patch", ops[:2], limits)
    assert set(ok["spec"]) == {"n", "c0", "c1"}


def test_json_patch_op_count_and_errors_name_the_operation() -> None:
    test = {"op": "test", "path": "/kind", "value": "Cluster"}
    err = raises(400, patches.apply_patch, stored(), "json-patch", [test] * 6, SMALL)
    assert err.field == "[5]"
    current = stored()
    before = copy.deepcopy(current)
    bad = [test, {"op": "remove", "path": "/spec/missing"}]
    assert raises(422, patches.apply_patch, current, "json-patch", bad, SMALL).field == "[1].path"
    assert current == before  # the original is never touched


def test_patched_result_is_bounded_but_large_objects_may_shrink() -> None:
    limits = Limits(max_bytes=300)
    grow = {"metadata": {"annotations": {"a": "x" * 300}}}
    assert raises(413, patches.apply_patch, stored(), "merge-patch", grow, limits).code == 413
    large = stored()
    large["status"] = {"message": "m" * 1000}  # written by the server, past the limit
    out = patches.apply_patch(large, "merge-patch", {"spec": {"n": "y"}}, limits)
    assert out["spec"]["n"] == "y"


# --- auth: lockouts, audit budget, client addresses, e-mail -----------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_lockout_is_per_user_and_address_with_a_higher_total() -> None:
    clock = Clock()
    t = LoginThrottle(per_user=10, per_address=100, window=60, clock=clock, per_user_address=3)
    for _ in range(3):
        t.failed("admin", "6.6.6.6")
    assert t.retry_after("admin", "6.6.6.6") > 0  # locked out from there
    assert t.retry_after("admin", "7.7.7.7") == 0  # not from elsewhere
    assert t.retry_after("bob", "6.6.6.6") == 0
    for address in ("1.0.0.1", "1.0.0.2", "1.0.0.3"):
        for _ in range(2):
            t.failed("admin", address)
    t.failed("admin", "1.0.0.4")  # 10 failures in all
    assert t.retry_after("admin", "7.7.7.7") > 0  # the total for the user
    clock.now += 61
    assert t.retry_after("admin", "6.6.6.6") == 0
    t.failed("carol", "8.8.8.8")
    t.succeeded("carol", "8.8.8.8")
    assert not t.pairs.retry_after("carol\x008.8.8.8") and not t.users.retry_after("carol")


def test_failing_from_many_addresses_does_not_lock_the_user_out_where_it_logs_in() -> None:
    """Issue 26: 110 failed logins from 22 loopback addresses locked the user out of every
    address. The total still bounds guessing from any other address; the addresses the user
    logged in from keep only their own per-address limit."""
    clock = Clock()
    t = LoginThrottle(per_user=100, per_address=20, window=300, clock=clock, per_user_address=5)
    t.succeeded("alice", "10.0.0.7")  # alice's usual address
    for i in range(22):
        for _ in range(5):
            t.failed("alice", f"127.0.0.{i + 2}")
    assert t.retry_after("alice", "127.0.0.2") > 0  # each attacking address is locked out
    assert t.retry_after("alice", "203.0.113.9") > 0  # as is any new one: the total holds
    assert t.retry_after("alice", "10.0.0.7") == 0  # alice still logs in from her address
    for _ in range(5):
        t.failed("alice", "10.0.0.7")
    assert t.retry_after("alice", "10.0.0.7") > 0  # and guessing from there is still limited
    clock.now += 31 * 86400
    t.failed("alice", "127.0.0.2")
    for _ in range(100):
        t.failed("alice", "127.0.0.3")
    assert t.retry_after("alice", "10.0.0.7") > 0  # a success 31 days old is forgotten


def test_anonymous_audit_budget() -> None:
    clock = Clock()
    budget = Budget(3, window=60, clock=clock)
    assert [budget.take() for _ in range(5)] == [True, True, True, False, False]
    clock.now += 60
    assert budget.take()


async def test_denied_records_past_the_budget_are_counted_in_the_next_one() -> None:
    from skyshift.api.auth.audit import AuditMiddleware, note

    written: list[dict[str, object]] = []

    async def writer(fields: dict[str, object]) -> None:
        written.append(fields)

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        note(type("R", (), {"scope": scope})(), user=scope["user"])  # type: ignore[arg-type]
        await send({"type": "http.response.start", "status": 403})  # type: ignore[operator]

    async def send(message: object) -> None:
        pass

    middleware = AuditMiddleware(app, writer, denied_per_minute=2)  # type: ignore[arg-type]
    clock = Clock()
    middleware.denied.clock = clock

    async def deny(user: str) -> None:
        await middleware({"type": "http", "method": "DELETE", "path": "/x", "user": user},
                         None, send)  # type: ignore[arg-type]

    for _ in range(5):
        await deny("nosy")
    await deny("other")
    assert [w["user"] for w in written] == ["nosy", "nosy", "other"]
    clock.now += 61
    await deny("nosy")
    assert written[-1]["details"] == {"deniedNotRecorded": 3}


def test_client_address_believes_only_trusted_proxies() -> None:
    proxies = parse_proxies("10.0.0.0/8, 192.0.2.1, ::1")
    assert client_address("203.0.113.5", ["1.2.3.4"], proxies) == "203.0.113.5"
    assert client_address("10.1.1.1", ["1.2.3.4"], proxies) == "1.2.3.4"
    assert client_address("10.1.1.1", ["6.6.6.6, 1.2.3.4, 10.2.2.2"], proxies) == "1.2.3.4"
    assert client_address("10.1.1.1", ["6.6.6.6", "1.2.3.4"], proxies) == "1.2.3.4"
    assert client_address("10.1.1.1", [], proxies) == "10.1.1.1"
    assert client_address("10.1.1.1", ["10.3.3.3"], proxies) == "10.3.3.3"
    assert client_address("127.0.0.1", ["1.2.3.4"], ()) == "127.0.0.1"
    assert parse_proxies("") == ()
    with pytest.raises(ValueError, match="SKYSHIFT_TRUSTED_PROXIES: 'nope'"):
        parse_proxies("10.0.0.1, nope")


@pytest.mark.parametrize(
    ("email", "ok"),
    [
        ("m@example.com", True),
        ("first.last+tag@sub.example.org", True),
        ("not-an-email", False),
        ("a@b", False),
        ("two@@example.com", False),
        ("x@exa mple.com", False),
        ("@example.com", False),
        ("dot.@example.com", False),
        ("a@-bad.com", False),
        ("a" * 65 + "@example.com", False),
    ],
)
def test_email_problem(email: str, ok: bool) -> None:
    assert (email_problem(email) is None) == ok
