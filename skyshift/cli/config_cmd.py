"""``skyctl config``: switch between and edit contexts (server, namespace, credentials).

The file format and its location are owned by :mod:`skyshift.client.config`; this module only
edits it through ``load_config``/``save_config``.
"""

from __future__ import annotations

import click

from skyshift.cli.errors import CliError, UsageProblem
from skyshift.cli.groups import AliasedGroup
from skyshift.cli.output import print_table
from skyshift.cli.render import Table
from skyshift.cli.state import CliState, pass_state
from skyshift.client.config import Context, config_path, save_config


@click.group("config", cls=AliasedGroup)
def config() -> None:
    """Manage contexts: which server, namespace and user skyctl talks as.

    \b
    Examples:
      skyctl config get-contexts
      skyctl config set-context prod --server https://skyshift.example.com --namespace ml
      skyctl config use-context prod
    """


def _save(state: CliState) -> None:
    try:
        save_config(state.config())
    except OSError as exc:
        raise CliError(f"cannot write {config_path()}: {exc.strerror or exc}") from exc


@config.aliased("use-context", "use-ctx", "swap-context", "swap-ctx")
@click.argument("name")
@pass_state
def use_context(state: CliState, name: str) -> None:
    """Make NAME the current context.

    \b
    NAME may also be the original SkyShift's name of a context, USER-NAMESPACE
    (e.g. admin-default for the embedded stack's `local`).

    \b
    Example:
      skyctl config use-context prod
    """
    cfg = state.config()
    found = find_context(cfg.contexts, name)
    if found is None:
        names = ", ".join(c.name for c in cfg.contexts) or "none"
        raise CliError(f"context {name!r} not found (contexts: {names}); "
                       "create it with `skyctl config set-context`")
    cfg.current_context = found.name
    _save(state)
    alias = f" (the original's name for {found.name!r})" if found.name != name else ""
    click.echo(f"Switched to context {found.name!r}{alias}.")


def find_context(contexts: list[Context], name: str) -> Context | None:
    """The context called ``name``, or else the one the original SkyShift called that:
    ``<user>-<namespace>`` (``admin-default`` is the embedded stack's ``local``)."""
    exact = next((c for c in contexts if c.name == name), None)
    if exact is not None:
        return exact
    return next((c for c in contexts if f"{c.user or 'admin'}-{c.namespace}" == name), None)


@config.aliased("get-contexts", "get-ctx")
@pass_state
def get_contexts(state: CliState) -> None:
    """List contexts; the current one is marked with *.

    \b
    Example:
      skyctl config get-contexts
    """
    cfg = state.config()
    table = Table(["CURRENT", "NAME", "SERVER", "NAMESPACE", "USER"])
    for c in cfg.contexts:
        mark = "*" if c.name == cfg.current_context else ""
        table.rows.append([mark, c.name, c.server, c.namespace, c.user or "-"])
    print_table(table)


@config.aliased("current-context", "current-ctx")
@pass_state
def current_context(state: CliState) -> None:
    """Print the name of the current context.

    \b
    Example:
      skyctl config current-context
    """
    click.echo(state.config().current_context)


@config.aliased("set-context", "set-ctx")
@click.argument("name")
@click.option("--server", "ctx_server", default=None, metavar="URL",
              help="API server URL, e.g. http://127.0.0.1:50051.")
@click.option("--namespace", "-n", default=None, metavar="NS", help="Default namespace.")
@click.option("--user", default=None, help="User name.")
@click.option("--token", default=None, help="Bearer token.")
@click.option("--temporal-ui", "temporal_ui", default=None, metavar="URL",
              help="Temporal UI of this server's stack, for the links of `skyctl describe`.")
@click.option("--use", is_flag=True, help="Also make it the current context.")
@pass_state
def set_context(state: CliState, name: str, ctx_server: str | None, namespace: str | None,
                user: str | None, token: str | None, temporal_ui: str | None,
                use: bool) -> None:
    """Create or change a context (only the given fields change).

    \b
    Example:
      skyctl config set-context dev --server http://10.0.0.5:50051 --namespace dev --use
    """
    if ctx_server and not ctx_server.startswith(("http://", "https://")):
        raise UsageProblem(f"--server {ctx_server!r}: expected a URL like http://host:50051")
    cfg = state.config()
    existing = next((c for c in cfg.contexts if c.name == name), None)
    ctx = existing or Context(name=name)
    if ctx_server:
        ctx.server = ctx_server.rstrip("/")
    if namespace:
        ctx.namespace = namespace
    if user is not None:
        ctx.user = user
    if token is not None:
        ctx.token = token
    if temporal_ui is not None:
        if temporal_ui and not temporal_ui.startswith(("http://", "https://")):
            raise UsageProblem(f"--temporal-ui {temporal_ui!r}: expected a URL like "
                               "http://127.0.0.1:8233")
        ctx.temporal_ui = temporal_ui.rstrip("/")
    cfg.upsert(ctx, make_current=use or not cfg.contexts)
    _save(state)
    click.echo(f"Context {name!r} {'modified' if existing else 'created'}.")
