"""Reads engine text of any surface: sniffs a metrics exposition or JSON, else streams log lines.

Logs are read segment by segment (lines, split again at carriage returns), so memory stays bounded
on huge files. Every engine's line parser sees every segment when the engine is ``auto``; the engine
with the most evidence wins and readings of any other engine are dropped with a warning. A message
printed by several ranks at the same moment (same payload, same timestamp or rank-free prefix) is
counted once.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mtpverdict._files import NotReadable, open_regular
from mtpverdict.engines.names import AUTO, Chosen
from mtpverdict.errors import EngineTextError, Problem
from mtpverdict.formats._check import UTF8_BOM, LimitError, loads_strict
from mtpverdict.parse.metrics import parse_metrics, prefixes
from mtpverdict.parse.model import (
    ENGINE_CHOICES,
    ENGINES,
    AcceptanceReading,
    Engine,
    EngineChoice,
    Found,
    KvCapacity,
    ParseResult,
)
from mtpverdict.parse.text import (
    BINARY_SAMPLE_CHARS,
    READ_BLOCK_BYTES,
    Segment,
    decode_blocks,
    looks_binary,
    origin_key,
    segments,
    strip_ansi,
    text_blocks,
)

DUPLICATE_LOOKBACK = 64  # recent messages remembered to recognise one line printed by several ranks
MERGE_LINES = 3  # a concurrency or per-position line completes the reading at most this many lines up
BLOCK_GAP_LINES = 1  # the lines of a block (the bench's spec block) follow one another
STRONG_WEIGHT = 100  # one reading outweighs any number of bare log prefixes when choosing the engine
MAX_WHOLE_BYTES = 64 << 20  # expositions and JSON documents are parsed whole, up to this size
SNIFF_LINES = 200
EXPOSITION_SHARE = 0.9  # share of sniffed lines that must be exposition syntax
DUPLICATES_SHOWN = 3

MIN_WEAK_SHARE = 0.1  # share of lines that must look like an engine's log, without a reading, to call it that
EXPOSITION_LINE_RE = re.compile(
    r"^(?:#\s*(?:HELP|TYPE|EOF)\b.*|#.*|[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?\s+\S+(?:\s+\S+)?)\s*$"
)
MAX_PREFIX_CHARS = 512  # of a line before a message, read for its timestamp and rank (a prefix is ~80)

if TYPE_CHECKING:
    from mtpverdict.engines.interface import EngineParts, ResponseJson

SniffKind = Literal["metrics", "json", "log"]


def parse_text(text: str, engine: EngineChoice = AUTO, *, source: str = "<text>") -> ParseResult:
    """Read engine text (log, /metrics exposition or response JSON).

    Never raises on its content but for one JSON document breaking the limits every loader shares
    (a duplicate key, nesting, an integer beyond 2**53): EngineTextError.
    """
    choice = _check_engine(engine)
    warnings: list[str] = []
    text = text.removeprefix("\ufeff")
    sample = text[:BINARY_SAMPLE_CHARS]
    if looks_binary(sample):
        warnings.append(_binary_warning())
    kind = _sniff(sample)
    if kind != "log" and len(text.encode("utf-8", errors="replace")) <= MAX_WHOLE_BYTES:
        whole = _whole_document(kind, text, choice, source, warnings)
        if whole is not None:
            return whole
    return _read_segments(segments(text_blocks(text)), choice, warnings, empty=not text.strip())


def parse_file(path: str | os.PathLike[str], engine: EngineChoice = AUTO) -> ParseResult:
    """Read an engine text file as bytes (UTF-8, invalid bytes replaced), streaming logs line by line."""
    choice = _check_engine(engine)
    file = Path(path)
    source = str(file)
    try:
        opened = open_regular(file)
    except NotReadable as exc:  # missing, a directory, a FIFO or a device: refused before any read
        raise EngineTextError([Problem(source, str(exc))]) from None
    try:
        with opened as fh:
            first = fh.read(READ_BLOCK_BYTES).removeprefix(UTF8_BOM)
            sample = first.decode("utf-8", errors="replace")[:BINARY_SAMPLE_CHARS]
            warnings: list[str] = []
            if looks_binary(sample):
                warnings.append(_binary_warning())
            kind = _sniff(sample)
            head = [first]
            if kind != "log":
                data = first + fh.read(MAX_WHOLE_BYTES + 1 - len(first))
                head = [data]
                if len(data) <= MAX_WHOLE_BYTES:
                    text = data.decode("utf-8", errors="replace")
                    whole = _whole_document(kind, text, choice, source, warnings)
                    if whole is not None:
                        return whole
            blocks: Iterator[bytes] = chain(head, iter(partial(fh.read, READ_BLOCK_BYTES), b""))
            return _read_segments(segments(decode_blocks(blocks)), choice, warnings, empty=not first.strip())
    except OSError as exc:
        raise EngineTextError([Problem(source, f"cannot be read: {exc.strerror or exc}")]) from None


def _check_engine(engine: str) -> Chosen:
    if engine not in ENGINE_CHOICES:
        raise ValueError(f"engine must be one of {', '.join(ENGINE_CHOICES)}; got {engine!r}")
    return AUTO if engine == AUTO else Engine(engine)


def _named(choice: Chosen) -> Engine | None:
    """The engine a choice names; None for auto."""
    return choice if isinstance(choice, Engine) else None


def _parts(engine: Engine) -> EngineParts:
    from mtpverdict.engines import registry  # the engine modules import the parse package

    return registry.get(engine)


def title(engine: Engine) -> str:
    """How prose names an engine (vLLM, SGLang, llama.cpp)."""
    return _parts(engine).title


def _either(words: list[str]) -> str:
    """ "a, b or c" (one word alone)."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _unrecognised() -> str:
    """What the reader says of a text no engine's parser recognises (every engine's title)."""
    return (
        f"no {_either([title(e) for e in ENGINES])} output recognised; parse reads engine logs, "
        "/metrics scrapes and response JSON (docs/engine-formats.md)"
    )


