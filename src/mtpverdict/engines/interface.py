"""What an engine module provides: one `EngineParts` per engine; a part it lacks is `Absent`, with why.

    name, title              Engine, how prose names it ("vLLM")
    flags                    its speculative flag table, removed flags among them (FlagGroup lines)
    spec_namespace           the long flags that name its speculation, known or not (a misspelt one
                             is refused, not dropped)
    read_spec                the speculative config of the flags an argv gives (ServeSpec | SpecRefusal)
    programs                 how a command line runs its server (executables, subcommand, -m modules)
    image_words              words in an image name that say it runs the engine
    config_variables         the prefixes of the environment variables it reads as configuration
    metric_prefix            the prefix of its /metrics names ("vllm:")
    metric_names             the /metrics series mtpverdict.parse.metrics reads, each by its role
    metric_counters          the spec-decode and generation counters a rate() reads (live alerts)
    log_lines, responses     its log-line and response-JSON parsers (mtpverdict.parse.reader uses them)
    response_json            how the reader recognises a whole JSON document of its saved responses
                             (the key each reading opens with, what the warning names) and its
                             benchmark tool's results, which another command reads
    rate_caveat              what the reader says once of a text whose readings give an acceptance rate
    depth_in_force           the depth a /metrics scrape shows in force
    readiness                what collect reads after /health answers before a boot may run, and how
                             it judges the answers
    server_fields            the response object of one request's own fields, how they are read,
                             whether they give its timing, the flag that turns that clock on, and
                             the fields' names
    boot_log                 what collect matches in a launched boot's log (which readings are one
                             request's line), and says when it is missing
    short_flags              short spellings of its settings, as the gate reads a command line
    context_flags            the flags that set the context one request may use (the gate's envelope)
    data_parallel_flags      the data-parallel size, above 1 of which the engine turns a schedule off
    compile_schedule         the serve setting that runs a per-batch-size depth schedule

The registry (mtpverdict.engines.registry) lists one EngineParts per engine; tests/engines/
test_registry.py fails for an engine that neither implements nor declares absent every part, or whose
part is not usable as the caller uses it. Collect says the reason of an absent part it would use
(COLLECT_PARTS) once, unless the engine does not need it (`Absent.needed` False).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from mtpverdict.engines.names import Engine
from mtpverdict.engines.served import Seen, ServedFields
from mtpverdict.engines.spec import DepthRange, FlagGroup, FoundFlag, ServeSpec, SpecRefusal
from mtpverdict.parse.model import AcceptanceReading, Found

__all__ = [
    "COLLECT_PARTS",
    "PARTS",
    "Absent",
    "BootLog",
    "FieldReader",
    "EngineParts",
    "KvConfigInfo",
    "LogParser",
    "MetricNames",
    "Programs",
    "Note",
    "Ready",
    "Readiness",
    "ReadinessJudge",
    "ResponseJson",
    "ResponseParser",
    "ScheduleCompiler",
    "ServerFields",
    "SpecCounters",
    "SpecNamespace",
    "present",
]

T = TypeVar("T")
Note = tuple[str, str]  # (key, sentence): evidence an engine does not show, said once per collect


@dataclass(frozen=True, slots=True)
class Absent:
    """A part an engine does not provide, and why (said where a caller would have used it).

    `needed` False: the engine needs no such part (nothing is missing), so no caller says it.
    """

    reason: str
    needed: bool = True


@dataclass(frozen=True, slots=True)
class Programs:
    """How a command line runs the engine's server (mtpverdict.servecommand reads these).

    `executables` run it, followed by `subcommand` when one is named; with `builds`, a build's name
    (`<executable>-<build>`: llama-server-cuda, llama-server-b6100) runs it too. `modules` are what an
    interpreter may run with -m, each True when `subcommand` follows it.
    """

    executables: tuple[str, ...] = ()
    subcommand: str | None = None
    builds: bool = False
    modules: tuple[tuple[str, bool], ...] = ()

    def runs(self, name: str) -> bool:
        """Whether a program name (no directory, no .exe) is one of the executables or their builds."""
        if name in self.executables:
            return True
        if not self.builds:
            return False
        for executable in self.executables:
            build = name.removeprefix(f"{executable}-")
            if build != name and build and all(c.isalnum() or c in "._" for c in build):
                return True
        return False


@dataclass(frozen=True, slots=True)
class SpecNamespace:
    """The long flags that name an engine's speculation or drafting, in its table or not: a flag that
    opens with one of `prefixes`, holds one of `infixes` or ends with one of `suffixes`
    (mtpverdict.serveconfig refuses one its table does not know: a misspelling, a newer flag)."""

    prefixes: tuple[str, ...]
    infixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()

    def holds(self, flag: str) -> bool:
        """Whether a long flag (normalised: `-` between words) names the engine's speculation."""
        return (
            flag.startswith(self.prefixes)
            or any(infix in flag for infix in self.infixes)
            or flag.endswith(self.suffixes)
        )


