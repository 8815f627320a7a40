"""The registry of engines: a half-added engine (a part neither implemented nor declared absent, no docs
row, no samples) fails loudly."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from mtpverdict.engines import registry
from mtpverdict.engines.interface import (
    PARTS,
    Absent,
    BootLog,
    EngineParts,
    MetricNames,
    Programs,
    Readiness,
    Ready,
    ResponseJson,
    ServerFields,
    SpecCounters,
    SpecNamespace,
    present,
)
from mtpverdict.engines.names import ENGINES, Engine
from mtpverdict.engines.served import Seen, ServedFields
from mtpverdict.engines.spec import FlagGroup
from mtpverdict.parse import parse_metrics, parse_text

from ..conftest import ROOT

DOC = ROOT / "docs" / "engine-formats.md"
DATA = ROOT / "tests" / "data"
SURFACES = "## Surfaces read, per engine, and the version each was checked against"


# ---------------------------------------------------------------------------------------------------
# the check: every engine whole, in the code, the docs and the recorded samples


def registry_problems(engines: Mapping[Engine, EngineParts], doc: str, data: Path) -> list[str]:
    """Every way the engines fall short of a whole engine; empty when each is whole."""
    problems = [f"{e}: not in the registry" for e in Engine if e not in engines]
    rows = surface_rows(doc)
    for name, parts in engines.items():
        found = code_problems(name, parts) + part_problems(parts) + prefix_problems(parts, engines)
        found += flag_problems(parts, engines)
        found += namespace_problems(parts, engines)
        found += doc_problems(parts, rows) + sample_problems(name, rows.get(parts.title, []), data)
        found += metric_sample_problems(parts, data)
        problems += [f"{name}: {p}" for p in found]
    return problems


def code_problems(name: Engine, parts: EngineParts) -> list[str]:
    """Its own module mtpverdict.engines.<name>, holding ENGINE, with a docstring."""
    out = []
    if parts.name is not name:
        out.append(f"registered as {name!r} but named {parts.name!r}")
    module = sys.modules.get(f"mtpverdict.engines.{name}")
    if module is None or getattr(module, "ENGINE", None) is not parts:
        out.append(f"not the ENGINE of its own module mtpverdict.engines.{name}")
    elif not (module.__doc__ or "").strip():
        out.append("no module docstring")
    if not parts.title.strip():
        out.append("no title")
    elif re.sub(r"[^a-z0-9]", "", parts.title.lower()) != name.value:
        out.append(f"title {parts.title!r} does not spell the engine's name {name.value!r}")
    return out


def metric_names(parts: EngineParts) -> tuple[str, ...]:
    """Every /metrics name an engine's parts give: its metric_names' families and its counters."""
    names = tuple(found.roles()) if isinstance(found := parts.metric_names, MetricNames) else ()
    counters = parts.metric_counters
    return names + (dataclasses.astuple(counters) if isinstance(counters, SpecCounters) else ())


def prefix_problems(parts: EngineParts, engines: Mapping[Engine, EngineParts]) -> list[str]:
    """Its /metrics prefix tells its names apart: each of its names starts with it, and no other
    engine's prefix starts with it or is started by it (the reader would take one for the other)."""
    prefix = parts.metric_prefix
    if not (isinstance(prefix, str) and prefix.endswith(":") and len(prefix) > 1):
        return ["metric_prefix: not a name followed by ':'"]
    out = [
        f"metric_prefix: {n!r} does not start with {prefix!r}"
        for n in metric_names(parts)
        if not n.startswith(prefix)
    ]
    out += [
        f"metric_prefix: {prefix!r} and {other.name}'s {other.metric_prefix!r} overlap"
        for other in engines.values()
        if other.name is not parts.name
        and (other.metric_prefix.startswith(prefix) or prefix.startswith(other.metric_prefix))
    ]
    return out


