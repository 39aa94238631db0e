"""The CLI's config file: contexts (server, namespace, user, token) under ``SKYSHIFT_HOME``.

Format of ``$SKYSHIFT_HOME/config.yaml``::

    current-context: local
    contexts:
      - name: local
        server: http://127.0.0.1:50051
        namespace: default
        user: admin
        token: <jwt or empty>
        temporal_ui: http://127.0.0.1:8233   # where `skyctl describe` links workflows

``SKYSHIFT_SERVER`` or ``--server`` override the server of the current context, and
``SKYSHIFT_TOKEN`` its token (``skyctl login`` writes the token into a context).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from skyshift.config import skyshift_home

DEFAULT_SERVER = "http://127.0.0.1:50051"


@dataclass
class Context:
    name: str
    server: str = DEFAULT_SERVER
    namespace: str = "default"
    user: str = ""
    token: str = ""
    #: the Temporal UI of this server's stack ("": ``SKYSHIFT_TEMPORAL_UI`` or the default)
    temporal_ui: str = ""


@dataclass
class CliConfig:
    current_context: str
    contexts: list[Context]

    def current(self) -> Context:
        for ctx in self.contexts:
            if ctx.name == self.current_context:
                return ctx
        return Context(name=self.current_context or "local")

    def upsert(self, ctx: Context, make_current: bool = True) -> None:
        self.contexts = [c for c in self.contexts if c.name != ctx.name] + [ctx]
        if make_current:
            self.current_context = ctx.name


def config_path() -> Path:
    return skyshift_home() / "config.yaml"


def load_config(path: Path | None = None) -> CliConfig:
    path = path or config_path()
    if not path.exists():
        return CliConfig(current_context="local", contexts=[Context(name="local")])
    raw: Any = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    if not isinstance(raw.get("contexts") or [], list):
        raise ValueError(f"{path}: contexts must be a list of mappings")
    contexts = [
        Context(**{k: str(v) for k, v in c.items() if k in Context.__dataclass_fields__})
        for c in raw.get("contexts") or []
        if isinstance(c, dict) and "name" in c
    ]
    return CliConfig(current_context=str(raw.get("current-context", "local")), contexts=contexts)


def save_config(cfg: CliConfig, path: Path | None = None) -> None:
    """Write atomically with 0600 permissions (it holds tokens)."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"current-context": cfg.current_context, "contexts": [asdict(c) for c in cfg.contexts]}
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(data, fh, sort_keys=False)
    os.replace(tmp, path)


def resolve_token(ctx: Context) -> str:
    """The bearer token to send: ``SKYSHIFT_TOKEN`` beats the context's (empty: none)."""
    return os.environ.get("SKYSHIFT_TOKEN") or ctx.token


def resolve_server(cli_value: str | None = None, cfg: CliConfig | None = None) -> str:
    """``--server`` beats ``SKYSHIFT_SERVER`` beats the current context."""
    if cli_value:
        return cli_value.rstrip("/")
    env = os.environ.get("SKYSHIFT_SERVER")
    if env:
        return env.rstrip("/")
    return (cfg or load_config()).current().server.rstrip("/")
