"""Results format v1, the contract between collectors and the decision engine: typed models both ways.

A results directory holds campaign.json (one `Campaign`), records.jsonl (one record per line, tagged by
`kind`) and raw/. The models below are the one source of the loader's checks (formats/_check.py), of
the writer's checks, of the JSON Schemas in src/mtpverdict/schemas/ and of docs/results-format.md's
tables. Optional record keys default to UNSET so a reader can tell "absent" from "null".
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from mtpverdict.formats._check import Count, Fraction, Nonneg, PositiveInt, json_schema
from mtpverdict.formats.deployment import ContainerRecord, Deployment, HostState, MemoryCheck, StepRecord

RESULTS_FORMAT = "mtpverdict.results/1"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"

Name = Annotated[str, Meta(pattern=NAME_PATTERN)]
Sha256 = Annotated[str, Meta(pattern=SHA256_PATTERN)]


class Method(StrEnum):
    """Speculative methods an arm can run."""

    MTP = "mtp"
    NGRAM = "ngram"
    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    DRAFT_MODEL = "draft_model"
    MEDUSA = "medusa"
    SUFFIX = "suffix"
    OTHER = "other"


class Role(StrEnum):
    """control: the unspeculated baseline; candidate: a speculative configuration."""

    CONTROL = "control"
    CANDIDATE = "candidate"


class Source(StrEnum):
    """The surface an acceptance reading came from."""

    METRICS = "metrics"
    LOG = "log"
    RESPONSE = "response"
    REPORT = "report"


class Scoped(StrEnum):
    """run: the numbers cover exactly one run; window: an engine-wide window."""

    RUN = "run"
    WINDOW = "window"


class Metric(StrEnum):
    """The timed metrics of a cell."""

    DECODE_TPS = "decode_tps"
    TTFT_MS = "ttft_ms"
    AGGREGATE_TPS = "aggregate_tps"


# ---------------------------------------------------------------------------------------------------
# campaign.json


class Scope(Struct, frozen=True, forbid_unknown_fields=True):
    """Where the evidence comes from and what it may be used to claim."""

    device: Annotated[str | None, Meta(description="Accelerator and host.")]
    engine: Annotated[str | None, Meta(description="Serving engine (vllm, sglang, llamacpp, ...).")]
    engine_version: Annotated[str | None, Meta(description="Engine version or image.")]
    model: Annotated[str | None, Meta(description="Served checkpoint.")]
    claim: Annotated[str | None, Meta(description="What the evidence may be used to claim, and what not.")]


class Continues(Struct, frozen=True, forbid_unknown_fields=True):
    """The earlier campaign this one continues (collect --continues) and the alpha its looks spent."""

    campaign: Annotated[str, Meta(description="The continued campaign's id (or the name given for it).")]
    spent_alpha: Annotated[
        float | None,
        Meta(
            description="Alpha its recorded looks spent (and any campaign it continued in turn); null when "
            "its looks were not available, which makes every decision on this campaign provisional."
        ),
    ]
    looks: Annotated[Count, Meta(description="Recorded looks of the continued campaign.")] = 0
    looks_chain: Annotated[
        str | None, Meta(description="The last chain value of its raw/looks.jsonl, null without one.")
    ] = None
    unavailable: Annotated[
        str | None, Meta(description="Why its looks could not be counted; null when they were.")
    ] = None
    handed_over: Annotated[
        str | None,
        Meta(
            description="The campaign that had already taken what the continued campaign's looks left "
            "(an earlier continuation of it): this campaign carries no alpha and cannot promote; null "
            "when it carries what was left."
        ),
    ] = None


class Spec(Struct, frozen=True, forbid_unknown_fields=True):
    """What speculation an arm runs; method None means speculation off; k None means not recorded."""

    method: Annotated[Method | None, Meta(description="Speculative method; null for speculation off.")]
    k: Annotated[Count | None, Meta(description="Speculative tokens per step; null or 0 when off.")]
    config: Annotated[
        dict[str, Any] | None, Meta(description="The engine's speculative config as given to the server.")
    ] = None

    @property
    def off(self) -> bool:
        return self.method is None

    def label(self) -> str:
        if self.off:
            return "off"
        return f"{self.method} k={'?' if self.k is None else self.k}"


class Arm(Struct, frozen=True, forbid_unknown_fields=True):
    """One server configuration of the campaign."""

    name: Annotated[Name, Meta(description="Arm name, unique in the campaign.")]
    role: Annotated[Role, Meta(description="control (the unspeculated baseline) or candidate.")]
    spec: Annotated[Spec, Meta(description="Speculative configuration of the arm.")]
    order: Annotated[PositiveInt, Meta(description="Boot order of the arm's first boot, from 1.")]
    serve_argv: Annotated[
        tuple[str, ...] | None,
        Meta(description="Serve command line, identical across arms but for speculation."),
    ]
    labels: Annotated[dict[str, str], Meta(description="Free labels (e.g. quantization, graph mode).")] = {}
    family: Annotated[
        Name, Meta(description="Arms sharing a family compare against that family's control arms.")
    ] = "default"

    @property
    def is_control(self) -> bool:
        return self.role is Role.CONTROL


class Workload(Struct, frozen=True, forbid_unknown_fields=True):
    """One prompt shape of the campaign."""

    id: Annotated[Name, Meta(description="Workload id.")]
    prompt_tokens: Annotated[Count | None, Meta(description="Prompt tokens (server-reported where known).")]
    max_tokens: Annotated[PositiveInt | None, Meta(description="Completion tokens asked for.")]
    expect_identical: Annotated[bool, Meta(description="Greedy outputs must be byte-identical across arms.")]
    description: Annotated[str | None, Meta(description="What the workload is.")] = None
    category: Annotated[
        Name | None, Meta(description="The dataset category the workload's prompts are drawn from.")
    ] = None
    dataset_sha256: Annotated[
        Sha256 | None, Meta(description="SHA-256 of the dataset file the prompts are drawn from.")
    ] = None
    dataset_seed: Annotated[
        Count | None, Meta(description="Seed the prompts were drawn with from the dataset.")
    ] = None


# dict=True lets the frozen Struct cache its lookups by arm name and by family (functools.cached_property):
# code asking per arm and per cell stays linear in the number of arms. (The docstring is the schema's.)
class Campaign(Struct, frozen=True, forbid_unknown_fields=True, dict=True):
    """campaign.json: the arms (sorted by boot order on load), the workloads and the scope of the claim."""

    format: Annotated[Literal["mtpverdict.results/1"], Meta(description=f'Always "{RESULTS_FORMAT}".')]
    id: Annotated[Name, Meta(description="Campaign id.")]
    title: Annotated[str, Meta(description="One line saying what the campaign measures.")]
    scope: Annotated[Scope, Meta(description="Where the evidence comes from and what it may claim.")]
    arms: Annotated[tuple[Arm, ...], Meta(description="Arms in boot order.")]
    workloads: Annotated[tuple[Workload, ...], Meta(description="Workloads.")]
    window_tokens: Annotated[
        PositiveInt | None, Meta(description="Context window used for KV ceilings (pool / window).")
    ]
    notes: Annotated[str | None, Meta(description="Free text.")] = None
    synthetic: Annotated[bool, Meta(description="True when the records were generated, not measured.")] = (
        False
    )
    source: Annotated[
        str | None, Meta(description="Where the records come from (a write-up, a harness).")
    ] = None
    concurrency: Annotated[
        tuple[PositiveInt, ...] | None,
        Meta(
            description="Concurrency levels the campaign declares: with the workloads, the design's cells. A "
            "cell of the design an arm did not measure is missing evidence for that arm."
        ),
    ] = None
    planned_boots: Annotated[
        PositiveInt | None,
        Meta(
            description="Boots collect planned for every arm (boots per device x devices; written by "
            "collect, raised with boots on a resume). A fixed campaign decided before every arm has them "
            "is an interim look: it spends no alpha and promotes nothing, so its one look stays for "
            "the complete data. Null: not known (records collected or imported without it)."
        ),
    ] = None
    sequential_looks: Annotated[
        PositiveInt,
        Meta(
            description="Interim decisions the campaign was designed for (collect --until-resolved); decide "
            "tests each look at alpha / sequential_looks."
        ),
    ] = 1
    deployment: Annotated[
        Deployment | None,
        Meta(description="The compose service the arms' argv were derived from ([server] compose)."),
    ] = None
    continues: Annotated[
        Continues | None,
        Meta(
            description="The earlier campaign this one continues (collect --continues): decide counts "
            "the alpha its looks spent against this campaign's."
        ),
    ] = None

    @functools.cached_property
    def _arms_by_name(self) -> dict[str, Arm]:
        return {arm.name: arm for arm in self.arms}

    @functools.cached_property
    def _arms_by_family(self) -> dict[str, tuple[tuple[Arm, ...], tuple[Arm, ...]]]:
        """family -> (its controls, its candidates), each in boot order."""
        found: dict[str, tuple[list[Arm], list[Arm]]] = {}
        for arm in self.arms:
            controls, candidates = found.setdefault(arm.family, ([], []))
            (controls if arm.is_control else candidates).append(arm)
        return {family: (tuple(c), tuple(d)) for family, (c, d) in found.items()}

    def arm(self, name: str) -> Arm:
        return self._arms_by_name[name]

    def workload(self, workload_id: str) -> Workload:
        for workload in self.workloads:
            if workload.id == workload_id:
                return workload
        raise KeyError(workload_id)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted({arm.family for arm in self.arms}))

    def controls(self, family: str) -> tuple[Arm, ...]:
        return self._arms_by_family.get(family, ((), ()))[0]

    def candidates(self, family: str | None = None) -> tuple[Arm, ...]:
        if family is None:
            return tuple(a for a in self.arms if not a.is_control)
        return self._arms_by_family.get(family, ((), ()))[1]


# ---------------------------------------------------------------------------------------------------
# records.jsonl

Text = Annotated[str | None | UnsetType, Meta(description="Free text kept with the record.")]
ArmName = Annotated[Name, Meta(description="Arm name, one of campaign.json's arms.")]
BootNumber = Annotated[PositiveInt, Meta(description="Boot number of this arm, 1 for its first boot.")]


class RequestRecord(Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", tag="request"):
    """One streamed request as the collector timed it."""

    arm: ArmName
    boot: BootNumber
    workload: Annotated[Name, Meta(description="Workload id from campaign.json.")]
    concurrency: Annotated[PositiveInt, Meta(description="Requests in flight together in this run.")]
    rep: Annotated[PositiveInt, Meta(description="Repetition number of the run inside its cell, from 1.")]
    warmup: Annotated[bool, Meta(description="True for a harness warm-up run: reported, never measured.")]
    t_start: Annotated[
        Nonneg, Meta(description="Seconds when the request was sent (monotonic clock of the boot).")
    ]
    t_first: Annotated[
        Nonneg | None, Meta(description="Seconds at the first content delta; null when none arrived.")
    ]
    t_end: Annotated[
        Nonneg | None, Meta(description="Seconds at the last content delta; null when none arrived.")
    ]
    prompt_tokens: Annotated[
        Count | None, Meta(description="Prompt tokens as the server's usage reports them.")
    ]
    completion_tokens: Annotated[
        Count | None, Meta(description="Completion tokens as the server's usage reports them.")
    ]
    status: Annotated[Literal["ok", "error"], Meta(description="ok, or error when the request failed.")]
    stream: Annotated[
        Count | UnsetType, Meta(description="Index of the request inside its run, 0..concurrency-1.")
    ] = UNSET
    error: Annotated[str | None | UnsetType, Meta(description="What failed, for status error.")] = UNSET
    output_sha256: Annotated[
        Sha256 | None | UnsetType, Meta(description="SHA-256 of the completion text.")
    ] = UNSET
    nonce: Annotated[
        str | None | UnsetType,
        Meta(
            description="The unseeded nonce prefixed to the prompt (defeats prefix caching); null when none."
        ),
    ] = UNSET
    bunched_chunks: Annotated[
        Count | None | UnsetType,
        Meta(
            description="Content deltas that arrived within 200 us of the previous one: read from a buffer "
            "in a burst (a starved client or server), so the decode window and TTFT of this stream are not "
            "measured."
        ),
    ] = UNSET
    chunks: Annotated[
        Count | None | UnsetType,
        Meta(description="Content deltas received (several tokens each under speculation)."),
    ] = UNSET
    # what the server reported about this request (vLLM --enable-per-request-metrics and
    # --per-request-spec-decode-metrics, llama.cpp timings), kept beside the client's own timing, and
    # the collector's CPU use during the run; absent when the server does not report them
    server_ttft_ms: Annotated[
        Nonneg | None | UnsetType,
        Meta(
            description="The server's time to first token for this request, ms (vLLM "
            "metrics.time_to_first_token_ms: from scheduling to the first token; queue wait excluded)."
        ),
    ] = UNSET
    server_queue_ms: Annotated[
        Nonneg | None | UnsetType, Meta(description="The server's queue wait for this request, ms.")
    ] = UNSET
    server_generation_ms: Annotated[
        Nonneg | None | UnsetType,
        Meta(
            description="The server's decode time for this request, first to last token, ms (vLLM "
            "metrics.generation_time_ms); compare with t_end - t_first."
        ),
    ] = UNSET
    server_mean_itl_ms: Annotated[
        Nonneg | None | UnsetType,
        Meta(
            description="The server's mean inter-token latency for this request, ms (generation / "
            "(tokens - 1))."
        ),
    ] = UNSET
    spec_steps: Annotated[
        Count | None | UnsetType,
        Meta(description="Verify steps that drafted for this request (vLLM num_spec_steps)."),
    ] = UNSET
    spec_draft_tokens: Annotated[
        Count | None | UnsetType,
        Meta(
            description="Draft tokens proposed for this request (vLLM num_draft_tokens, llama.cpp draft_n)."
        ),
    ] = UNSET
    spec_accepted_tokens: Annotated[
        Count | None | UnsetType,
        Meta(
            description="Draft tokens accepted for this request (vLLM num_accepted_draft_tokens, llama.cpp "
            "draft_n_accepted)."
        ),
    ] = UNSET
    spec_accepted_per_position: Annotated[
        tuple[Count, ...] | None | UnsetType,
        Meta(
            description="Verify steps of this request that accepted draft position 0..k-1 (from vLLM's "
            "per_step_accepted or acceptance_histogram)."
        ),
    ] = UNSET
    prompt_index: Annotated[
        Count | UnsetType,
        Meta(description="Position of the request's prompt in its workload's dataset file, from 0."),
    ] = UNSET
    category: Annotated[Name | UnsetType, Meta(description="Dataset category of the request's prompt.")] = (
        UNSET
    )
    client_cpu_share: Annotated[
        Nonneg | None | UnsetType,
        Meta(
            description="CPU seconds the collector used during this request's run over the run's wall "
            "seconds (1.0 = one core busy); the same on every request of the run. High: the harness may "
            "have read deltas late."
        ),
    ] = UNSET
    note: Text = UNSET


SERVER_REQUEST_FIELDS = (
    "server_ttft_ms",
    "server_queue_ms",
    "server_generation_ms",
    "server_mean_itl_ms",
    "spec_steps",
    "spec_draft_tokens",
    "spec_accepted_tokens",
    "spec_accepted_per_position",
    "client_cpu_share",
)


class AcceptanceRecord(Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", tag="acceptance"):
    """Speculative acceptance over a window or a run, as one surface reports it."""

    arm: ArmName
    boot: BootNumber
    workload: Annotated[
        Name | None, Meta(description="Workload the window covers; null for a window spanning several.")
    ]
    concurrency: Annotated[
        PositiveInt | None, Meta(description="Concurrency of the window; null when mixed.")
    ]
    rep: Annotated[
        PositiveInt | None,
        Meta(description="Rep of the run the window covers; null when the window is not one run."),
    ]
    source: Annotated[
        Source,
        Meta(
            description="metrics (counter delta), log (engine log line), response (per-response fields) or "
            "report (transcribed from a write-up that does not name its surface)."
        ),
    ]
    scoped: Annotated[
        Scoped, Meta(description="run when the numbers cover exactly one run, window otherwise.")
    ]
    drafts: Annotated[Count | None, Meta(description="Draft rounds (speculation steps) in the window.")]
    draft_tokens: Annotated[Count | None, Meta(description="Draft tokens proposed in the window.")]
    accepted_tokens: Annotated[Count | None, Meta(description="Draft tokens accepted in the window.")]
    status: Annotated[
        Literal["ok", "void"] | UnsetType,
        Meta(description="ok, or void when the window is unusable (e.g. a counter reset)."),
    ] = UNSET
    accepted_per_position: Annotated[
        tuple[Count, ...] | None | UnsetType, Meta(description="Accepted counts per draft position 0..k-1.")
    ] = UNSET
    per_position_rate: Annotated[
        tuple[Fraction, ...] | None | UnsetType,
        Meta(description="Acceptance rate per position when only rates are known."),
    ] = UNSET
    acceptance_rate: Annotated[
        Fraction | None | UnsetType,
        Meta(description="Reported rate (fraction) when the counts are not known."),
    ] = UNSET
    mean_acceptance_length: Annotated[
        Nonneg | None | UnsetType, Meta(description="Reported mean acceptance length (bonus token included).")
    ] = UNSET
    raw: Annotated[
        str | None | UnsetType, Meta(description="Path under raw/ of the text this was read from.")
    ] = UNSET
    line: Annotated[PositiveInt | None | UnsetType, Meta(description="1-based line in the raw file.")] = UNSET
    error: Annotated[str | None | UnsetType, Meta(description="Why the window is void.")] = UNSET
    note: Text = UNSET


class BootRecord(Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", tag="boot"):
    """One boot of one arm's server: ready or failed, its KV pool and its command line."""

    arm: ArmName
    boot: BootNumber
    order: Annotated[PositiveInt, Meta(description="Position of this boot in the whole campaign, from 1.")]
    status: Annotated[
        Literal["ready", "failed", "interrupted"],
        Meta(
            description="ready; failed when the server never served or was refused; interrupted when collect "
            "stopped before the boot finished."
        ),
    ]
    ready_seconds: Annotated[Nonneg | None, Meta(description="Seconds from launch to ready.")]
    kv_cache_tokens: Annotated[
        Count | None, Meta(description="KV cache pool in tokens, as the server reports it.")
    ]
    block_size: Annotated[PositiveInt | None, Meta(description="KV block size in tokens.")]
    num_blocks: Annotated[Count | None, Meta(description="KV blocks in the pool.")]
    max_model_len: Annotated[PositiveInt | None, Meta(description="The server's context window.")]
    engine_version: Annotated[str | None, Meta(description="Engine version as the server reports it.")]
    argv: Annotated[tuple[str, ...] | None, Meta(description="The serve command line of this boot.")]
    error: Annotated[str | None, Meta(description="Why the boot failed.")]
    observed_k: Annotated[
        Count | None | UnsetType,
        Meta(description="Speculative depth seen in force (per-position counter labels)."),
    ] = UNSET
    log: Annotated[str | None | UnsetType, Meta(description="Path under raw/ of this boot's server log.")] = (
        UNSET
    )
    slots: Annotated[
        PositiveInt | None | UnsetType,
        Meta(
            description="Requests the server runs at once, as it reports them (llama.cpp: /props "
            "total_slots, set by --parallel; its KV pool is shared by the slots)."
        ),
    ] = UNSET
    device: Annotated[
        Name | UnsetType,
        Meta(
            description="Device the boot ran on (a campaign's [[devices]] name); arms are compared within "
            "a device. Absent for a campaign on one device."
        ),
    ] = UNSET
    node: Annotated[
        Name | None | UnsetType,
        Meta(description="Host (node) of the device, as the campaign names it; null when not named."),
    ] = UNSET
    before_boot: Annotated[
        tuple[StepRecord, ...] | UnsetType,
        Meta(description="The [server] before_boot commands run before it."),
    ] = UNSET
    memory_check: Annotated[
        MemoryCheck | UnsetType, Meta(description="[server] min_available_memory_gib checked before it.")
    ] = UNSET
    host_state: Annotated[HostState | UnsetType, Meta(description="The host's state when it started.")] = (
        UNSET
    )
    container: Annotated[
        ContainerRecord | UnsetType, Meta(description='The container it ran as (launch = "docker").')
    ] = UNSET
    note: Text = UNSET