def flag_spellings(parts: EngineParts) -> list[tuple[str, str]]:
    """Every spelling in an engine's flag table, with its line's canonical flag, in table order."""
    groups = parts.flags if isinstance(parts.flags, tuple) else ()
    lines = (line.split() for g in groups if isinstance(g, FlagGroup) for line in g.text.strip().splitlines())
    return [(name, names[0]) for names in lines if names for name in names]


def flag_problems(parts: EngineParts, engines: Mapping[Engine, EngineParts]) -> list[str]:
    """Each spelling in its flag table names one flag of one engine: none is listed twice in its own
    table, and none is another engine's too (the flag table keeps one engine per spelling, so the
    other's flag would be read as this one's)."""
    mine = flag_spellings(parts)
    names = [name for name, _ in mine]
    out = [
        f"flags: {name!r} is listed twice in its table"
        for name in dict.fromkeys(names)
        if names.count(name) > 1
    ]
    for other in engines.values():
        if other.name is parts.name:
            continue
        theirs = dict(flag_spellings(other))
        out += [
            f"flags: {name!r} ({canonical}) is {other.name}'s {theirs[name]} too"
            for name, canonical in dict(mine).items()
            if name in theirs
        ]
    return out


def namespace_problems(parts: EngineParts, engines: Mapping[Engine, EngineParts]) -> list[str]:
    """Its spec_namespace holds no flag another engine has outside speculation (its context and
    data-parallel flags, what its short flags stand for): serveconfig applies every engine's namespace
    to every command line, so it would refuse that engine's ordinary setting as a misspelt
    speculative one."""
    namespace: object = parts.spec_namespace
    if not isinstance(namespace, SpecNamespace):
        return []  # said by part_problems
    out = []
    for other in engines.values():
        if other.name is parts.name:
            continue
        short = present(other.short_flags) or {}
        general = {*other.context_flags, *(present(other.data_parallel_flags) or ()), *short.values()}
        general -= {name for name, _ in flag_spellings(other)}  # a short form of a speculative flag
        out += [
            f"spec_namespace: holds {other.name}'s {flag}, not a speculative flag"
            for flag in sorted(general)
            if flag.startswith("--") and namespace.holds(flag)
        ]
    return out


def part_problems(parts: EngineParts) -> list[str]:
    """Each part implemented (of its kind) or declared Absent with a reason."""
    out = []
    for part in PARTS:
        value = getattr(parts, part)
        if isinstance(value, Absent):
            if not value.reason.strip():
                out.append(f"{part}: declared absent without a reason")
            continue
        why = _implemented(part, value, parts)
        if why:
            out.append(f"{part}: {why}")
    return out


def _implemented(part: str, value: object, parts: EngineParts) -> str | None:
    """Why a present part is not one (None when it is)."""
    checks: dict[str, tuple[bool, str]] = {
        "flags": (
            isinstance(value, tuple)
            and bool(value)
            and all(isinstance(g, FlagGroup) and g.text.strip() for g in value),
            "not a non-empty tuple of FlagGroup lines",
        ),
        "programs": (
            isinstance(value, Programs) and bool(value.executables or value.modules),
            "not Programs naming an executable or a module",
        ),
        "image_words": (
            isinstance(value, tuple) and bool(value) and all(isinstance(w, str) and w for w in value),
            "no words that name the engine in an image",
        ),
        "metric_prefix": (isinstance(value, str), "not a string (prefix_problems checks what it is)"),
        "metric_names": (
            isinstance(value, MetricNames) and bool(value.roles()),
            "not MetricNames naming a family",
        ),
        "config_variables": (
            isinstance(value, tuple) and all(isinstance(p, str) and p.endswith("_") for p in value),
            "not a tuple of variable prefixes (each ending in _)",
        ),
        "response_json": (
            isinstance(value, ResponseJson)
            and bool(value.key.pattern and value.holds.strip())
            and bool(value.tool_keys) == bool(value.tool_note.strip()),
            "not a ResponseJson with a key, what it holds, and a note for each tool's keys",
        ),
        "rate_caveat": (isinstance(value, str) and bool(value.strip()), "not a sentence"),
        "log_lines": (_has(value, "find", "evidence"), "no find and evidence"),
        "responses": (_has(value, "find", "readings", "version"), "no find, readings and version"),
        "metric_counters": (
            isinstance(value, SpecCounters) and _counters_named(value, parts.metric_names),
            "not SpecCounters of the families metric_names gives those roles",
        ),
        "readiness": (_readiness_usable(value), "not a Readiness whose paths collect asks and judges"),
        "server_fields": (_fields_usable(value), "not ServerFields whose reader reads an object"),
        "boot_log": (
            isinstance(value, BootLog) and all(_note(n) for n in (value.no_kv_line, value.no_request_lines)),
            "not a BootLog of (key, sentence) notes",
        ),
        "short_flags": (
            isinstance(value, Mapping)
            and all(k.startswith("-") and v.startswith("--") for k, v in value.items()),
            "not a mapping of short flags to long ones",
        ),
        "spec_namespace": (
            _namespace_usable(value, parts.flags),
            "not a SpecNamespace of flag affixes holding a long flag of the engine's table",
        ),
        "data_parallel_flags": (_flags(value), "no flags"),
        "context_flags": (_flags(value), "no flags"),
    }
    if part in checks:
        ok, why = checks[part]
        return None if ok else why
    return None if callable(value) else "neither callable nor Absent"


