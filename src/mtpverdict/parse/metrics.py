"""Prometheus /metrics expositions of every engine: snapshots and counter deltas, engine-neutral.

The exposition is read with ``prometheus_client``'s text parser. Which family is which reading is each
engine's ``metric_names`` part (mtpverdict.engines.interface.MetricNames), its engine its
``metric_prefix``. Counters are summed over every label set but ``position`` (data-parallel engines
each export their own series); ``_created`` series are ignored. Acceptance gauges hold the engine's
latest logging interval: they are reported as gauge readings and never differenced. A counter that
went down between two scrapes means the server restarted: that window is void.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict.errors import EngineTextError, Problem
from mtpverdict.parse.model import AcceptanceReading, Engine, KvCapacity, VoidWindow
from mtpverdict.parse.text import to_float, to_int

if TYPE_CHECKING:  # the engine modules import the parse package
    from mtpverdict.engines.interface import KvConfigInfo

TOTAL_SUFFIX = "_total"
CREATED_SUFFIX = "_created"
POSITION_LABEL = "position"
ENGINE_LABEL = "engine"

# the roles of interface.MetricNames this module reads, by kind
SPEC_COUNTERS = ("drafts", "draft_tokens", "accepted_tokens")
COUNTERS = (*SPEC_COUNTERS, "prompt_tokens", "generation_tokens")
GAUGES = ("accept_length", "accept_rate")
MISSING_LABEL_VALUES = ("", "None", "none", "null")
SHOWN_LINE_CHARS = 120  # of the offending line quoted in an error


def prefixes() -> dict[str, Engine]:
    """Every engine's /metrics prefix (its `metric_prefix` part, engines/*.py), in the registry's order."""
    from mtpverdict.engines import registry  # the engine modules import the parse package

    return {parts.metric_prefix: engine for engine, parts in registry.ENGINES.items()}


@dataclass(frozen=True, slots=True)
class _Series:
    """What a /metrics family is to the reader: its engine, its role, and how messages name it."""

    engine: Engine
    role: str
    shown: str  # the name without the engine's prefix (and a counter's _total)
    kv: KvConfigInfo | None = None


def series() -> dict[str, _Series]:
    """Every family some engine's `metric_names` part names, by its full name (engines/*.py)."""
    from mtpverdict.engines import registry  # the engine modules import the parse package

    found: dict[str, _Series] = {}
    for engine, parts in registry.ENGINES.items():
        names = registry.present(parts.metric_names)
        if names is None:
            continue
        for name, role in names.roles().items():
            shown = name.removeprefix(parts.metric_prefix)
            found.setdefault(name, _Series(engine, role, shown, names.kv_config))
    return found


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """One scrape of an engine's /metrics, reduced to what acceptance and KV capacity need.

    Counter values are totals since the server started, summed over engines; ``None`` when the
    exposition does not carry the counter. ``accepted_per_position`` holds (position, count) pairs.
    """

    engine: Engine | None
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    accepted_per_position: tuple[tuple[int, int], ...]
    prompt_tokens: int | None
    generation_tokens: int | None
    gauges: tuple[AcceptanceReading, ...]
    kv_capacity: tuple[KvCapacity, ...]
    cache_config: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]

    @property
    def has_spec_counters(self) -> bool:
        return any(v is not None for v in (self.drafts, self.draft_tokens, self.accepted_tokens)) or bool(
            self.accepted_per_position
        )

    def counter_reading(self) -> AcceptanceReading | None:
        """The spec-decode counters as a reading of totals since boot; None without counters."""
        if not self.has_spec_counters:
            return None
        return AcceptanceReading(
            source="metrics",
            scoped="window",
            kind="counter_total",
            drafts=self.drafts,
            draft_tokens=self.draft_tokens,
            accepted_tokens=self.accepted_tokens,
            accepted_per_position=_contiguous(dict(self.accepted_per_position)),
        )

    def readings(self) -> tuple[AcceptanceReading, ...]:
        counters = self.counter_reading()
        return ((counters,) if counters else ()) + self.gauges