def _no_prefix() -> str:
    """ "no vllm:, sglang: or llamacpp: metrics in the exposition", from every engine's prefix."""
    return f"no {_either(list(prefixes()))} metrics in the exposition"


def _exposition_mark(sample: str) -> bool:
    """Whether a sample holds an exposition comment or a series of an engine's prefix."""
    marks = "|".join(re.escape(p) for p in prefixes())
    return re.search(r"^#\s*(?:HELP|TYPE)\s|^(?:" + marks + ")", sample, re.MULTILINE) is not None


def _binary_warning() -> str:
    return "the input does not look like text (NUL or undecodable bytes); read what could be read"


def _sniff(sample: str) -> SniffKind:
    stripped = sample.lstrip("\ufeff \t\r\n")
    if stripped[:1] in ("{", "["):
        return "json"
    lines = [line for line in stripped.splitlines()[:SNIFF_LINES] if line.strip()]
    if lines and _exposition_mark(stripped):
        matching = sum(1 for line in lines if EXPOSITION_LINE_RE.match(line))
        if matching / len(lines) >= EXPOSITION_SHARE and any(not line.startswith("#") for line in lines):
            return "metrics"
    return "log"


def _whole_document(
    kind: SniffKind, text: str, choice: Chosen, source: str, warnings: list[str]
) -> ParseResult | None:
    """Parse a whole exposition or JSON document; None to fall back to reading log lines."""
    if kind == "metrics":
        try:
            snapshot = parse_metrics(text, source=source)
        except EngineTextError as exc:
            warnings.append(f"looks like a Prometheus exposition but {exc.problems[0]}; read as log lines")
            return None
        if choice != AUTO and snapshot.engine is not None and snapshot.engine != choice:
            warnings.append(
                f"the exposition holds {title(snapshot.engine)} metrics, not "
                f"{title(choice)}; its readings are left out (use --engine auto)"
            )
            return ParseResult(_named(choice), None, (), (), tuple(warnings))
        readings = snapshot.readings()
        if snapshot.engine is None:
            warnings.append(_no_prefix())
        elif not readings:
            warnings.append("no spec-decode metrics in the exposition (speculation off?)")
        if any(r.kind == "gauge" for r in readings):
            warnings.append(_GAUGE_NOTE)
        return ParseResult(
            engine=_named(choice) or snapshot.engine,
            engine_version=None,
            acceptance=readings,
            kv_capacity=snapshot.kv_capacity,
            warnings=tuple(warnings) + snapshot.warnings,
        )
    return _json_document(text, choice, source, warnings)


