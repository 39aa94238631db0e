"""Repeatable ``KEY VALUE`` options (``-l team ml -l zone a``) that become a mapping.

A key given twice used to keep the last value silently (``-l k v -l k v2`` made ``k=v2``);
it is refused instead, naming the option, the key and both values.
"""

from __future__ import annotations

import click

from skyshift.cli.render import printable


def unique_pairs(
    ctx: click.Context, param: click.Parameter, value: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """A click callback: ``value`` unchanged when every key appears once."""
    seen: dict[str, str] = {}
    for key, val in value or ():
        if key in seen:
            raise click.BadParameter(
                f"key {printable(key)!r} is given more than once "
                f"({printable(seen[key])!r} and {printable(val)!r}); give each key once",
                ctx=ctx, param=param,
            )
        seen[key] = val
    return value