def parse_metrics(text: str, *, source: str = "<metrics>") -> MetricsSnapshot:
    """Read a Prometheus text exposition; raise EngineTextError naming the first malformed line.

    Which family plays which role (a spec-decode counter, a gauge, the KV pool) is each engine's
    `metric_names` part; a sample that no engine's part names only counts toward its prefix's engine.
    """
    samples = _samples(text, source)
    engines: dict[Engine, int] = defaultdict(int)
    counters: dict[str, float] = defaultdict(float)
    shown: dict[str, str] = {}  # role -> how messages name the counter (the first family seen)
    per_pos: dict[int, float] = defaultdict(float)
    gauge_series: dict[tuple[tuple[str, str], ...], dict[str, float]] = defaultdict(dict)
    kv = _KvPool()
    warnings: list[str] = []
    named, known = prefixes(), series()
    for name, labels, value in samples:
        prefix = next((p for p in named if name.startswith(p)), None)
        if prefix is None or name.endswith(CREATED_SUFFIX):
            continue
        engines[named[prefix]] += 1
        found = known.get(name.removesuffix(TOTAL_SUFFIX))
        if found is None:
            continue
        if found.role == "accepted_per_position":
            position = to_int(labels.get(POSITION_LABEL, ""))
            if position is None or position < 0:
                warnings.append(f"{name}: position label {labels.get(POSITION_LABEL)!r} is not a position")
                continue
            per_pos[position] += value
        elif found.role in COUNTERS:
            counters[found.role] += value
            shown.setdefault(found.role, found.shown)
        elif found.role in GAUGES:
            gauge_series[tuple(sorted(labels.items()))][found.role] = value
        else:
            kv.add(found, labels, value)
    engine = _engine_of(engines, warnings)

    def total(role: str) -> int | None:
        if role not in shown:
            return None
        whole = _whole(counters[role])
        if whole is None:
            warnings.append(f"counter {shown[role]} = {counters[role]!r} is not a whole count; left out")
        return whole

    positions = _positions(per_pos, warnings)
    return MetricsSnapshot(
        engine=engine,
        drafts=total("drafts"),
        draft_tokens=total("draft_tokens"),
        accepted_tokens=total("accepted_tokens"),
        accepted_per_position=positions,
        prompt_tokens=total("prompt_tokens"),
        generation_tokens=total("generation_tokens"),
        gauges=tuple(r for r in (_gauge(series) for series in gauge_series.values()) if r is not None),
        kv_capacity=tuple(kv.found),
        cache_config=kv.cache_config,
        warnings=tuple(warnings),
    )


class _KvPool:
    """The KV pool's readings of one exposition, each once: an info series' labels, or a gauge."""

    def __init__(self) -> None:
        self.found: list[KvCapacity] = []
        self.seen: set[tuple[tuple[str, str], ...]] = set()
        self.cache_config: tuple[tuple[str, str], ...] = ()

    def add(self, found: _Series, labels: dict[str, str], value: float) -> None:
        if found.role == "kv_config" and found.kv is not None:
            kept = tuple(sorted((k, v) for k, v in labels.items() if k != ENGINE_LABEL))
            self.cache_config = self.cache_config or tuple(sorted(labels.items()))
            if kept not in self.seen:
                self.seen.add(kept)
                self.found.append(_cache_config_capacity(dict(kept), found.kv))
        elif found.role == "kv_tokens":
            tokens = _whole(value)
            key = ((found.shown, str(tokens)),)
            if tokens is not None and key not in self.seen:
                self.seen.add(key)
                self.found.append(KvCapacity(kv_cache_tokens=tokens))


def _engine_of(engines: Mapping[Engine, int], warnings: list[str]) -> Engine | None:
    """The engine most samples name; a mix of engines is read as that one, with a warning."""
    if not engines:
        return None
    engine: Engine = max(engines, key=engines.__getitem__)
    if len(engines) > 1:
        listed = ", ".join(f"{e} ({n} samples)" for e, n in sorted(engines.items()))
        warnings.append(f"the exposition mixes engines: {listed}; read as {engine}")
    return engine


