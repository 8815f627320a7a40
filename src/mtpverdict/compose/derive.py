"""Arms from a resolved compose service: its argv with the speculative flags taken out, and its hash so.

A campaign whose `[server]` names a compose service runs, for every arm, the service's entrypoint and
command with the service's own speculative flags removed and the arm's `serve_args` put where they
stood (serveconfig.FLAGS says how many values each flag takes). The service with its speculative
flags removed is hashed the same way for the evidence (campaign.json) and for the gate, so two
deployments that differ only in their speculation have one `base_sha256`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mtpverdict.compose._model import ResolvedService, service_sha256
from mtpverdict.formats.deployment import Deployment
from mtpverdict.serveconfig import FLAGS, is_speculative_flag, normalise_flag

__all__ = [
    "BaseService",
    "base_service",
    "base_sha256",
    "deployment_record",
    "strip_speculative",
]


@dataclass(frozen=True, slots=True)
class BaseService:
    """A service's argv without its speculation, where the arms' flags go, and the hash of the rest."""

    argv: tuple[str, ...]  # entrypoint + command, speculative flags removed
    insert_at: int  # the index in argv where the removed flags stood (the end when there were none)
    removed: tuple[str, ...]  # the service's own speculative arguments
    entrypoint_length: int  # how many of argv's first elements are the entrypoint's
    sha256: str  # of the resolved service with its speculative flags removed, canonical JSON


def strip_speculative(argv: Sequence[str]) -> tuple[tuple[str, ...], int, tuple[str, ...]]:
    """argv without its speculative flags (each with the values it takes), the index of the first one
    removed (len of the result when none was), and what was removed."""
    kept: list[str] = []
    removed: list[str] = []
    insert_at: int | None = None
    i = 0
    while i < len(argv):
        token = argv[i]
        flag, eq, _ = token.partition("=")
        if flag.startswith("-") and is_speculative_flag(flag):
            spec = FLAGS.get(normalise_flag(flag))
            width = 1 if eq else 1 + (spec.values if spec is not None else 1)
            insert_at = len(kept) if insert_at is None else insert_at
            removed += argv[i : i + width]
            i += width
            continue
        kept.append(token)
        i += 1
    return tuple(kept), len(kept) if insert_at is None else insert_at, tuple(removed)


def base_service(resolved: ResolvedService) -> BaseService:
    """The service as every arm shares it (see the module's docstring)."""
    entrypoint = resolved.entrypoint or ()
    argv, insert_at, removed = strip_speculative(resolved.argv)
    entry_kept, _, _ = strip_speculative(entrypoint)
    service = resolved.service_dict
    return BaseService(
        argv=argv,
        insert_at=insert_at,
        removed=removed,
        entrypoint_length=len(entry_kept),
        sha256=base_sha256(service, resolved.definitions),
    )


def base_sha256(service: Mapping[str, Any], definitions: Mapping[str, Any] | None = None) -> str:
    """The sha256 of a resolved service (Compose's JSON) whose entrypoint and command lose their
    speculative flags, with the project's definitions of what it uses: equal for two deployments that
    differ only in speculation."""
    stripped = dict(service)
    for key in ("entrypoint", "command"):
        value = stripped.get(key)
        if isinstance(value, list):
            stripped[key] = list(strip_speculative([str(v) for v in value])[0])
    return service_sha256(stripped, definitions)


def deployment_record(resolved: ResolvedService, launch: str) -> Deployment:
    """campaign.json's `deployment`: the service the arms were derived from, and how they ran."""
    return Deployment(
        compose_files=resolved.files,
        service=resolved.service,
        project_dir=resolved.project_dir,
        profiles=resolved.profiles,
        env_files=resolved.env_files,
        resolver=resolved.resolver,
        compose_version=resolved.compose_version,
        sha256=resolved.sha256,
        base_sha256=base_service(resolved).sha256,
        launch="docker" if launch == "docker" else "native",
        service_json=resolved.service_dict,
        volume_names=dict(resolved.volume_names),
    )