def _json_document(text: str, choice: Chosen, source: str, warnings: list[str]) -> ParseResult | None:
    """A whole JSON document: an engine's benchmark result, or per-request spec fields of one engine's
    responses (each engine's `response_json` part, in the registry's order)."""
    try:
        document = loads_strict(text)
    except LimitError as exc:  # one document naming a key twice, nested or sized past the limits
        raise EngineTextError([Problem(source, str(exc))]) from None
    except ValueError:
        return None  # JSON lines or an SSE stream: read line by line
    tool = _tool_result(document)
    if tool is not None:
        warnings.append(tool[1].tool_note)
        return ParseResult(_named(choice) or tool[0], None, (), (), tuple(warnings))
    candidates = [(e, j) for e, j in _response_jsons() if choice in (AUTO, e)]
    if not candidates:
        whose = f"{title(choice)} " if isinstance(choice, Engine) else ""
        warnings.append(f"a JSON document holds no {whose}surface this parser reads")
        return ParseResult(_named(choice), None, (), (), tuple(warnings))
    for engine, part in candidates:
        held = _response_document(engine, part, document, text, warnings)
        if held is not None:
            return held
    warnings.append(
        f"a JSON document without {_either([j.holds for _, j in candidates])} "
        "(no drafting, or another surface)"
    )
    versioned = ((e, _parts(e).responses.version(text)) for e, j in candidates if j.versioned)
    found: tuple[Engine | None, str | None] = next(((e, v) for e, v in versioned if v), (None, None))
    return ParseResult(_named(choice) or found[0], found[1], (), (), tuple(warnings))


def _response_jsons() -> list[tuple[Engine, ResponseJson]]:
    """Every engine's `response_json` part it provides, in the registry's order."""
    from mtpverdict.engines.interface import present

    held = ((e, present(_parts(e).response_json)) for e in ENGINES)
    return [(e, j) for e, j in held if j is not None]


def _tool_result(document: object) -> tuple[Engine, ResponseJson] | None:
    """The engine whose benchmark tool wrote a document (every one of its `tool_keys` at the top)."""
    if not isinstance(document, dict):
        return None
    return next(
        ((e, j) for e, j in _response_jsons() if j.tool_keys and all(k in document for k in j.tool_keys)),
        None,
    )


def _response_document(
    engine: Engine, part: ResponseJson, document: object, text: str, warnings: list[str]
) -> ParseResult | None:
    """An engine's per-request spec fields of a saved response; None when it holds none."""
    responses = _parts(engine).responses
    found = list(responses.readings(document, None))
    if not found:
        return None
    lines = _key_lines(part.key, text)
    if len(lines) != len(found):
        lines = [0] * len(found)
    readings = tuple(replace(r, line=line or None) for (r, _), line in zip(found, lines, strict=True))
    for _, notes in found:
        warnings.extend(notes)
    return ParseResult(engine, responses.version(text), readings, (), tuple(warnings))


_GAUGE_NOTE = "gauge readings cover the engine's latest logging interval only and cannot be differenced"


@dataclass(slots=True)
class _PrefillTally:
    """Prefill lines seen and the prompt tokens they served from the prefix cache."""

    batches: int = 0
    reused: int = 0
    cached: int = 0
    first_line: int | None = None

    def add(self, cached: int, line: int) -> None:
        self.batches += 1
        if cached > 0:
            self.reused += 1
            self.cached += cached
            if self.first_line is None:
                self.first_line = line


def _key_lines(key: re.Pattern[str], text: str) -> list[int]:
    """The line of each match of an engine's response key, counting newlines only since the key before
    (linear in the text, however many keys it holds)."""
    lines: list[int] = []
    line, position = 1, 0
    for found in key.finditer(text):
        line += text.count("\n", position, found.start())
        position = found.start()
        lines.append(line)
    return lines


def _memory_only(kv: KvCapacity) -> bool:
    """A KV reading that gives only the pool's memory (vLLM prints it before the pool in tokens)."""
    return (
        kv.memory_gib is not None
        and kv.kv_cache_tokens is None
        and kv.num_blocks is None
        and kv.window_tokens is None
        and kv.slots is None
    )


