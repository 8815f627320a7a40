"""The deployment a campaign ran and the state each boot started from (campaign.json, boot records).

`Deployment` (campaign.json `deployment`) says which compose service the arms were derived from, as
Compose resolved it, with its hash and the hash of the service without its speculative flags (the
gate compares the latter with a proposed deployment). A boot record's `before_boot`, `memory_check`,
`host_state` and `container` say what ran before the boot, whether the host had the memory asked
for, what the host looked like when the boot started, and which container it ran as.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from mtpverdict.formats._check import Count, Nonneg

Sha256Text = Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")]
Output = Annotated[str, Meta(max_length=8192, description="What the step printed (its last 4 KiB).")]


class Deployment(Struct, frozen=True, forbid_unknown_fields=True):
    """The compose service every arm's argv was derived from."""

    compose_files: Annotated[tuple[str, ...], Meta(description="The compose files, as Compose read them.")]
    service: Annotated[str, Meta(description="The service name.")]
    project_dir: Annotated[str, Meta(description="Compose's project directory.")]
    profiles: Annotated[tuple[str, ...], Meta(description="Profiles Compose resolved with.")]
    env_files: Annotated[tuple[str, ...], Meta(description="The project's and the service's env files.")]
    resolver: Annotated[str, Meta(description="The Compose that resolved it.")]
    compose_version: Annotated[str, Meta(description="Its version.")]
    sha256: Annotated[Sha256Text, Meta(description="sha256 of the resolved service (canonical JSON).")]
    base_sha256: Annotated[
        Sha256Text,
        Meta(
            description="sha256 of the resolved service with its speculative flags removed (compose.derive)."
        ),
    ]
    launch: Annotated[
        Literal["native", "docker"],
        Meta(description="native: the argv ran on the host; docker: a `docker run` of the service."),
    ]
    service_json: Annotated[
        dict[str, Any], Meta(description="The service as Compose resolved it (its speculative flags kept).")
    ]
    volume_names: Annotated[
        dict[str, str], Meta(description="The names Compose gives the project's volumes (PROJECT_KEY).")
    ] = {}


class StepRecord(Struct, frozen=True, forbid_unknown_fields=True):
    """One `before_boot` command run before the boot."""

    argv: Annotated[tuple[str, ...], Meta(description="What ran ([/bin/sh, -c, LINE] with shell = true).")]
    exit_code: Annotated[
        int | None, Meta(description="Its exit status; null when it could not run or timed out.")
    ]
    seconds: Annotated[Nonneg, Meta(description="How long it ran.")]
    output: Output
    error: Annotated[str | None, Meta(description="Why it did not run or finish.")] = None


class Accelerator(Struct, frozen=True, forbid_unknown_fields=True):
    """One accelerator as nvidia-smi or rocm-smi reports it (null where it does not say)."""

    index: Annotated[Count, Meta(description="Its index as the tool numbers it.")]
    source: Annotated[Literal["nvidia-smi", "rocm-smi"], Meta(description="The tool that reported it.")]
    name: Annotated[str | None, Meta(description="Its product name.")] = None
    memory_total_mib: Annotated[Nonneg | None, Meta(description="Memory, MiB.")] = None
    memory_free_mib: Annotated[Nonneg | None, Meta(description="Free memory, MiB.")] = None
    sm_clock_mhz: Annotated[Nonneg | None, Meta(description="Graphics (SM) clock, MHz.")] = None
    memory_clock_mhz: Annotated[Nonneg | None, Meta(description="Memory clock, MHz.")] = None
    temperature_c: Annotated[float | None, Meta(description="Temperature, degrees Celsius.")] = None


class HostState(Struct, frozen=True, forbid_unknown_fields=True):
    """What the host looked like just before the server started (null where it cannot be read)."""

    mem_available_gib: Annotated[Nonneg | None, Meta(description="/proc/meminfo MemAvailable, GiB.")]
    mem_total_gib: Annotated[Nonneg | None, Meta(description="/proc/meminfo MemTotal, GiB.")]
    load_1m: Annotated[Nonneg | None, Meta(description="/proc/loadavg, one minute.")]
    load_5m: Annotated[Nonneg | None, Meta(description="/proc/loadavg, five minutes.")]
    accelerators: Annotated[
        tuple[Accelerator, ...], Meta(description="Accelerators nvidia-smi or rocm-smi reported.")
    ] = ()


class MemoryCheck(Struct, frozen=True, forbid_unknown_fields=True):
    """`min_available_memory_gib` checked before the boot: the figures it saw last."""

    required_gib: Annotated[Nonneg, Meta(description="What the campaign asks for.")]
    available_gib: Annotated[Nonneg | None, Meta(description="MemAvailable when it was last read, GiB.")]
    accelerator_free_gib: Annotated[
        Nonneg | None,
        Meta(description="The least free memory of any accelerator, GiB (null: none answered)."),
    ]
    waited_seconds: Annotated[Nonneg, Meta(description="How long the check waited for the memory.")]
    passed: Annotated[bool, Meta(description="Whether the host had the memory before the timeout.")]


class ContainerRecord(Struct, frozen=True, forbid_unknown_fields=True):
    """The container a docker-launched boot ran as."""

    name: Annotated[str, Meta(description="Its name (one per arm and boot).")]
    argv: Annotated[tuple[str, ...], Meta(description="The `docker run` argv.")]
    removed_leftover: Annotated[
        bool, Meta(description="A container of this name was there before the boot and was removed.")
    ]