@dataclass(frozen=True, slots=True)
class SpecCounters:
    """The /metrics counters of drafting and generation, by full name (prefix and _total included)."""

    drafts: str  # verification steps that drafted
    draft_tokens: str
    accepted: str
    generated: str


@dataclass(frozen=True, slots=True)
class KvConfigInfo:
    """An info series whose labels give the KV pool: the series' name and the labels read."""

    name: str
    tokens: str  # the pool in tokens
    max_concurrency: str  # requests of the full context the pool holds at once
    blocks: str  # blocks in the pool
    block_size: str  # tokens a block holds


@dataclass(frozen=True, slots=True)
class MetricNames:
    """The /metrics series mtpverdict.parse.metrics reads of the engine, each by the role it plays.

    Each is a family's full name, the engine's `metric_prefix` included and a counter's `_total` left
    out (the reader strips it from a sample); None where the engine exports no such series. Counters
    are totals since boot and are differenced; gauges hold the engine's latest logging interval and
    never are.
    """

    drafts: str | None = None  # counter: verification steps that drafted
    draft_tokens: str | None = None  # counter: tokens drafted
    accepted_tokens: str | None = None  # counter: draft tokens accepted
    accepted_per_position: str | None = None  # counter, one series per `position` label
    prompt_tokens: str | None = None  # counter
    generation_tokens: str | None = None  # counter
    accept_length: str | None = None  # gauge: tokens per verification step, the bonus token in
    accept_rate: str | None = None  # gauge: accepted / drafted
    kv_tokens: str | None = None  # gauge: the KV pool in tokens
    kv_config: KvConfigInfo | None = None  # an info series whose labels give the KV pool

    def roles(self) -> dict[str, str]:
        """Every series named, as full name -> role (the field's name)."""
        named = {role: getattr(self, role) for role in self.__dataclass_fields__}
        found = {value: role for role, value in named.items() if isinstance(value, str)}
        if self.kv_config is not None:
            found[self.kv_config.name] = "kv_config"
        return found


class LogParser(Protocol):
    """An engine's log lines: the messages a segment holds, and whether it looks like its log."""

    def find(self, text: str, line: int) -> list[Found]: ...

    def evidence(self, text: str) -> bool: ...


