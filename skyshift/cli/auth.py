"""``skyctl login``, ``logout``, ``register``, ``invite``, ``revoke_invite`` and ``audit``.

A login writes its token into a context (server, namespace, user, token) of the config file, so
several users and namespaces can be switched with ``skyctl config use-context``. Passwords are
prompted for (hidden) or read from stdin when not given; they are never written anywhere.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

import click

from skyshift.cli.errors import CliError, UsageProblem
from skyshift.cli.output import OUTPUT_FORMATS, print_data, print_table
from skyshift.cli.render import Table, format_age
from skyshift.cli.state import CliState, pass_state
from skyshift.client.auth import AccountCalls, login, register
from skyshift.client.config import CliConfig, Context, config_path, resolve_server, save_config
from skyshift.models.user import email_problem


def _password(given: str | None, from_stdin: bool, confirm: bool = False) -> str:
    if given is not None and from_stdin:
        raise UsageProblem("give the password as an argument or with --password-stdin, not both")
    if from_stdin:
        value = sys.stdin.readline().rstrip("\r\n")
    elif given is not None:
        value = given
    else:
        value = click.prompt("Password", hide_input=True, confirmation_prompt=confirm)
    if not value:
        raise UsageProblem("the password is empty")
    return value


def _server(state: CliState, cfg: CliConfig, ctx: Context | None) -> str:
    if ctx is not None:
        return resolve_server(state.server, CliConfig(current_context=ctx.name, contexts=[ctx]))
    return resolve_server(state.server, cfg)


def _save(cfg: CliConfig) -> None:
    try:
        save_config(cfg)
    except OSError as exc:
        raise CliError(f"cannot write {config_path()}: {exc.strerror or exc}") from exc


def _until(expires_at: int) -> str:
    if not expires_at:
        return ""
    when = datetime.fromtimestamp(expires_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f", token valid until {when}"


@click.command("login")
@click.argument("username")
@click.argument("password", required=False)
@click.option("--password-stdin", "from_stdin", is_flag=True, help="Read the password from stdin.")
@click.option(
    "--namespace",
    "-n",
    default=None,
    metavar="NS",
    help="Default namespace of the context (default: the current one's).",
)
@pass_state
def login_cmd(
    state: CliState, username: str, password: str | None, from_stdin: bool, namespace: str | None
) -> None:
    """Log in and keep the token in a context (made current).

    The context is the one named with `skyctl --context NAME login ...`; otherwise the current
    one if it belongs to nobody or to USERNAME, else a context named USERNAME.

    \b
    Examples:
      skyctl login alice                      # prompts for the password
      echo "$PW" | skyctl login alice --password-stdin
      skyctl --context ml login alice -n ml   # a context for alice in namespace ml
    """
    cfg = state.config()
    current = cfg.current()
    if state.context:
        name = state.context
    elif current.user in ("", username):
        name = current.name
    else:
        name = username
    existing = next((c for c in cfg.contexts if c.name == name), None)
    base = existing or current
    server = _server(state, cfg, existing) if existing else _server(state, cfg, None)
    token = login(server, username, _password(password, from_stdin))
    ctx = Context(
        name=name,
        server=server,
        namespace=namespace or base.namespace or "default",
        user=username,
        token=token.token,
        temporal_ui=base.temporal_ui if base.server == server else "",
    )
    cfg.upsert(ctx, make_current=True)
    _save(cfg)
    click.echo(f"Logged in as {username} (context {name!r}{_until(token.expires_at)}).")


@click.command("logout")
@pass_state
def logout_cmd(state: CliState) -> None:
    """Forget the token of the current context (or of --context NAME)."""
    ctx = state.current_context()
    cfg = state.config()
    ctx.token = ""
    cfg.upsert(ctx, make_current=cfg.current_context == ctx.name)
    _save(cfg)
    click.echo(f"Logged out of context {ctx.name!r}.")


@click.command("register")
@click.argument("username")
@click.argument("password", required=False)
@click.option("--invite", "invite", required=True, metavar="TOKEN", help="The invite to use up.")
@click.option("--email", default="", help="E-mail address of the account.")
@click.option("--password-stdin", "from_stdin", is_flag=True, help="Read the password from stdin.")
@pass_state
def register_cmd(
    state: CliState, username: str, password: str | None, invite: str, email: str, from_stdin: bool
) -> None:
    """Create an account with an invite, then `skyctl login USERNAME`.

    \b
    Example:
      skyctl register alice --invite "$INVITE" --email alice@example.com
    """
    if email and (problem := email_problem(email)):  # before asking for a password
        raise UsageProblem(f"--email {email!r} is not a valid e-mail address: {problem}")
    cfg = state.config()
    server = _server(state, cfg, None)
    user = register(server, username, _password(password, from_stdin, confirm=True), invite, email)
    roles = (user.get("status") or {}).get("roles") or "no roles"
    click.echo(f"Registered {username} ({roles}); log in with `skyctl login {username}`.")


@click.command("invite")
@click.option(
    "--role",
    "-r",
    "roles",
    multiple=True,
    metavar="ROLE",
    help="A role the new user gets (repeatable; only roles you hold).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the invite as JSON.")
@pass_state
def invite_cmd(state: CliState, roles: tuple[str, ...], as_json: bool) -> None:
    """Create a single-use invite; the new user registers with it.

    \b
    Example:
      skyctl invite --role reader
    """
    result = AccountCalls(state.client()).invite(list(roles))
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(str(result.get("invite", "")))


@click.command("revoke_invite")
@click.argument("invite", metavar="TOKEN")
@pass_state
def revoke_invite_cmd(state: CliState, invite: str) -> None:
    """Revoke an invite nobody has used yet."""
    AccountCalls(state.client()).revoke_invite(invite)
    click.echo("Invite revoked.")


AUDIT_HEADERS = ["TIME", "USER", "ACTION", "RESOURCE", "NAMESPACE", "NAME", "RESULT", "CODE"]


@click.command("audit")
@click.option("--user", "-u", default=None, help="Only what this user did.")
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="How many records (newest first).",
)
@click.option(
    "--output",
    "-o",
    "output",
    default="table",
    type=click.Choice(OUTPUT_FORMATS, case_sensitive=False),
    help="table, json or yaml.",
)
@pass_state
def audit_cmd(state: CliState, user: str | None, limit: int, output: str) -> None:
    """Show the audit trail: who changed what, when, and with what result (admins).

    \b
    Example:
      skyctl audit --user alice
    """
    data = AccountCalls(state.client()).audit(limit=limit, user=user)
    output = output.lower()
    if output in ("json", "yaml"):
        print_data(data, output)
        return
    table = Table(list(AUDIT_HEADERS))
    for r in data.get("items") or []:
        when = format_age(r.get("time"))
        table.rows.append(
            [
                f"{when} ago",
                str(r.get("user") or "-"),
                str(r.get("action") or "-"),
                str(r.get("resource") or "-"),
                str(r.get("namespace") or "-"),
                str(r.get("name") or "-"),
                str(r.get("result") or "-"),
                str(r.get("code") or "-"),
            ]
        )
    print_table(table)


COMMANDS = (login_cmd, logout_cmd, register_cmd, invite_cmd, revoke_invite_cmd, audit_cmd)
