"""Kubernetes label selectors: parse once, match many objects.

``list`` and ``watch`` filter by labels, and ``skyctl get -l``/``?labelSelector=`` pass the user's
string straight through, so the syntax is Kubernetes' own::

    a=b, c==d, e!=f, g in (x,y), h notin (z), i, !j

Requirements are ANDed. ``!=`` and ``notin`` also match objects without the label, as in
Kubernetes. A ``dict`` is accepted as shorthand for equality requirements. Pure code: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, NoReturn

from skyshift.store.errors import InvalidSelector

Operator = Literal["=", "!=", "in", "notin", "exists", "!"]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_KEY_RE = re.compile(rf"^(?:(?P<prefix>{_DNS_LABEL}(?:\.{_DNS_LABEL})*)/)?(?P<name>{_NAME})$")
_VALUE_RE = re.compile(rf"^(?:{_NAME})?$")
_SPECIAL = "!=(),"


@dataclass(frozen=True)
class Requirement:
    """One clause of a selector: ``key op values``."""

    key: str
    op: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin": a missing label matches, as in Kubernetes.
        return not present or labels[self.key] not in self.values

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!":
            return f"!{self.key}"
        if self.op in ("=", "!="):
            (value,) = self.values
            return f"{self.key}{self.op}{value}"
        return f"{self.key} {self.op} ({','.join(sorted(self.values))})"


@dataclass(frozen=True)
class Selector:
    """A parsed selector; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def parse_selector(sel: str | Mapping[str, str] | Selector | None) -> Selector:
    """Parse a selector string (or an equality dict); raises :class:`InvalidSelector`."""
    if sel is None:
        return Selector()
    if isinstance(sel, Selector):
        return sel
    if isinstance(sel, Mapping):
        reqs = []
        for key, value in sel.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidSelector(f"label selector dict must map str to str, got {key!r}")
            reqs.append(Requirement(_check_key(key, str(dict(sel))), "=", frozenset([value])))
            _check_value(value, str(dict(sel)))
        return Selector(tuple(reqs))
    if not isinstance(sel, str):
        raise InvalidSelector(
            f"label selector must be a string or a dict, not {type(sel).__name__}"
        )
    return _Parser(sel).parse()


def _check_key(key: str, text: str) -> str:
    m = _KEY_RE.fullmatch(key)
    if m is None or len(m.group("name")) > 63 or len(m.group("prefix") or "") > 253:
        raise InvalidSelector(
            f"invalid label key {key!r} in selector {text!r}: expected an optional DNS prefix "
            "and '/', then at most 63 characters of [A-Za-z0-9-_.] starting and ending "
            "alphanumeric"
        )
    return key


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE_RE.fullmatch(value):
        raise InvalidSelector(
            f"invalid label value {value!r} in selector {text!r}: at most 63 characters of "
            "[A-Za-z0-9-_.] starting and ending alphanumeric (or empty)"
        )
    return value


def _tokens(text: str) -> Iterator[str]:
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "!=" and text[i + 1 : i + 2] == "=":
            yield c + "="
            i += 2
        elif c in _SPECIAL:
            yield c
            i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            yield text[i:j]
            i = j


class _Parser:
    """Recursive descent over the token list; every error quotes the whole selector."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = list(_tokens(text))
        self.pos = 0

    def _peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def _next(self, expected: str) -> str:
        tok = self._peek()
        if tok is None:
            self._fail(f"expected {expected} but the selector ended")
        self.pos += 1
        return tok

    def _fail(self, why: str) -> NoReturn:
        raise InvalidSelector(f"invalid label selector {self.text!r}: {why}")

    def parse(self) -> Selector:
        reqs: list[Requirement] = []
        if not self.toks:
            return Selector()
        while True:
            reqs.append(self._requirement())
            tok = self._peek()
            if tok is None:
                return Selector(tuple(reqs))
            if tok != ",":
                self._fail(f"expected ',' between requirements, found {tok!r}")
            self.pos += 1

    def _ident(self, what: str) -> str:
        tok = self._next(what)
        if tok in _SPECIAL or tok in ("==", "!="):
            self._fail(f"expected {what}, found {tok!r}")
        return tok

    def _requirement(self) -> Requirement:
        if self._peek() == "!":
            self.pos += 1
            return Requirement(_check_key(self._ident("a label key after '!'"), self.text), "!")
        key = _check_key(self._ident("a label key"), self.text)
        tok = self._peek()
        if tok is None or tok == ",":
            return Requirement(key, "exists")
        self.pos += 1
        if tok in ("=", "==", "!="):
            value = ""
            nxt = self._peek()
            if nxt is not None and nxt != ",":
                value = self._ident(f"a value after {key}{tok}")
            op: Operator = "!=" if tok == "!=" else "="
            return Requirement(key, op, frozenset([_check_value(value, self.text)]))
        if tok in ("in", "notin"):
            return Requirement(key, "in" if tok == "in" else "notin", self._value_set(key, tok))
        self._fail(f"unexpected {tok!r} after label key {key!r} (expected =, ==, !=, in, notin)")

    def _value_set(self, key: str, op: str) -> frozenset[str]:
        if self._next(f"'(' after '{key} {op}'") != "(":
            self._fail(f"expected '(' after '{key} {op}'")
        values: list[str] = []
        while True:
            tok = self._next("a value or ')'")
            if tok == ")" and not values:
                self._fail(f"'{key} {op} ()' needs at least one value")
            if tok in (",", ")") or tok in _SPECIAL:
                self._fail(f"expected a value in '{key} {op} (...)', found {tok!r}")
            values.append(_check_value(tok, self.text))
            sep = self._next("',' or ')'")
            if sep == ")":
                return frozenset(values)
            if sep != ",":
                self._fail(f"expected ',' or ')' in '{key} {op} (...)', found {sep!r}")
