"""The one error type of the embedded stack, in a module of its own so every devstack module can
raise it without importing :mod:`skyshift.devstack.components` (which imports them)."""

from __future__ import annotations


class StackError(Exception):
    """A failure reported to the user as one line (plus, at most, a log tail)."""
