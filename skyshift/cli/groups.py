"""Click plumbing that makes the CLI forgiving the way users of the original expect.

* Commands have aliases (``create svc``, ``get filterPolicies``, ``config use-ctx``), matched
  case-insensitively.
* Option names are normalised so ``--restart-policy`` and ``--restart_policy`` are the same
  flag: the original spelled flags with underscores, most CLIs use dashes; both work and help
  shows one spelling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click


def normalize_token(token: str) -> str:
    """Option and command names compare with ``-`` and ``_`` treated alike."""
    return token.replace("-", "_")


CONTEXT_SETTINGS: dict[str, Any] = {
    "token_normalize_func": normalize_token,
    "help_option_names": ["-h", "--help"],
    "max_content_width": 100,
}


class AliasedGroup(click.Group):
    """A group whose commands may have aliases; lookups ignore case and ``-`` vs ``_``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases: dict[str, str] = {}

    def add_aliases(self, name: str, aliases: Sequence[str]) -> None:
        for alias in aliases:
            self.aliases[self._key(alias)] = name

    @staticmethod
    def _key(name: str) -> str:
        return normalize_token(name).lower()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            return cmd
        key = self._key(cmd_name)
        for name in self.commands:
            if self._key(name) == key:
                return self.commands[name]
        target = self.aliases.get(key)
        return self.commands.get(target) if target else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        _, cmd, rest = super().resolve_command(ctx, args)
        return (cmd.name if cmd else None), cmd, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        reverse: dict[str, list[str]] = {}
        for alias, name in self.aliases.items():
            # short forms only (svc, fp, edp); plurals and case variants go without saying
            if len(alias) <= 5 and alias.rstrip("s") != name.lower():
                reverse.setdefault(name, []).append(alias)
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            label = name
            if reverse.get(name):
                label = f"{name} ({', '.join(sorted(reverse[name]))})"
            rows.append((label, cmd.get_short_help_str(limit=90)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def aliased(
        self, name: str, *aliases: str, **kwargs: Any
    ) -> Callable[[Callable[..., Any]], click.Command]:
        """``@group.aliased("service", "services", "svc")``: a command with aliases."""

        def deco(fn: Callable[..., Any]) -> click.Command:
            cmd = self.command(name, **kwargs)(fn)
            self.add_aliases(name, aliases)
            return cmd

        return deco