def _namespace_usable(value: object, flags: tuple[FlagGroup, ...]) -> bool:
    """Affixes of flags (prefixes open with `--`), holding at least one of the table's long flags."""
    if not isinstance(value, SpecNamespace) or not value.prefixes:
        return False
    affixes = (*value.prefixes, *value.infixes, *value.suffixes)
    if not all(isinstance(a, str) and a.startswith("-") for a in affixes):
        return False
    if not all(p.startswith("--") and len(p) > 2 for p in value.prefixes):
        return False
    return any(value.holds(f) for g in flags for f in g.text.split() if f.startswith("--"))


def _flags(value: object) -> bool:
    return isinstance(value, tuple) and bool(value) and all(str(f).startswith("-") for f in value)


def _counters_named(counters: SpecCounters, names: MetricNames | Absent) -> bool:
    """The counters alerts read are the families metric_names gives those roles, each as its _total."""
    if not isinstance(names, MetricNames):
        return False
    pairs = [
        (counters.drafts, names.drafts),
        (counters.draft_tokens, names.draft_tokens),
        (counters.accepted, names.accepted_tokens),
        (counters.generated, names.generation_tokens),
    ]
    return all(family is not None and full == f"{family}_total" for full, family in pairs)


def _readiness_usable(value: object) -> bool:
    """Paths collect's probe asks for, exactly, and a judge that gives a Ready from their bodies."""
    if not isinstance(value, Readiness) or not value.paths or not callable(value.judge):
        return False
    if not all(p.startswith("/") for p in value.paths):
        return False
    asked = asyncio.run(_probe(value.paths))
    try:
        ready = value.judge(dict.fromkeys(value.paths), speculates=False, concurrency=1)
    except TypeError:
        return False
    return asked == list(value.paths) and isinstance(ready, Ready)


async def _probe(paths: tuple[str, ...]) -> list[str]:
    """The paths collect's readiness probe requests (collect/boot.py read_endpoints)."""
    from mtpverdict.collect.boot import read_endpoints

    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(404)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        bodies = await read_endpoints(client, "http://engine", {}, paths)
    return asked if list(bodies) == asked else []


def _fields(value: object) -> ServerFields | None:
    if not isinstance(value, ServerFields) or not value.response_key or not callable(value.read):
        return None
    named = isinstance(value.fields, tuple) and all(isinstance(f, str) and f for f in value.fields)
    return value if named else None


