"""Per-invocation CLI state: which context and server to use, and the lazily built client.

Commands receive it through ``@pass_state``; unit tests inject a fake client through
``client_factory`` instead of starting a server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import click

from skyshift.cli.errors import CliError
from skyshift.client import SkyShiftClient
from skyshift.client.config import (
    CliConfig,
    Context,
    load_config,
    resolve_server,
    resolve_token,
)


@dataclass
class CliState:
    server: str | None = None
    context: str | None = None
    client_factory: Callable[[CliState], Any] | None = None
    _config: CliConfig | None = field(default=None, repr=False)
    _client: Any = field(default=None, repr=False)

    def config(self) -> CliConfig:
        if self._config is None:
            try:
                self._config = load_config()
            except (OSError, ValueError) as exc:
                raise CliError(f"cannot read the skyctl config file: {exc}") from exc
        return self._config

    def current_context(self) -> Context:
        cfg = self.config()
        if self.context:
            for ctx in cfg.contexts:
                if ctx.name == self.context:
                    return ctx
            names = ", ".join(c.name for c in cfg.contexts) or "none"
            raise CliError(f"context {self.context!r} not found (contexts: {names})")
        return cfg.current()

    def namespace(self, given: str | None = None) -> str:
        """The ``-n`` value, else the context's namespace, else ``default``."""
        return given or self.current_context().namespace or "default"

    def server_url(self) -> str:
        ctx = self.current_context()
        return resolve_server(self.server, CliConfig(current_context=ctx.name, contexts=[ctx]))

    def client(self) -> SkyShiftClient:
        """The API client (built once; typed as the real client, fakes duck-type it)."""
        if self._client is None:
            if self.client_factory is not None:
                self._client = self.client_factory(self)
            else:
                ctx = self.current_context()
                client = SkyShiftClient(
                    server=self.server_url(), token=resolve_token(ctx),
                    namespace=self.namespace(),
                )
                client.on_warning = show_warning
                self._client = client
        return cast(SkyShiftClient, self._client)


def show_warning(text: str) -> None:
    """A server's warning (the request succeeded, but something deserves a look), on stderr."""
    click.echo(f"warning: {text}", err=True)


def get_state(ctx: click.Context) -> CliState:
    return ctx.ensure_object(CliState)


# ``@pass_state`` calls the command with the invocation's CliState as first argument.
pass_state = click.make_pass_decorator(CliState, ensure=True)
