"""Label matching shared by placement filters, preferences and FilterPolicy selectors.

Every check returns why it failed rather than a bare bool, so that a pending job can tell its
user which label kept it off a cluster.
"""

from collections.abc import Iterable, Mapping

from skyshift.scheduler.types import Expression


def _values(values: Iterable[str]) -> str:
    return "[" + ", ".join(values) + "]"


def label_mismatch(key: str, want: str, labels: Mapping[str, str]) -> str | None:
    """Why ``labels`` lacks ``key=want`` (None when it has it)."""
    have = labels.get(key)
    if have is None:
        return f"label {key} missing (want {key}={want})"
    if have != want:
        return f"label {key}={have}, want {want}"
    return None


def expression_mismatch(expr: Expression, labels: Mapping[str, str]) -> str | None:
    """Why ``labels`` fails ``expr`` (None when it holds)."""
    op = expr.operator.lower()
    have = labels.get(expr.key)
    if op == "in":
        if have is None:
            return f"label {expr.key} missing (want In {_values(expr.values)})"
        if have not in expr.values:
            return f"label {expr.key}={have} not In {_values(expr.values)}"
        return None
    if op == "notin":
        if have is not None and have in expr.values:
            return f"label {expr.key}={have} is NotIn {_values(expr.values)}"
        return None
    if op == "exists":
        return None if have is not None else f"label {expr.key} missing (want Exists)"
    if op == "doesnotexist":
        return None if have is None else f"label {expr.key}={have} present (want DoesNotExist)"
    return f"unknown operator {expr.operator!r} on label {expr.key}"


def selector_mismatch(
    match_labels: Mapping[str, str],
    match_expressions: Iterable[Expression],
    labels: Mapping[str, str],
) -> list[str]:
    """Every unmet label and expression (empty list: the selector matches)."""
    out: list[str] = []
    for key in sorted(match_labels):
        if (why := label_mismatch(key, match_labels[key], labels)) is not None:
            out.append(why)
    for expr in match_expressions:
        if (why := expression_mismatch(expr, labels)) is not None:
            out.append(why)
    return out


def selector_matches(
    match_labels: Mapping[str, str],
    match_expressions: Iterable[Expression],
    labels: Mapping[str, str],
) -> bool:
    """True when all of ``match_labels`` and all of ``match_expressions`` hold for ``labels``."""
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    return all(expression_mismatch(e, labels) is None for e in match_expressions)