class CoherenceRecord(Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", tag="coherence"):
    """One coherence case (or un-nonced identity probe) run on one boot."""

    arm: ArmName
    boot: BootNumber
    case: Annotated[Name, Meta(description="Coherence case id.")]
    passed: Annotated[bool, Meta(description="Whether the output met the expectation.")]
    expected: Annotated[str | None, Meta(description="What the output had to contain.")]
    output_sha256: Annotated[Sha256 | None, Meta(description="SHA-256 of the output.")]
    output: Annotated[str | None, Meta(description="The output text (may be truncated).")]
    note: Text = UNSET


class LikelihoodRecord(Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", tag="likelihood"):
    """A teacher-forced likelihood measurement of one boot."""

    arm: ArmName
    boot: BootNumber
    rep: Annotated[PositiveInt | None, Meta(description="Repetition, from 1; null when not repeated.")]
    tokens: Annotated[PositiveInt, Meta(description="Teacher-forced tokens scored.")]
    mean_nll: Annotated[Nonneg, Meta(description="Mean negative log-likelihood per token (nats).")]
    note: Text = UNSET


class SummaryRecord(Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", tag="summary"):
    """A cell summarised by someone else's harness: median and spread, raw runs lost."""

    arm: ArmName
    workload: Annotated[Name, Meta(description="Workload id from campaign.json.")]
    concurrency: Annotated[PositiveInt, Meta(description="Concurrency of the cell.")]
    metric: Annotated[Metric, Meta(description="decode_tps, ttft_ms or aggregate_tps.")]
    n: Annotated[PositiveInt, Meta(description="Runs the summary stands for.")]
    median: Annotated[Nonneg, Meta(description="Median over the runs.")]
    min: Annotated[Nonneg | None, Meta(description="Smallest run; null when not known.")]
    max: Annotated[Nonneg | None, Meta(description="Largest run; null when not known.")]
    boot: Annotated[
        PositiveInt | None | UnsetType, Meta(description="Boot the summary comes from; null when not known.")
    ] = UNSET
    distinct_outputs: Annotated[
        PositiveInt | None | UnsetType, Meta(description="Distinct output hashes among the runs, when known.")
    ] = UNSET
    note: Text = UNSET


Record = RequestRecord | AcceptanceRecord | BootRecord | CoherenceRecord | LikelihoodRecord | SummaryRecord
RECORD_TYPES: dict[str, type[Record]] = {
    "request": RequestRecord,
    "acceptance": AcceptanceRecord,
    "boot": BootRecord,
    "coherence": CoherenceRecord,
    "likelihood": LikelihoodRecord,
    "summary": SummaryRecord,
}
RECORD_KINDS = tuple(RECORD_TYPES)

# the value an absent optional key stands for, per kind (None unless listed)
ABSENT_DEFAULTS: dict[str, dict[str, Any]] = {"request": {"stream": 0}, "acceptance": {"status": "ok"}}


def record_fields(kind: str) -> tuple[str, ...]:
    """The keys of one record kind, in declaration order (the columns of its table)."""
    return RECORD_TYPES[kind].__struct_fields__


def as_builtins(record: Record) -> dict[str, Any]:
    """A record as the JSON object it is written as (absent optional keys left out, kind included)."""
    out: dict[str, Any] = msgspec.to_builtins(record)
    return out


# ---------------------------------------------------------------------------------------------------
# JSON Schemas (generated; tests keep the shipped files equal to these)


def records_schema() -> dict[str, Any]:
    """JSON Schema of one line of records.jsonl."""
    return json_schema(
        Record,
        schema_id="https://mtpverdict.dev/schemas/records-1.json",
        title=f"{RESULTS_FORMAT} records.jsonl line",
    )


def campaign_schema() -> dict[str, Any]:
    """JSON Schema of campaign.json."""
    return json_schema(
        Campaign,
        schema_id="https://mtpverdict.dev/schemas/campaign-1.json",
        title=f"{RESULTS_FORMAT} campaign.json",
    )