def _positions(per_pos: Mapping[int, float], warnings: list[str]) -> tuple[tuple[int, int], ...]:
    """Per-position accepted counts by position; none at all when one of them is not a whole count."""
    positions: list[tuple[int, int]] = []
    for position in sorted(per_pos):
        whole = _whole(per_pos[position])
        if whole is None:
            shown = per_pos[position]
            warnings.append(f"per-position counter {position} = {shown!r} is not a count; left out")
            return ()
        positions.append((position, whole))
    return tuple(positions)


def acceptance_delta(
    before: MetricsSnapshot, after: MetricsSnapshot
) -> AcceptanceReading | VoidWindow | None:
    """Spec-decode counters over the window between two scrapes.

    Returns None when neither scrape carries spec-decode counters (speculation off, or an engine such
    as SGLang that exports gauges only, which cannot be differenced); a VoidWindow when the window
    must not be used (a counter went down: the server restarted; the draft positions changed after
    drafting had begun; the scrapes come from different engines); otherwise a ``counter_delta``
    reading with counts only. Positions that first appear in a window before which nothing was
    drafted count from 0 (llama.cpp exports them only once a draft was verified).
    """
    if not before.has_spec_counters and not after.has_spec_counters:
        return None
    if before.engine is not None and after.engine is not None and before.engine != after.engine:
        return VoidWindow(f"the scrapes come from different engines ({before.engine}, {after.engine})")
    deltas = _counter_deltas(before, after)
    if isinstance(deltas, VoidWindow):
        return deltas
    old_pos, new_pos = dict(before.accepted_per_position), dict(after.accepted_per_position)
    if not old_pos and before.drafts == 0:
        # Nothing was verified before the window, so every per-position count was 0 then; llama.cpp
        # exports the per-position series only from the first verified draft on.
        old_pos = dict.fromkeys(new_pos, 0)
    if set(old_pos) != set(new_pos):
        what = (
            f"from {len(old_pos)} to {len(new_pos)}"
            if len(old_pos) != len(new_pos)
            else f"from positions {_listed(old_pos)} to {_listed(new_pos)}"
        )
        return VoidWindow(
            f"draft positions changed {what}: the server restarted with another speculative depth"
        )
    per_pos: dict[int, int] = {}
    for position, new in new_pos.items():
        if new < old_pos[position]:
            return VoidWindow(
                f"per-position counter {position} went down from {old_pos[position]} to {new}: "
                "the server restarted (counter reset)"
            )
        per_pos[position] = new - old_pos[position]
    drafted, accepted = deltas["draft_tokens"], deltas["accepted_tokens"]
    if drafted is not None and accepted is not None and accepted > drafted:
        return VoidWindow(
            f"{accepted} tokens accepted but only {drafted} drafted: the scrapes are inconsistent"
        )
    return AcceptanceReading(
        source="metrics",
        scoped="window",
        kind="counter_delta",
        drafts=deltas["drafts"],
        draft_tokens=drafted,
        accepted_tokens=accepted,
        accepted_per_position=_contiguous(per_pos),
    )


def _counter_deltas(before: MetricsSnapshot, after: MetricsSnapshot) -> dict[str, int | None] | VoidWindow:
    """Each spec-decode counter's difference by role (None when neither scrape has it), or why the
    window is void (a counter in one scrape only, or one that went down)."""
    deltas: dict[str, int | None] = {}
    for role, old, new in (
        ("drafts", before.drafts, after.drafts),
        ("draft_tokens", before.draft_tokens, after.draft_tokens),
        ("accepted_tokens", before.accepted_tokens, after.accepted_tokens),
    ):
        name = _counter_name(after.engine or before.engine, role)
        if old is None and new is None:
            deltas[role] = None
            continue
        if old is None or new is None:
            return VoidWindow(
                f"counter {name} is in only one of the two scrapes; the server changed between them"
            )
        if new < old:
            return VoidWindow(
                f"counter {name} went down from {old} to {new}: the server restarted (counter reset)"
            )
        deltas[role] = new - old
    return deltas