class _Reader:
    """Accumulates what the line parsers find, per engine, until the engine is chosen."""

    def __init__(self, choice: Chosen) -> None:
        self.choice = choice
        self.engines: tuple[Engine, ...] = ENGINES if choice == AUTO else (choice,)
        self.readings: dict[Engine, list[AcceptanceReading]] = defaultdict(list)
        self.kv: dict[Engine, list[KvCapacity]] = defaultdict(list)
        self.versions: dict[Engine, list[tuple[str, int]]] = defaultdict(list)
        self.notes: dict[Engine, list[str]] = defaultdict(list)
        self.lines = 0
        self.strong: dict[Engine, int] = defaultdict(int)
        self.weak: dict[Engine, int] = defaultdict(int)
        self.first_seen: dict[Engine, int] = {}
        self.recent: OrderedDict[tuple[str, str, str], tuple[int, str]] = OrderedDict()
        self.duplicates: dict[Engine, list[tuple[int, int]]] = defaultdict(list)
        self.truncated: list[int] = []
        self.nul_lines = 0
        self.side_context: dict[Engine, bool] = defaultdict(bool)
        self.block_line: dict[Engine, int | None] = defaultdict(lambda: None)
        self.prefill: dict[Engine, _PrefillTally] = defaultdict(_PrefillTally)

    def feed(self, segment: Segment) -> None:
        self.lines += 1
        text = strip_ansi(segment.text)
        if segment.truncated:
            self.truncated.append(segment.line)
        if "\x00" in text:
            self.nul_lines += 1
            text = text.replace("\x00", "")
        for engine in self.engines:
            parts = _parts(engine)
            found = parts.log_lines.find(text, segment.line)
            found += parts.responses.find(text, segment.line)
            found = [
                item for item in found if item.block != "fills" or self._block_open(engine, segment.line)
            ]
            if found:
                self.first_seen.setdefault(engine, segment.line)
            elif parts.log_lines.evidence(text):
                self.weak[engine] += 1
                self.first_seen.setdefault(engine, segment.line)
            for item in found:
                self._take(engine, item, text, segment.line)

    def _take(self, engine: Engine, item: Found, text: str, line: int) -> None:
        # the head of the line names its moment and rank; bounded, so a line of many messages costs
        # each message this much, not the whole line before it
        prefix = text[: min(item.start, MAX_PREFIX_CHARS)]
        key = (engine, item.message.strip(), origin_key(prefix))
        earlier = self.recent.get(key)
        if earlier is not None and key[2] and (earlier[1] != prefix or key[2].startswith("@")):
            self.duplicates[engine].append((line, earlier[0]))
            return
        self.recent[key] = (line, prefix)
        if len(self.recent) > DUPLICATE_LOOKBACK:
            self.recent.popitem(last=False)
        self.strong[engine] += 1
        self.notes[engine].extend(item.warnings)
        if item.version:
            self.versions[engine].append((item.version, line))
        if item.cached_prompt_tokens is not None:
            self.prefill[engine].add(item.cached_prompt_tokens, line)
        if item.kv is not None and (item.continues or not self.side_context[engine]):
            self._take_kv(engine, item.kv, item.continues, line)
        if item.side_context is not None:
            self.side_context[engine] = item.side_context
        if item.block is not None and item.acceptance is not None:
            self._take_block(engine, item, line)
        elif item.acceptance is not None:
            self._take_acceptance(engine, item.acceptance, item.continues, line)

    def _block_open(self, engine: Engine, line: int) -> bool:
        opened = self.block_line[engine]
        return opened is not None and line - opened <= BLOCK_GAP_LINES

    def _take_block(self, engine: Engine, item: Found, line: int) -> None:
        """A line of a multi-line block: the header starts a reading, field lines fill it in order."""
        readings = self.readings[engine]
        if item.acceptance is None:
            return
        if item.block == "opens" or not readings:
            readings.append(item.acceptance)
            self.block_line[engine] = line
            return
        self.block_line[engine] = line
        last, part = readings[-1], item.acceptance
        filled = {
            name: getattr(part, name)
            for name in (
                "drafts",
                "draft_tokens",
                "accepted_tokens",
                "acceptance_rate",
                "mean_acceptance_length",
            )
            if getattr(part, name) is not None and getattr(last, name) is None
        }
        if part.per_position_rate is not None:
            rates = last.per_position_rate or ()
            if item.position != len(rates):
                self.notes[engine].append(
                    f"line {line}: position {item.position} follows {len(rates)} position(s); "
                    "the block's per-position list is left out"
                )
                self.block_line[engine] = None
                readings[-1] = replace(last, per_position_rate=None)
                return
            filled["per_position_rate"] = rates + part.per_position_rate
        readings[-1] = replace(last, **filled)

    def _take_kv(self, engine: Engine, kv: KvCapacity, continues: bool, line: int) -> None:
        pool = self.kv[engine]
        last = pool[-1] if pool else None
        if continues:  # llama.cpp's slot line: the window and slots of the pool printed before it
            if last is not None and last.window_tokens is None and last.slots is None:
                pool[-1] = replace(last, window_tokens=kv.window_tokens, slots=kv.slots)
            else:
                pool.append(kv)
            return
        if last is not None and _memory_only(last) and not _memory_only(kv) and kv.memory_gib is None:
            pool[-1] = replace(kv, memory_gib=last.memory_gib)  # vLLM prints the memory, then the tokens
            return
        concurrency_only = kv.kv_cache_tokens is None and kv.num_blocks is None and kv.memory_gib is None
        if (
            concurrency_only
            and last is not None
            and last.line is not None
            and line - last.line <= MERGE_LINES
            and last.window_tokens is None
            and last.max_concurrency is None
        ):
            pool[-1] = replace(last, window_tokens=kv.window_tokens, max_concurrency=kv.max_concurrency)
            return
        pool.append(kv)

    def _take_acceptance(
        self, engine: Engine, reading: AcceptanceReading, continues: bool, line: int
    ) -> None:
        readings = self.readings[engine]
        last = readings[-1] if readings else None
        if (
            continues
            and last is not None
            and last.line is not None
            and line - last.line <= MERGE_LINES
            and last.per_position_rate is None
            and last.scoped == "run"
        ):
            readings[-1] = replace(last, per_position_rate=reading.per_position_rate)
            return
        if continues and reading.per_position_rate is None:
            return
        readings.append(reading)

    def result(self, warnings: list[str], empty: bool) -> ParseResult:
        engine = self._choose(warnings, empty)
        if engine is None:
            return ParseResult(None, None, (), (), tuple(warnings))
        version = None
        versions = self.versions[engine]
        if versions:
            version = versions[0][0]
            others = sorted({v for v, _ in versions if v != version})
            if others:
                warnings.append(
                    f"several {title(engine)} versions in one text ({version}, {', '.join(others)}): "
                    f"kept {version} from line {versions[0][1]}; one boot per file is clearer"
                )
        warnings.extend(self.notes[engine])
        duplicates = self.duplicates[engine]
        if duplicates:
            shown = ", ".join(f"line {a} repeats line {b}" for a, b in duplicates[:DUPLICATES_SHOWN])
            warnings.append(
                f"{len(duplicates)} message(s) printed again by another rank or process were counted once "
                f"({shown})"
            )
        if self.truncated:
            warnings.append(
                f"{len(self.truncated)} overlong line(s) were cut (first: line {self.truncated[0]})"
            )
        prefill = self.prefill[engine]
        if prefill.reused:
            warnings.append(
                f"{prefill.reused} of {prefill.batches} {title(engine)} prefill batches reused "
                f"cached prompt tokens (#cached-token, {prefill.cached} in all, first at line "
                f"{prefill.first_line}): prefix caching served part of those prompts, "
                "so their prefill was not cold"
            )
        readings = tuple(self.readings[engine])
        caveat = _parts(engine).rate_caveat
        if isinstance(caveat, str) and any(r.acceptance_rate is not None for r in readings):
            warnings.append(caveat)
        if not readings and not self.kv[engine] and (self.strong[engine] or self.weak[engine]):
            warnings.append(f"no acceptance or KV-capacity lines of {title(engine)} found")
        return ParseResult(engine, version, readings, tuple(self.kv[engine]), tuple(warnings))

    def _choose(self, warnings: list[str], empty: bool) -> Engine | None:
        if self.nul_lines:
            warnings.append(f"{self.nul_lines} line(s) held NUL bytes; they were read without them")
        if self.choice != AUTO:
            if not self.strong[self.choice] and not self.weak[self.choice]:
                name = title(self.choice)
                warnings.append("empty input" if empty else f"no {name} output recognised")
            return self.choice
        scores = {e: self.strong[e] * STRONG_WEIGHT + self.weak[e] for e in ENGINES}
        # a line or two that merely looks like an engine's (a README quoting a log prefix) is not its log
        if not any(self.strong[e] or (s and s >= MIN_WEAK_SHARE * self.lines) for e, s in scores.items()):
            warnings.append("empty input" if empty else _unrecognised())
            return None
        engine = max(ENGINES, key=lambda e: (scores[e], -self.first_seen.get(e, 0)))
        warnings.extend(
            f"also found {len(self.readings[other])} acceptance and {len(self.kv[other])} KV reading(s) "
            f"of {title(other)}, left out: the text mixes engines; pass --engine to choose"
            for other in ENGINES
            if other != engine and (self.readings[other] or self.kv[other])
        )
        return engine


def _read_segments(
    parts: Iterable[Segment], choice: Chosen, warnings: list[str], *, empty: bool
) -> ParseResult:
    reader = _Reader(choice)
    for segment in parts:
        reader.feed(segment)
    return reader.result(warnings, empty)
