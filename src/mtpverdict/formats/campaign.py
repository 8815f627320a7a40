"""Campaign format (TOML, campaign_version 1): the typed sections of a campaign file for `collect`.

These models are what a campaign file may say, with types, bounds and descriptions; the shared
mechanism (formats/_check.py) turns any mismatch into `file: key: message` lines. collect/campaign.py
checks what the types cannot say (a control has no speculation, names are unique, launch mode has a
command) and builds the run plan from the validated file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from mtpverdict.engines.names import DEFAULT_ENGINE, Engine
from mtpverdict.formats._check import Count, Nonneg, PositiveInt
from mtpverdict.formats.results import Method, Name, Role

CAMPAIGN_VERSION = 1
Port = Annotated[int, Meta(ge=1, le=65535)]
Seconds = Annotated[float, Meta(ge=1)]


class ScopeSection(Struct, frozen=True, forbid_unknown_fields=True):
    """[scope]: where the evidence comes from and what it may claim."""

    device: Annotated[str | None, Meta(description="scope device")] = None
    engine: Annotated[str | None, Meta(description="scope engine")] = None
    engine_version: Annotated[str | None, Meta(description="scope engine_version")] = None
    model: Annotated[str | None, Meta(description="scope model")] = None
    claim: Annotated[str | None, Meta(description="scope claim")] = None


class ServerSection(Struct, frozen=True, forbid_unknown_fields=True):
    """[server]: how the arms are served."""

    mode: Annotated[
        Literal["launch", "external"],
        Meta(description="launch (collect starts each arm) or external (arms give base_url)."),
    ]
    command: Annotated[tuple[str, ...], Meta(description="Serve argv template (launch mode).")] = ()
    shell: Annotated[
        bool,
        Meta(
            description="Run command[0] through /bin/sh -c (explicit opt-in); every substituted value "
            "is quoted."
        ),
    ] = False
    env: Annotated[dict[str, str], Meta(description="Extra environment for the server.")] = {}
    host: Annotated[str, Meta(description="Host collect talks to.")] = "127.0.0.1"
    port: Annotated[Port, Meta(description="Port for launched servers.")] = 8000
    health_path: Annotated[str, Meta(description="Path polled until it answers 200.")] = "/health"
    boot_timeout: Annotated[Seconds, Meta(description="Seconds to wait for health.")] = 600.0
    grace_seconds: Annotated[Nonneg, Meta(description="Seconds between SIGTERM and SIGKILL.")] = 30.0
    stall_seconds: Annotated[
        Seconds, Meta(description="A stream with no content for this long is recorded as stalled.")
    ] = 120.0
    api_key_env: Annotated[
        str | None, Meta(description="Environment variable holding the API key (never recorded).")
    ] = None
    secrets: Annotated[
        tuple[str, ...],
        Meta(
            description="Variables whose values are secrets ([vars] or --var names, or environment "
            "variables): redacted from every byte collect writes, the server's log included."
        ),
    ] = ()
    settle_seconds: Annotated[
        Nonneg,
        Meta(
            description="Seconds to wait after a boot's work before stopping it, so the engine logs its "
            "last window."
        ),
    ] = 0.0
    engine: Annotated[Engine, Meta(description="Engine whose log and metrics to read.")] = DEFAULT_ENGINE
    model: Annotated[
        str | None, Meta(description="Model name sent in requests (default: the first of /v1/models).")
    ] = None
    compose: Annotated[
        str | None,
        Meta(
            description="A compose file (relative to the campaign file) whose service every arm's argv is "
            "derived from, resolved by Compose; instead of command."
        ),
    ] = None
    service: Annotated[str | None, Meta(description="The compose service (default: the only one).")] = None
    profiles: Annotated[tuple[str, ...], Meta(description="Compose profiles to resolve with.")] = ()
    env_file: Annotated[
        str | None, Meta(description="Compose's --env-file (relative to the campaign file).")
    ] = None
    project_dir: Annotated[
        str | None, Meta(description="Compose's --project-directory (relative to the campaign file).")
    ] = None
    launch: Annotated[
        Literal["native", "docker"],
        Meta(
            description="With compose: native runs the derived argv on this host; docker runs the service "
            "with `docker run`, one container per arm and boot."
        ),
    ] = "native"
    before_boot: Annotated[
        tuple[tuple[str, ...], ...],
        Meta(
            description="Commands (argv lists; one string each with shell = true) run before every boot; "
            "one that fails fails the boot."
        ),
    ] = ()
    before_boot_timeout: Annotated[Seconds, Meta(description="Seconds each before_boot command may run.")] = (
        300.0
    )
    min_available_memory_gib: Annotated[
        Annotated[float, Meta(gt=0)] | None,
        Meta(
            description="GiB of MemAvailable (and of free memory on every accelerator nvidia-smi or "
            "rocm-smi reports) a boot waits for before it starts."
        ),
    ] = None
    memory_wait_seconds: Annotated[
        Nonneg, Meta(description="Seconds a boot waits for min_available_memory_gib before it fails.")
    ] = 60.0


class ArmSection(Struct, frozen=True, forbid_unknown_fields=True):
    """[[arms]]: one server configuration."""

    name: Annotated[Name, Meta(description="Arm name.")]
    role: Annotated[Role, Meta(description="control or candidate.")]
    method: Annotated[Method | None, Meta(description="Speculative method; omit for off.")] = None
    k: Annotated[Count | None, Meta(description="Speculative tokens per step.")] = None
    serve_args: Annotated[
        tuple[str, ...], Meta(description="Arguments that turn the arm's speculation on.")
    ] = ()
    base_url: Annotated[str | None, Meta(description="Server URL in external mode.")] = None
    family: Annotated[Name, Meta(description="Comparison family.")] = "default"
    labels: Annotated[dict[str, str], Meta(description="Free labels.")] = {}
    config: Annotated[
        dict[str, Any] | None, Meta(description="The engine's speculative config (recorded in the campaign).")
    ] = None


class WorkloadSection(Struct, frozen=True, forbid_unknown_fields=True):
    """[[workloads]]: one prompt shape (a prompt, a generated prompt of about prompt_tokens, or a
    dataset's prompts, one workload per category)."""

    id: Annotated[Name, Meta(description="Workload id.")]
    max_tokens: Annotated[PositiveInt, Meta(description="Completion tokens asked for.")]
    prompt: Annotated[str | None, Meta(description="Prompt text.")] = None
    prompt_tokens: Annotated[
        PositiveInt | None, Meta(description="Generate a prompt of about this many tokens.")
    ] = None
    dataset: Annotated[
        str | None,
        Meta(
            description="A prompt set (JSONL or JSON; path relative to the campaign file): one workload "
            "ID.CATEGORY per category, each sending its drawn prompts in the same order in every arm."
        ),
    ] = None
    category: Annotated[
        Name | None, Meta(description="Category of the dataset's prompts that name none.")
    ] = None
    samples: Annotated[
        PositiveInt | None, Meta(description="Prompts drawn per category from the dataset (default all).")
    ] = None
    sample_seed: Annotated[
        Count | None, Meta(description="Seed of the draw (default from the workload id); recorded.")
    ] = None
    expect_identical: Annotated[bool, Meta(description="Greedy outputs must match across arms.")] = False
    chat: Annotated[bool, Meta(description="Use /v1/chat/completions.")] = False
    ignore_eos: Annotated[
        bool, Meta(description="Ask the server to ignore EOS (vLLM extension) so every run is max_tokens.")
    ] = False
    nonce: Annotated[bool, Meta(description="Prefix every timed prompt with an unseeded nonce.")] = True


class CoherenceSection(Struct, frozen=True, forbid_unknown_fields=True):
    """[[coherence]]: a prompt whose greedy output must contain `expected`."""

    id: Annotated[Name, Meta(description="Case id.")]
    prompt: Annotated[str, Meta(description="Prompt.")]
    expected: Annotated[str, Meta(description="Text the greedy output must contain.")]
    max_tokens: Annotated[PositiveInt, Meta(description="Completion tokens.")] = 16
    chat: Annotated[bool, Meta(description="Use chat completions.")] = False


class LikelihoodSection(Struct, frozen=True, forbid_unknown_fields=True):
    """[likelihood]: text scored teacher-forced on every boot."""

    text: Annotated[str, Meta(description="Text scored teacher-forced.")]
    reps: Annotated[PositiveInt, Meta(description="Repetitions per boot.")] = 1


class DeviceSection(Struct, frozen=True, forbid_unknown_fields=True):
    """[[devices]]: one device (a block) the campaign is laid out over."""

    name: Annotated[Name, Meta(description="Device name, recorded in each boot record.")]
    node: Annotated[Name | None, Meta(description="Host the device is on, recorded in each boot record.")] = (
        None
    )
    port: Annotated[Port | None, Meta(description="Port of this device's server (default server.port).")] = (
        None
    )
    vars: Annotated[
        dict[str, str], Meta(description="Placeholder values for this device (override [vars]).")
    ] = {}
    env: Annotated[
        dict[str, str],
        Meta(description="Extra server environment for this device (e.g. CUDA_VISIBLE_DEVICES)."),
    ] = {}


class CampaignFile(Struct, frozen=True, forbid_unknown_fields=True):
    """A campaign file as written (campaign_version 1)."""

    campaign_version: Annotated[PositiveInt, Meta(description="Always 1.")]
    id: Annotated[Name, Meta(description="Campaign id (also the results campaign id).")]
    title: Annotated[str, Meta(description="What the campaign measures.")]
    concurrency: Annotated[tuple[PositiveInt, ...], Meta(description="Concurrency levels, each a cell.")]
    reps: Annotated[
        PositiveInt, Meta(description="Measured runs per (arm, workload, concurrency) cell and boot.")
    ]
    server: Annotated[ServerSection, Meta(description="How arms are served.")]
    arms: Annotated[tuple[ArmSection, ...], Meta(description="Arms in boot order.")]
    workloads: Annotated[tuple[WorkloadSection, ...], Meta(description="Prompt shapes.")]
    window_tokens: Annotated[PositiveInt | None, Meta(description="Context window for KV ceilings.")] = None
    notes: Annotated[str | None, Meta(description="Free text.")] = None
    warmup_runs: Annotated[Count, Meta(description="Warm-up runs per boot, recorded with warmup true.")] = 1
    boots: Annotated[
        PositiveInt, Meta(description="Boots per arm (rounds of the arm order; per device with [[devices]]).")
    ] = 1
    scope: Annotated[ScopeSection, Meta(description="device, engine, engine_version, model, claim.")] = (
        ScopeSection()
    )
    vars: Annotated[dict[str, str], Meta(description="Default values of command placeholders.")] = {}
    coherence: Annotated[tuple[CoherenceSection, ...], Meta(description="Coherence cases.")] = ()
    likelihood: Annotated[LikelihoodSection | None, Meta(description="Teacher-forced likelihood text.")] = (
        None
    )
    devices: Annotated[
        tuple[DeviceSection, ...] | None,
        Meta(description="Devices the campaign is laid out over, each a block."),
    ] = None
    order_seed: Annotated[
        Count | None,
        Meta(
            description="Seed of the per-device, per-round arm order (with [[devices]]; default from the id)."
        ),
    ] = None