def _counter_name(engine: Engine | None, role: str) -> str:
    """How a message names an engine's counter: its family without the prefix (the role without one)."""
    return next((s.shown for s in series().values() if s.engine == engine and s.role == role), role)


SHOWN_POSITIONS = 8  # positions a message lists before a count


def _listed(positions: Mapping[int, int]) -> str:
    ordered = sorted(positions)
    shown = ", ".join(map(str, ordered[:SHOWN_POSITIONS]))
    return shown + (f", ... ({len(ordered)} in all)" if len(ordered) > SHOWN_POSITIONS else "")


def observed_k(snapshot: MetricsSnapshot) -> int | None:
    """The speculative depth in force: the number of ``position`` labels.

    0 for a vLLM exposition without any spec-decode counter (speculation off); None when the
    engine does not export per-position counters, so the depth cannot be seen.
    """
    if snapshot.engine is None:
        return len(snapshot.accepted_per_position) or None
    from mtpverdict.engines import registry  # the engine modules import the parse package

    depth = registry.get(snapshot.engine).depth_in_force
    return depth(len(snapshot.accepted_per_position), snapshot.has_spec_counters)


def _samples(text: str, source: str) -> list[tuple[str, dict[str, str], float]]:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        return [
            (sample.name, dict(sample.labels), float(sample.value))
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]
    except Exception as exc:  # the parser raises bare ValueError/IndexError/TypeError on bad input
        line, shown = _bad_line(text)
        message = f"not a valid Prometheus text exposition ({type(exc).__name__}: {exc})"
        if shown is not None:
            message += f"; offending line: {shown[:SHOWN_LINE_CHARS]!r}"
        raise EngineTextError([Problem(source, message, line=line)]) from None


def _bad_line(text: str) -> tuple[int | None, str | None]:
    """Find the first line the parser refuses on its own, to name it in the error."""
    from prometheus_client.parser import text_string_to_metric_families

    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except Exception:  # any refusal locates the line; the caller reports it as EngineTextError
            return number, line
    return None, None


def _whole(value: float) -> int | None:
    if not math.isfinite(value) or value < 0 or value != math.floor(value):
        return None
    return int(value)


def _label_int(labels: dict[str, str], key: str) -> int | None:
    value = labels.get(key)
    return None if value is None or value in MISSING_LABEL_VALUES else to_int(value)


def _cache_config_capacity(labels: dict[str, str], info: KvConfigInfo) -> KvCapacity:
    concurrency = labels.get(info.max_concurrency)
    return KvCapacity(
        kv_cache_tokens=_label_int(labels, info.tokens),
        max_concurrency=None
        if concurrency is None or concurrency in MISSING_LABEL_VALUES
        else to_float(concurrency),
        num_blocks=_label_int(labels, info.blocks),
        block_size=_label_int(labels, info.block_size),
    )


def _gauge(series: dict[str, float]) -> AcceptanceReading | None:
    length = series.get("accept_length")
    rate = series.get("accept_rate")
    mean = length if length is not None and math.isfinite(length) and length >= 1.0 else None
    fraction = rate if rate is not None and math.isfinite(rate) and 0.0 <= rate <= 1.0 else None
    if mean is None and not fraction:
        return None  # an engine may set both gauges to 0 when speculation is off (SGLang does)
    return AcceptanceReading(
        source="metrics", scoped="window", kind="gauge", acceptance_rate=fraction, mean_acceptance_length=mean
    )


def _contiguous(per_pos: dict[int, int]) -> tuple[int, ...] | None:
    """Counts for positions 0..k-1 as a tuple; None when empty or when positions have gaps."""
    if not per_pos or sorted(per_pos) != list(range(len(per_pos))):
        return None
    return tuple(per_pos[p] for p in range(len(per_pos)))
