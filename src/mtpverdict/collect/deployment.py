"""What a campaign's [server] says about its deployment and its boots, as the run plan holds it.

`ComposeSource` names the compose service the arms come from (resolved in collect/launch.py, before
anything runs); `BootDiscipline` is what collect/discipline.py does before every boot.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ComposeSource:
    """[server] compose, service, profiles, env_file, project_dir and launch (paths made relative to
    the working directory from the campaign file's)."""

    file: str
    service: str | None
    profiles: tuple[str, ...]
    env_file: str | None
    project_dir: str | None
    launch: str  # "native" or "docker"


@dataclass(frozen=True, slots=True)
class BootDiscipline:
    """[server] before_boot, its timeout, min_available_memory_gib and how long a boot waits for it."""

    before_boot: tuple[tuple[str, ...], ...] = ()
    before_boot_timeout: float = 300.0
    min_available_memory_gib: float | None = None
    memory_wait_seconds: float = 60.0

    @property
    def active(self) -> bool:
        return bool(self.before_boot) or self.min_available_memory_gib is not None
