"""Label selector parsing and matching (Kubernetes syntax and semantics)."""

from __future__ import annotations

import pytest

from skyshift.store import InvalidSelector, StoreError, parse_selector

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        (None, True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),  # != matches objects without the label
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("missing in (x)", False),
        ("app notin (db, cache)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("!tier", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("  app = web ,  env in ( prod , dev )  ,!gpu ", True),
        ({"app": "web", "env": "prod"}, True),
        ({"app": "web", "env": "dev"}, False),
        ({}, True),
    ],
)
def test_matches(selector: str | dict[str, str] | None, expected: bool) -> None:
    assert parse_selector(selector).matches(LABELS) is expected


def test_full_grammar_round_trips() -> None:
    sel = parse_selector("a=b,c==d,e!=f,g in (x,y),h notin (z),i,!j")
    assert str(sel) == "a=b,c=d,e!=f,g in (x,y),h notin (z),i,!j"
    assert parse_selector(str(sel)) == sel
    assert sel.matches({"a": "b", "c": "d", "g": "y", "i": ""})
    assert not sel.matches({"a": "b", "c": "d", "g": "y", "i": "", "j": "1"})


def test_prefixed_keys_and_empty_values() -> None:
    sel = parse_selector("app.kubernetes.io/name=web,flag=")
    assert sel.matches({"app.kubernetes.io/name": "web", "flag": ""})
    assert not sel.matches({"app.kubernetes.io/name": "web", "flag": "x"})


def test_empty_selector_matches_unlabelled_objects() -> None:
    assert parse_selector("").empty
    assert parse_selector("").matches(None)
    assert parse_selector("!x").matches(None)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("a=b,", "expected a label key but the selector ended"),
        (",a=b", "expected a label key"),
        ("a b", "unexpected 'b' after label key 'a'"),
        ("a in ()", "needs at least one value"),
        ("a in (x", "expected ',' or ')'"),
        ("a in x", "expected '('"),
        ("a notin (x,,y)", "expected a value"),
        ("!", "expected a label key after '!'"),
        ("a=b=c", "expected ',' between requirements"),
        ("-a=b", "invalid label key '-a'"),
        ("a=" + "v" * 64, "invalid label value"),
        ("a=b c", "expected ',' between requirements"),
        ("a=-x", "invalid label value '-x'"),
    ],
)
def test_invalid_selectors_say_why(selector: str, message: str) -> None:
    with pytest.raises(InvalidSelector) as info:
        parse_selector(selector)
    assert message in str(info.value)
    assert repr(selector) in str(info.value) or "invalid label" in str(info.value)


def test_invalid_selector_is_a_value_error_and_a_store_error() -> None:
    with pytest.raises(ValueError):
        parse_selector("a in ()")
    with pytest.raises(StoreError):
        parse_selector({"a": 1})  # type: ignore[dict-item]