class _Recording(dict[str, object]):
    """An empty response object that keeps the keys a reader asks it for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:
        self.asked.add(key)
        return default

    def __getitem__(self, key: str) -> object:
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return False


def _fields_usable(value: object) -> bool:
    """A response key, a reader that reads an empty object of it (nothing said, nothing wrong), and
    `fields` naming every field it asks for (the engine-word count counts them outside engines/)."""
    fields = _fields(value)
    if fields is None or not fields.fields:
        return False
    seen = Seen(max_tokens=1, prompt_bytes=0, content_events=0, elapsed_ms=1.0)
    recording = _Recording()
    try:
        found = fields.read(recording, seen, 1)
    except (TypeError, KeyError):
        return False
    return isinstance(found, ServedFields) and recording.asked <= set(fields.fields)


def _reads_spec_len(obj: dict[str, Any], seen: Seen, completion_tokens: int) -> ServedFields:
    """A reader asking for a field (`spec_len`) its ServerFields may not name."""
    obj.get("spec_len")
    return ServedFields()


def _note(note: object) -> bool:
    return isinstance(note, tuple) and len(note) == 2 and all(isinstance(t, str) and t.strip() for t in note)


def _has(value: object, *methods: str) -> bool:
    return all(callable(getattr(value, m, None)) for m in methods)


def surface_rows(doc: str) -> dict[str, list[str]]:
    """docs/engine-formats.md's surfaces table: engine title -> its rows' "checked against" cells."""
    if SURFACES not in doc:
        return {}
    section = doc[doc.index(SURFACES) :].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and cells[0] not in ("engine", "---"):
            rows.setdefault(cells[0], []).append(cells[3])
    return rows


def doc_problems(parts: EngineParts, rows: Mapping[str, list[str]]) -> list[str]:
    if parts.title not in rows:
        return [f"no row for {parts.title} in docs/engine-formats.md's surfaces table"]
    return []


def sample_problems(name: Engine, checked: list[str], data: Path) -> list[str]:
    """Hand-checked cases in tests/data/engine/<name>/ (text and expected parse), and real output in
    tests/data/recorded/<name>-<version>-*/ for an engine the docs call recorded."""
    out = []
    cases = data / "engine" / name
    texts = sorted(cases.glob("*.txt")) if cases.is_dir() else []
    if not texts:
        out.append(f"no cases in tests/data/engine/{name}/")
    out += [
        f"tests/data/engine/{name}/{t.name} has no {t.stem}.expected.json"
        for t in texts
        if not (cases / f"{t.stem}.expected.json").is_file()
    ]
    if any(c.startswith("recorded") for c in checked) and not any((data / "recorded").glob(f"{name}-*")):
        out.append(f"the docs say recorded, but tests/data/recorded/ has no {name}-<version>-* directory")
    return out


def metric_sample_problems(parts: EngineParts, data: Path) -> list[str]:
    """Each family its metric_names part gives is in one of its samples (tests/data/engine/<name>/ and
    tests/data/recorded/<name>-*/), and the reader reads every sample holding its prefix as the engine."""
    names = parts.metric_names
    cases = data / "engine" / parts.name
    if not isinstance(names, MetricNames) or not cases.is_dir():
        return []  # no names to look for, or no cases at all (said once above)
    texts = [*sorted(cases.glob("*.txt")), *sorted((data / "recorded").glob(f"{parts.name}-*/*.txt"))]
    samples = {t: t.read_text() for t in texts}
    samples = {t: s for t, s in samples.items() if re.search(rf"^{re.escape(parts.metric_prefix)}", s, re.M)}
    out = [
        f"{t.relative_to(data)}: read as {engine}, not by its prefix {parts.metric_prefix!r}"
        for t, text in samples.items()
        if (engine := parse_text(text).engine) is not parts.name
    ]
    exported = set().union(*(re.findall(r"^([A-Za-z_:][\w:]*)", s, re.M) for s in samples.values()))
    out += [
        f"metric_names: {n!r} is in none of its /metrics samples"
        for n in names.roles()
        if not {n, f"{n}_total"} & exported
    ]
    return out


# ---------------------------------------------------------------------------------------------------
# the registry as it is


def test_every_engine_is_whole() -> None:
    assert registry_problems(registry.ENGINES, DOC.read_text(), DATA) == []


def test_the_registry_holds_every_engine_in_order() -> None:
    assert tuple(registry.ENGINES) == ENGINES == tuple(Engine)
    titles = [registry.title(e) for e in Engine]
    assert len(set(titles)) == len(titles) and all(code_problems(e, registry.get(e)) == [] for e in Engine)


def test_parts_lists_every_field_but_the_names() -> None:
    fields = [f.name for f in dataclasses.fields(EngineParts)]
    assert list(PARTS) == fields[2:] and fields[:2] == ["name", "title"]


# ---------------------------------------------------------------------------------------------------
# the check catches a half-added engine


NOT_CALLABLE: Any = "judge"
WRONG_SHAPE: Any = dict  # called as a judge or a reader: a TypeError


def _with(engine: Engine, **changes: object) -> dict[Engine, EngineParts]:
    engines = dict(registry.ENGINES)
    engines[engine] = dataclasses.replace(engines[engine], **changes)  # type: ignore[arg-type]
    return engines


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"readiness": None}, "sglang: readiness: not a Readiness whose paths collect asks and judges"),
        (
            {"readiness": Readiness(("/props",), NOT_CALLABLE, "why")},
            "sglang: readiness: not a Readiness whose",
        ),
        (
            {"readiness": Readiness(("props",), WRONG_SHAPE, "why")},
            "sglang: readiness: not a Readiness whose",
        ),
        (
            {"readiness": Readiness(("/props",), WRONG_SHAPE, "why")},
            "sglang: readiness: not a Readiness whose",
        ),
        (
            {"server_fields": ServerFields("meta_info", WRONG_SHAPE)},
            "sglang: server_fields: not ServerFields whose",
        ),
        ({"server_fields": ServerFields("", lambda o, s, n: ServedFields())}, "sglang: server_fields: not"),
        ({"boot_log": BootLog(("kv", ""), ("lines", "x"))}, "sglang: boot_log: not a BootLog"),
        ({"compile_schedule": Absent(" ")}, "sglang: compile_schedule: declared absent without a reason"),
        ({"depth_in_force": 0}, "sglang: depth_in_force: neither callable nor Absent"),
        ({"flags": ()}, "sglang: flags: not a non-empty tuple of FlagGroup lines"),
        ({"spec_namespace": SpecNamespace(("--toy-",))}, "sglang: spec_namespace: not a SpecNamespace"),
        ({"spec_namespace": SpecNamespace(())}, "sglang: spec_namespace: not a SpecNamespace"),
        ({"spec_namespace": SpecNamespace(("spec",))}, "sglang: spec_namespace: not a SpecNamespace"),
        ({"spec_namespace": None}, "sglang: spec_namespace: not a SpecNamespace"),
        (  # as wide as to hold vLLM's --max-model-len
            {"spec_namespace": SpecNamespace(("--speculative", "--max"))},
            "sglang: spec_namespace: holds vllm's --max-model-len, not a speculative flag",
        ),
        (
            {"server_fields": ServerFields("meta_info", lambda o, s, n: ServedFields(), fields=("",))},
            "sglang: server_fields: not ServerFields whose",
        ),
        (  # no fields named, and a reader asking for one its fields do not name
            {"server_fields": ServerFields("meta_info", lambda o, s, n: ServedFields())},
            "sglang: server_fields: not ServerFields whose",
        ),
        (
            {"server_fields": ServerFields("meta_info", _reads_spec_len, fields=("bogus",))},
            "sglang: server_fields: not ServerFields whose",
        ),
        ({"programs": Programs()}, "sglang: programs: not Programs naming an executable or a module"),
        ({"metric_prefix": "sgl:"}, "sglang: metric_prefix: 'sglang:spec_accept_length' does not start"),
        ({"metric_prefix": "vllm:"}, "sglang: metric_prefix: 'vllm:' and vllm's 'vllm:' overlap"),
        ({"metric_prefix": "sglang"}, "sglang: metric_prefix: not a name followed by ':'"),
        ({"metric_names": MetricNames()}, "sglang: metric_names: not MetricNames naming a family"),
        (
            {"metric_names": MetricNames(accept_length="sglang:spec_accept_len")},
            "sglang: metric_names: 'sglang:spec_accept_len' is in none of its /metrics samples",
        ),
        ({"title": "SGL"}, "sglang: title 'SGL' does not spell the engine's name"),
        ({"title": "SGLang 2"}, "sglang: no row for SGLang 2 in docs/engine-formats.md"),
    ],
)
def test_a_half_added_engine_fails(changes: dict[str, object], expected: str) -> None:
    problems = registry_problems(_with(Engine.SGLANG, **changes), DOC.read_text(), DATA)
    assert any(p.startswith(expected) for p in problems), problems


def test_a_flag_two_engines_spell_fails() -> None:
    # an alias the toy engine of a review gave its threads flag was llama.cpp's spelling too
    mine = registry.ENGINES[Engine.SGLANG].flags
    engines = _with(Engine.SGLANG, flags=(*mine, FlagGroup("--sgl-draft-threads -td")))
    problems = registry_problems(engines, DOC.read_text(), DATA)
    assert [p for p in problems if ": flags: " in p] == [
        "sglang: flags: '-td' (--sgl-draft-threads) is llamacpp's --spec-draft-threads too",
        "llamacpp: flags: '-td' (--spec-draft-threads) is sglang's --sgl-draft-threads too",
    ]


def test_a_flag_listed_twice_in_one_table_fails() -> None:
    mine = registry.ENGINES[Engine.SGLANG].flags
    engines = _with(Engine.SGLANG, flags=(*mine, FlagGroup("--sgl-x --sgl-y --sgl-x")))
    problems = registry_problems(engines, DOC.read_text(), DATA)
    assert [p for p in problems if ": flags: " in p] == [
        "sglang: flags: '--sgl-x' is listed twice in its table"
    ]


def test_an_engine_missing_from_the_registry_fails() -> None:
    engines: dict[Engine, EngineParts] = {e: p for e, p in registry.ENGINES.items() if e is not Engine.SGLANG}
    assert registry_problems(engines, DOC.read_text(), DATA) == ["sglang: not in the registry"]


def test_an_engine_without_samples_fails(tmp_path: Path) -> None:
    (tmp_path / "engine" / "vllm").mkdir(parents=True)
    (tmp_path / "engine" / "vllm" / "case.txt").write_text("text\n")
    only: dict[Engine, EngineParts] = {Engine.VLLM: registry.ENGINES[Engine.VLLM]}
    problems = registry_problems(only, DOC.read_text(), tmp_path)
    assert "vllm: tests/data/engine/vllm/case.txt has no case.expected.json" in problems
    assert any(p.startswith("vllm: the docs say recorded, but tests/data/recorded/") for p in problems)
    assert any(p == "llamacpp: not in the registry" for p in problems)


def test_another_modules_engine_fails() -> None:
    problems = registry_problems(_with(Engine.VLLM, name=Engine.LLAMACPP), DOC.read_text(), DATA)
    assert any(p.startswith("vllm: registered as") for p in problems), problems
    assert any(p.startswith("vllm: not the ENGINE of its own module") for p in problems), problems


def test_the_surfaces_table_is_read() -> None:
    rows = surface_rows(DOC.read_text())
    assert set(rows) == {registry.title(e) for e in Engine}
    assert any(re.match(r"recorded", c) for c in rows["vLLM"])
    assert surface_rows("# no table\n") == {}


def test_alerts_cover_every_engine_with_counters() -> None:
    from mtpverdict.live.alerts import COUNTERS

    with_counters = [e for e, parts in registry.ENGINES.items() if registry.has(e, "metric_counters")]
    assert list(COUNTERS) == with_counters
    for engine, counters in COUNTERS.items():
        prefix = registry.get(engine).metric_prefix
        assert all(name.startswith(prefix) for name in dataclasses.astuple(counters))


# ---------------------------------------------------------------------------------------------------
# the readers use the parts, not the names


def test_counters_alerts_read_must_be_the_named_families() -> None:
    parts = registry.ENGINES[Engine.VLLM]
    assert isinstance(parts.metric_counters, SpecCounters)
    wrong = dataclasses.replace(parts.metric_counters, drafts="vllm:spec_decode_num_drafts")  # no _total
    problems = registry_problems(_with(Engine.VLLM, metric_counters=wrong), DOC.read_text(), DATA)
    assert any(p.startswith("vllm: metric_counters: not SpecCounters of the families") for p in problems)


def test_a_sample_the_reader_reads_as_another_engine_fails(tmp_path: Path) -> None:
    cases = tmp_path / "engine" / "sglang"
    cases.mkdir(parents=True)
    # SGLang's prefix on a sample, but more of vLLM's: the reader reads it as vLLM
    (cases / "mixed.txt").write_text("sglang:spec_accept_length 2.5\n" + "vllm:prompt_tokens_total 1\n" * 3)
    problems = metric_sample_problems(registry.ENGINES[Engine.SGLANG], tmp_path)
    assert "engine/sglang/mixed.txt: read as vllm, not by its prefix 'sglang:'" in problems
    assert "metric_names: 'sglang:spec_accept_rate' is in none of its /metrics samples" in problems


def _renamed(parts: EngineParts, prefix: str) -> EngineParts:
    """An engine's parts with its /metrics prefix and every family it names moved to `prefix`."""
    names = parts.metric_names
    assert isinstance(names, MetricNames)

    def move(name: str | None) -> str | None:
        return None if name is None else prefix + name.removeprefix(parts.metric_prefix)

    moved: dict[str, Any] = {
        role: move(getattr(names, role)) for role in names.__dataclass_fields__ if role != "kv_config"
    }
    return dataclasses.replace(parts, metric_prefix=prefix, metric_names=dataclasses.replace(names, **moved))


