"""Importer of GuideLLM ``benchmarks.json`` / ``benchmarks.yaml`` (the 0.7+ generation, checked on 0.8.1).

The file's generations (FIELD.md §8): v0.2/0.3 held ``benchmarks`` only; 0.5/0.6 ``metadata``, ``args``,
``benchmarks``; 0.7 on ``metadata`` (``version`` 2 in 0.8.1), ``config``, ``benchmarks``. This importer
reads the 0.7+ generation and refuses the older two by name (their per-request fields differ and were
not checked here): re-export them with a current ``guidellm export``.

Each benchmark is one strategy run; ``config.strategy`` says its kind: ``synchronous`` (concurrency 1)
and ``concurrent`` (``streams`` in flight) map to a concurrency cell; a rate-based strategy (constant,
poisson, throughput, sweep steps) has no fixed concurrency and is refused unless a concurrency is given.
Per request (``requests.successful`` and ``requests.errored``): ``info.timings.request_start`` (wall
clock, s), ``first_token_iteration`` and ``last_token_iteration`` (first and last token received),
``token_iterations`` (content chunks), ``prompt_tokens``, ``output_tokens`` and ``output`` (the text:
its hash goes to the identity rule). ``requests.incomplete`` (cut off by a constraint) is counted in a
warning and left out. GuideLLM records no spec-decode counters, so no acceptance is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mtpverdict.errors import EngineTextError
from mtpverdict.formats import _check
from mtpverdict.formats.results import Record
from mtpverdict.importers.interface import Entry, Imported, RawFile
from mtpverdict.importers.requests import Cell, Problems, Timed, number, records, sha16, whole
from mtpverdict.importers.write import Held, TypedImporter, arm_orders, boot_records, imported_campaign
from mtpverdict.serveconfig import load_yaml

MAX_BENCHMARKS_BYTES = 256 << 20
DEFAULT_WORKLOAD = "guidellm"
NOTE_PREFIX = "guidellm"
RAW_SUBDIR = "guidellm"
FIXED = {"synchronous", "concurrent"}
YAML_SUFFIXES = (".yaml", ".yml")


def _document(path: Path) -> tuple[dict[str, Any], bytes]:
    source = str(path)
    data = _check.read_document(
        path, limit=MAX_BENCHMARKS_BYTES, what="a GuideLLM benchmarks file", error=EngineTextError
    )
    text = _check.text_of(data, source, EngineTextError)
    problems = Problems(source)
    try:
        # YAML through the serve-config loader: anchors and aliases (an alias bomb) refused before parsing
        obj = load_yaml(text, source) if path.suffix in YAML_SUFFIXES else _json(text)
    except ValueError as exc:
        problems.add(
            f"not valid {'YAML' if path.suffix in YAML_SUFFIXES else 'JSON'} ({str(exc).splitlines()[0]})"
        )
        problems.raise_if_any()
    if not isinstance(obj, dict) or not isinstance(obj.get("benchmarks"), list):
        problems.add("does not look like a GuideLLM benchmarks file (no benchmarks list)", key="benchmarks")
    elif "config" not in obj:
        older = "0.5/0.6 (metadata, args)" if "args" in obj else "0.2/0.3 (benchmarks only)"
        problems.add(
            f"a GuideLLM {older} benchmarks file: this importer reads the 0.7+ generation "
            "(metadata, config, benchmarks); re-export it with a current guidellm",
            key="config",
        )
    problems.raise_if_any()
    return obj, data


def _json(text: str) -> Any:
    """One JSON document; GuideLLM writes NaN for a statistic of too few samples."""
    obj, end = _check.raw_decode_strict(text, 0, allow_nan=True)
    if text[end:].strip():
        raise ValueError("extra data after the document")
    return obj


def _concurrency(bench: dict[str, Any], given: int | None, where: str, problems: Problems) -> int | None:
    strategy = bench.get("config", {}).get("strategy") if isinstance(bench.get("config"), dict) else None
    kind = strategy.get("type_") if isinstance(strategy, dict) else None
    if given is not None:
        in_file = 1 if kind == "synchronous" else None
        if kind == "concurrent" and isinstance(strategy, dict):
            in_file = whole(strategy.get("streams"))
        if in_file is not None and in_file != given:
            problems.add(
                f"strategy {kind!r} ran at concurrency {in_file} but the concurrency given is {given}; "
                "leave it out or give the file's",
                f"{where}.config.strategy",
            )
            return None
        return given
    if kind == "synchronous":
        return 1
    if kind == "concurrent":
        streams = whole(strategy.get("streams")) if isinstance(strategy, dict) else None
        if not streams:
            problems.add("must be a whole number of 1 or more", f"{where}.config.strategy.streams")
        return streams or None
    problems.add(
        f"strategy {kind!r} has no fixed concurrency (only synchronous and concurrent map to a cell); "
        "pass the concurrency the requests ran at",
        f"{where}.config.strategy.type_",
    )
    return None


def _timed(item: Any, index: int, where: str, problems: Problems, errored: bool) -> Timed | None:
    timings = (
        item.get("info", {}).get("timings")
        if isinstance(item, dict) and isinstance(item.get("info"), dict)
        else None
    )
    if not isinstance(timings, dict):
        problems.add("missing; expected a request with info.timings", f"{where}.info.timings")
        return None
    start = number(timings.get("request_start"))
    if start is None:
        problems.add("missing or not a time in seconds", f"{where}.info.timings.request_start")
        return None
    first = number(timings.get("first_token_iteration"))
    last = number(timings.get("last_token_iteration"))
    error = None
    if errored:
        error = str(item["info"].get("error") or "the request failed (GuideLLM errored list)")
    elif first is None or last is None:
        error = "no token times (not streamed?)"
    chunks = whole(timings.get("token_iterations"))
    output = item.get("output")
    return Timed(
        index=index,
        warmup=False,
        t_start=start,
        t_first=first,
        t_end=last,
        prompt_tokens=whole(item.get("prompt_tokens")),
        completion_tokens=whole(item.get("output_tokens")),
        error=error,
        output=output if isinstance(output, str) else None,
        chunks=chunks if chunks else None,
    )


def _benchmark(bench: Any, b: int, problems: Problems, warnings: list[str], source: str) -> list[Timed]:
    where = f"benchmarks[{b}]"
    requests = bench.get("requests") if isinstance(bench, dict) else None
    if not isinstance(requests, dict):
        problems.add("missing; expected successful, errored and incomplete lists", f"{where}.requests")
        return []
    out: list[Timed] = []
    index = 0
    for group in ("successful", "errored"):
        items = requests.get(group) or []
        if not isinstance(items, list):
            problems.add("must be a list of requests", f"{where}.requests.{group}")
            continue
        for i, item in enumerate(items):
            found = _timed(item, index, f"{where}.requests.{group}[{i}]", problems, group == "errored")
            index += 1
            if found is not None:
                out.append(found)
    incomplete = requests.get("incomplete") or []
    if isinstance(incomplete, list) and incomplete:
        warnings.append(
            f"{source}: {where}: {len(incomplete)} incomplete request(s) (cut off by a constraint) left out"
        )
    return out


class GuideLLM(TypedImporter):
    """GuideLLM ``benchmarks.json`` / ``.yaml`` files, one arm boot each; each benchmark is a cell."""

    name = "guidellm"
    tool = "guidellm run --output json|yaml (benchmarks.json, benchmarks.yaml)"

    def read(self, entries: Sequence[Entry], held: Held) -> Imported:
        orders, firsts = arm_orders([e.spec for e in entries], held.next_order)
        found: list[Record] = []
        raw: list[RawFile] = []
        warnings: list[str] = []
        markers: list[str] = []
        model = None
        for entry in entries:
            source = str(entry.file)
            doc, data = _document(entry.file)
            marker = f"{NOTE_PREFIX} {sha16(data)}"
            markers.append(marker)
            problems = Problems(source)
            model = model or _model(doc)
            first_at: dict[int, int] = {}  # concurrency -> the benchmark of this file that ran at it
            for b, bench in enumerate(doc["benchmarks"]):
                timed = _benchmark(bench, b, problems, warnings, source)
                concurrency = _concurrency(bench, entry.spec.concurrency, f"benchmarks[{b}]", problems)
                if concurrency is None or not timed:
                    continue
                if concurrency in first_at:  # one cell of one boot cannot hold two benchmarks
                    problems.add(
                        f"maps to concurrency {concurrency} as benchmarks[{first_at[concurrency]}] does; "
                        "a boot holds one benchmark per concurrency: import the file's benchmarks as "
                        "separate boots",
                        f"benchmarks[{b}]",
                    )
                    continue
                first_at[concurrency] = b
                cell = Cell(
                    entry.spec.arm, entry.spec.boot, entry.spec.workload or DEFAULT_WORKLOAD, concurrency
                )
                found.extend(records(timed, cell, f"{marker} benchmark {b}"))
            if not doc["benchmarks"]:
                problems.add("is empty; the run wrote no benchmark", key="benchmarks")
            problems.raise_if_any()
            raw.append(RawFile(f"{RAW_SUBDIR}/{sha16(data)}{entry.file.suffix}", data.decode("utf-8")))
        found.extend(boot_records(entries, orders, markers))
        campaign = imported_campaign(
            held,
            entries,
            firsts,
            default_workload=DEFAULT_WORKLOAD,
            title="Runs imported from GuideLLM benchmarks files",
            source="guidellm benchmarks",
            model=model,
            description="requests sent by guidellm run (imported)",
        )
        return Imported(campaign, tuple(found), tuple(raw), tuple(warnings), tuple(markers))


def _model(doc: dict[str, Any]) -> str | None:
    spec = doc.get("config", {}).get("spec") if isinstance(doc.get("config"), dict) else None
    backend = spec.get("backend") if isinstance(spec, dict) else None
    model = backend.get("model") if isinstance(backend, dict) else None
    return model if isinstance(model, str) else None


IMPORTER = GuideLLM()