class ResponseParser(Protocol):
    """An engine's per-request spec fields in response JSON, from a text line or a loaded document."""

    def find(self, text: str, line: int) -> list[Found]: ...

    def readings(self, obj: Any, line: int | None) -> Iterator[tuple[AcceptanceReading, tuple[str, ...]]]: ...

    def version(self, text: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ResponseJson:
    """A whole JSON document of the engine's saved responses, as mtpverdict.parse.reader reads it.

    `responses.readings` reads the document; the n-th reading sits on the line of the n-th match of
    `key`. `holds` names the fields, as the reader's warning for a document without readings says it.
    `versioned`: a document naming the engine's build (`responses.version`) is the engine's even without
    a reading. A document holding every one of `tool_keys` at its top is a result of the engine's own
    benchmark tool: the reader says `tool_note` of it instead of reading it.
    """

    key: re.Pattern[str]
    holds: str
    versioned: bool = False
    tool_keys: tuple[str, ...] = ()
    tool_note: str = ""


@dataclass(frozen=True, slots=True)
class Ready:
    """What a ready server's readiness endpoints said, and whether the arm may run on it."""

    refusal: str | None  # why the boot is refused; None when it may run
    missing: tuple[Note, ...]  # evidence not shown
    speculating: bool | None  # whether the server speculates; None when not read
    window_tokens: int | None  # the context one request may use
    slots: int | None  # requests the server runs at once
    version: str | None  # the build, as the server names it


class ReadinessJudge(Protocol):
    """Judge a ready server from the bodies of its readiness paths (None for a path not answered 200)."""

    def __call__(self, bodies: Mapping[str, str | None], *, speculates: bool, concurrency: int) -> Ready: ...


@dataclass(frozen=True, slots=True)
class Readiness:
    """Endpoints collect reads once /health answers, before a boot may run, and how it judges them."""

    paths: tuple[str, ...]
    judge: ReadinessJudge
    why: str


class FieldReader(Protocol):
    """One request's own fields from the engine's response object, checked against what the client saw
    (ServedValueError, engines/served.py, for a value that fails)."""

    def __call__(self, obj: dict[str, Any], seen: Seen, completion_tokens: int) -> ServedFields: ...


@dataclass(frozen=True, slots=True)
class ServerFields:
    """The response object that carries one request's own timing and drafting, how it is read, and
    the engine's clock.

    `timed`: the reader gives the request's own timing (ServedFields.timing or .phases: decode and
    TTFT on the engine's clock); False for an object of drafting only, which leaves timing to the
    client's clock. `clock_flag` turns the engine's per-request clock on from version `clock_since`;
    None when the engine reports it on every response. `fields` names the object's fields the reader
    reads, as the engine spells them (outside engines/, only the engine's own parsers spell them).
    `report_flags`: serve flags (with how many values each takes) that turn on the object's drafting
    report, which only a speculating arm can set; an arm's serve_args may hold them beside its
    speculative configuration.
    """

    response_key: str
    read: FieldReader
    clock_flag: str | None = None
    clock_since: tuple[int, int] | None = None
    timed: bool = False
    fields: tuple[str, ...] = ()
    report_flags: tuple[tuple[str, int], ...] = ()


def no_reading_per_request(reading: AcceptanceReading) -> bool:
    """BootLog's default rule: no reading of the log is one request's."""
    return False


@dataclass(frozen=True, slots=True)
class BootLog:
    """What collect reads of a launched boot's log beyond its acceptance windows, each note said once
    when the log does not show it: its KV pool line, and per-request lines (matched to the runs that
    printed them, collect/logruns.py). `per_request` says which of the log's readings are one
    request's line (each printed by one request that drafted, with its drafted and accepted counts);
    the others are engine-wide windows."""

    no_kv_line: Note
    no_request_lines: Note
    per_request: Callable[[AcceptanceReading], bool] = no_reading_per_request


class ScheduleCompiler(Protocol):
    """The exact serve setting (JSON) that runs `table` (first batch, last batch, k) up to depth `top`,
    from the speculative settings the arms ran (`base`, depth keys left out)."""

    def __call__(self, base: Mapping[str, object], top: int, table: Sequence[DepthRange]) -> str: ...


@dataclass(frozen=True, slots=True)
class EngineParts:
    """Everything mtpverdict knows of one engine."""

    name: Engine
    title: str
    flags: tuple[FlagGroup, ...]
    spec_namespace: SpecNamespace
    read_spec: Callable[[list[FoundFlag]], ServeSpec | SpecRefusal]
    programs: Programs
    image_words: tuple[str, ...]
    config_variables: tuple[str, ...]
    metric_prefix: str
    metric_names: MetricNames | Absent
    metric_counters: SpecCounters | Absent
    log_lines: LogParser
    responses: ResponseParser
    response_json: ResponseJson | Absent
    rate_caveat: str | Absent
    depth_in_force: Callable[[int, bool], int | None]
    readiness: Readiness | Absent
    server_fields: ServerFields | Absent
    boot_log: BootLog | Absent
    short_flags: Mapping[str, str] | Absent
    context_flags: tuple[str, ...]
    data_parallel_flags: tuple[str, ...] | Absent
    compile_schedule: ScheduleCompiler | Absent


# every part, in the order the docstring lists them (the registry test walks these)
PARTS: tuple[str, ...] = tuple(
    name for name in EngineParts.__dataclass_fields__ if name not in ("name", "title")
)
# the parts collect would use: the reason of each absent one it needs is said once per collect
COLLECT_PARTS: tuple[str, ...] = ("readiness", "server_fields", "boot_log")


def present(part: T | Absent) -> T | None:
    """The part, or None when the engine declares it absent."""
    return None if isinstance(part, Absent) else part