GAUGES = "{p}spec_accept_length 2.5\n{p}spec_accept_rate 0.4\n{p}generation_tokens_total 9\n"


def test_parse_metrics_reads_the_names_the_parts_give(monkeypatch: pytest.MonkeyPatch) -> None:
    renamed = _renamed(registry.ENGINES[Engine.SGLANG], "sgl:")
    monkeypatch.setitem(registry.ENGINES, Engine.SGLANG, renamed)
    snapshot = parse_metrics(GAUGES.format(p="sgl:"))
    assert snapshot.engine is Engine.SGLANG and snapshot.generation_tokens == 9
    assert [(g.mean_acceptance_length, g.acceptance_rate) for g in snapshot.gauges] == [(2.5, 0.4)]
    assert parse_metrics(GAUGES.format(p="sglang:")).engine is None
    assert part_problems(renamed) == [] and prefix_problems(renamed, registry.ENGINES) == []


def test_every_engine_reads_its_own_names_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # vLLM's counter spelled with llama.cpp's prefix: llama.cpp's part names no such family
    text = "vllm:spec_decode_num_drafts_total 3\nllamacpp:generation_tokens_total 5\n"
    snapshot = parse_metrics(text)
    assert snapshot.drafts == 3 and snapshot.generation_tokens is None


def test_the_reader_reads_the_response_json_part(monkeypatch: pytest.MonkeyPatch) -> None:
    from mtpverdict.parse import parse_text

    document = '{"id": 1,\n "timings": {"draft_n": 4, "draft_n_accepted": 3}}'
    assert parse_text(document).engine is Engine.LLAMACPP
    parts = registry.ENGINES[Engine.LLAMACPP]
    hidden = dataclasses.replace(parts, response_json=Absent("no JSON surface"))
    monkeypatch.setitem(registry.ENGINES, Engine.LLAMACPP, hidden)
    result = parse_text(document)
    assert result.engine is None and result.acceptance == ()
    assert "llama.cpp timings.draft_n" not in result.warnings[0]
