"""Importer of AIPerf exports: per-request ``profile_export.jsonl``, summary ``profile_export_aiperf.json``.

What AIPerf writes (checked on aiperf 0.13.0, summary ``schema_version`` 1.4; FIELD.md §8): one JSON object
per request in ``profile_export.jsonl``, ``{"metadata", "metrics", "error"}`` (``error`` absent on a
success), ``metadata.request_start_ns`` (wall clock at send, ns), ``metadata.benchmark_phase``
(``warmup`` or ``profiling``), each metric ``{"value", "unit"}``: ``time_to_first_token`` and
``request_latency`` (ms from send), ``output_sequence_length`` and ``input_sequence_length`` (tokens,
the server's usage with ``--use-server-token-count``). The summary holds each metric's avg/min/max/
p1...p99/std (and count, sum) and ``input_config.phases`` with each phase's ``type`` and
``concurrency``.

A request becomes a request record: t_start = request_start_ns, t_first = t_start + TTFT, t_end =
t_start + request latency; warm-up requests become warm-up records. The concurrency comes from the
summary's profiling phase (or ``concurrency`` when only the per-request file is given). A summary alone
becomes summary records from its medians: decode tok/s = 1000 / median inter-token latency, TTFT the
median TTFT, aggregate tok/s the output token throughput. AIPerf records no spec-decode counters and no
output text, so no acceptance and no output hashes are imported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mtpverdict.errors import EngineTextError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats.results import Record, SummaryRecord
from mtpverdict.importers.interface import Entry, Imported, RawFile
from mtpverdict.importers.requests import Cell, Problems, Timed, number, records, sha16, whole
from mtpverdict.importers.write import Held, TypedImporter, arm_orders, boot_records, imported_campaign

RECORDS_FILE = "profile_export.jsonl"
SUMMARY_FILE = "profile_export_aiperf.json"
SUMMARY_SUFFIX = "_aiperf.json"
MAX_EXPORT_BYTES = 256 << 20
NS_PER_SECOND = 1e9
MS_PER_SECOND = 1000.0
DEFAULT_WORKLOAD = "aiperf"
NOTE_PREFIX = "aiperf"
RAW_SUBDIR = "aiperf"
PHASE_WARMUP = "warmup"
PHASE_PROFILING = "profiling"


def _files(path: Path) -> tuple[Path | None, Path | None]:
    """(per-request file, summary file) an entry names: a directory, the JSONL or the summary."""
    if path.is_dir():
        jsonl, summary = path / RECORDS_FILE, path / SUMMARY_FILE
        return (jsonl if jsonl.exists() else None, summary if summary.exists() else None)
    if path.suffix == ".jsonl":
        sibling = path.with_name(path.stem + SUMMARY_SUFFIX)
        return path, sibling if sibling.exists() else None
    return None, path


def _read(path: Path) -> bytes:
    return _check.read_document(path, limit=MAX_EXPORT_BYTES, what="an AIPerf export", error=EngineTextError)


def _summary(path: Path) -> tuple[dict[str, Any], bytes]:
    data = _read(path)
    source = str(path)
    try:
        obj = _check.loads_strict(_check.text_of(data, source, EngineTextError))
    except ValueError as exc:
        raise EngineTextError([Problem(source, f"not valid JSON ({str(exc).split(':')[0]})")]) from None
    if not isinstance(obj, dict) or "aiperf_version" not in obj or "input_config" not in obj:
        raise EngineTextError(
            [Problem(source, "does not look like an AIPerf profile_export_aiperf.json (no aiperf_version)")]
        )
    config = obj["input_config"]
    if not isinstance(config, dict):
        raise EngineTextError([Problem(source, "must be an object", key="input_config")])
    models = config.get("models", {})
    if not isinstance(models, dict) or not isinstance(models.get("items", []), list):
        raise EngineTextError(
            [Problem(source, 'must be an object {"items": [{"name": ...}, ...]}', key="input_config.models")]
        )
    return obj, data


def _concurrency(summary: dict[str, Any] | None, given: int | None, source: str) -> int:
    """The profiling phase's concurrency, or the one given; refused when the two disagree."""
    if given is not None:
        if summary is not None:
            in_file = _fixed_concurrency(summary)
            if in_file is not None and in_file != given:
                raise EngineTextError(
                    [
                        Problem(
                            source,
                            f"the profiling phase ran at concurrency {in_file} but the concurrency given is "
                            f"{given}; leave it out or give the file's",
                            key="input_config.phases.concurrency",
                        )
                    ]
                )
        return given
    if summary is None:
        raise EngineTextError(
            [
                Problem(
                    source, f"no {SUMMARY_FILE} beside it to read the concurrency from; pass the concurrency"
                )
            ]
        )
    phases = summary["input_config"].get("phases") if isinstance(summary["input_config"], dict) else None
    profiling = [p for p in phases or () if isinstance(p, dict) and p.get("kind") == PHASE_PROFILING]
    if len(profiling) != 1 or profiling[0].get("type") != "concurrency":
        raise EngineTextError(
            [
                Problem(
                    source,
                    "the profiling phase is not one fixed-concurrency phase (request-rate or several "
                    "phases); pass the concurrency the requests ran at",
                    key="input_config.phases",
                )
            ]
        )
    value = whole(profiling[0].get("concurrency"))
    if value is None or value < 1:
        raise EngineTextError(
            [Problem(source, "must be a whole number of 1 or more", key="input_config.phases.concurrency")]
        )
    return value


def _fixed_concurrency(summary: dict[str, Any]) -> int | None:
    """The concurrency of the summary's one fixed-concurrency profiling phase (None: there is none)."""
    phases = summary["input_config"].get("phases") if isinstance(summary["input_config"], dict) else None
    profiling = [p for p in phases or () if isinstance(p, dict) and p.get("kind") == PHASE_PROFILING]
    if len(profiling) != 1 or profiling[0].get("type") != "concurrency":
        return None
    value = whole(profiling[0].get("concurrency"))
    return value if value is not None and value >= 1 else None


def _metric(metrics: dict[str, Any], key: str, problems: Problems, line: int) -> float | None:
    item = metrics.get(key)
    if item is None:
        return None
    value = number(item.get("value")) if isinstance(item, dict) else None
    if value is None:
        problems.add(
            f"must be {{value, unit}} with a finite value of at least 0, not {item!r}", f"metrics.{key}", line
        )
    elif key in ("time_to_first_token", "request_latency") and item.get("unit") != "ms":
        problems.add(f"unit is {item.get('unit')!r}; this importer reads ms", f"metrics.{key}", line)
        return None
    return value


def _timed(text: str, source: str) -> list[Timed]:
    """Every request of a profile_export.jsonl; EngineTextError listing every line it cannot map."""
    problems = Problems(source)
    out: list[Timed] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)  # not loads_strict: AIPerf's ns timestamps exceed 2**53
        except (ValueError, RecursionError) as exc:
            problems.add(f"not valid JSON ({str(exc).split(':')[0]})", line=line)
            continue
        item = _request(obj, line, problems)
        if item is not None:
            out.append(item)
    untimed = [t.index for t in out if t.error is None and (t.t_first is None or t.t_end is None)]
    if untimed:  # one problem for the file: every record of a non-streamed profile lacks them
        problems.add(
            f"{len(untimed)} request(s) without an error have no time_to_first_token or request_latency "
            "(the profile was not streamed: run aiperf with --streaming, since TTFT and decode rate need "
            "the first token's time)",
            "metrics.time_to_first_token",
            untimed[0],
        )
    if not out and not problems.items:
        problems.add("holds no request; expected one JSON object per request (aiperf profile_export.jsonl)")
    problems.raise_if_any()
    return out


def _request(obj: Any, line: int, problems: Problems) -> Timed | None:
    if (
        not isinstance(obj, dict)
        or not isinstance(obj.get("metadata"), dict)
        or not isinstance(obj.get("metrics"), dict)
    ):
        problems.add("expected an AIPerf record {metadata, metrics, error}", line=line)
        return None
    meta, metrics = obj["metadata"], obj["metrics"]
    start_ns = number(meta.get("request_start_ns"))
    if start_ns is None:
        problems.add("missing or not a time in ns", "metadata.request_start_ns", line)
    phase = meta.get("benchmark_phase")
    if phase not in (PHASE_WARMUP, PHASE_PROFILING):
        problems.add(f"is {phase!r}, not warmup or profiling", "metadata.benchmark_phase", line)
    ttft = _metric(metrics, "time_to_first_token", problems, line)
    latency = _metric(metrics, "request_latency", problems, line)
    output = _metric(metrics, "output_sequence_length", problems, line)
    prompt = _metric(metrics, "input_sequence_length", problems, line)
    if start_ns is None or phase not in (PHASE_WARMUP, PHASE_PROFILING):
        return None
    error = obj.get("error")
    message = None
    if error is not None:
        message = str(error.get("message") or error.get("type")) if isinstance(error, dict) else str(error)
    t_start = start_ns / NS_PER_SECOND
    return Timed(
        index=line,
        warmup=phase == PHASE_WARMUP,
        t_start=t_start,
        t_first=None if ttft is None else t_start + ttft / MS_PER_SECOND,
        t_end=None if latency is None else t_start + latency / MS_PER_SECOND,
        prompt_tokens=None if prompt is None else int(prompt),
        completion_tokens=None if output is None else int(output),
        error=message,
    )


def _median(summary: dict[str, Any], key: str) -> float | None:
    item = summary.get(key)
    value = number(item.get("p50")) if isinstance(item, dict) else None
    return value if value else None


def _summaries(
    summary: dict[str, Any], cell: Cell, marker: str, source: str, warnings: list[str]
) -> list[Record]:
    count = summary.get("completed_request_count")
    n = whole(count.get("avg")) if isinstance(count, dict) else None
    if not n:
        raise EngineTextError(
            [Problem(source, "no completed request to summarise", key="completed_request_count")]
        )
    itl = _median(summary, "inter_token_latency")
    throughput = summary.get("output_token_throughput")
    aggregate = number(throughput.get("avg")) if isinstance(throughput, dict) else None
    values = (
        ("decode_tps", None if itl is None else MS_PER_SECOND / itl, n, "inter_token_latency"),
        ("ttft_ms", _median(summary, "time_to_first_token"), n, "time_to_first_token"),
        ("aggregate_tps", aggregate or None, 1, "output_token_throughput"),
    )
    out: list[Record] = []
    for metric, value, runs, key in values:
        if value is None or not math.isfinite(value):
            warnings.append(f"{source}: {key} absent or not positive; no {metric} summary")
            continue
        out.append(
            SummaryRecord(
                arm=cell.arm,
                boot=cell.boot,
                workload=cell.workload,
                concurrency=cell.concurrency,
                metric=metric,  # type: ignore[arg-type]
                n=runs,
                median=value,
                min=None,
                max=None,
                note=marker,
            )
        )
    return out


class AIPerf(TypedImporter):
    """AIPerf artifact directories, profile_export.jsonl or profile_export_aiperf.json files."""

    name = "aiperf"
    tool = "aiperf profile exports (profile_export.jsonl, profile_export_aiperf.json)"

    def read(self, entries: Sequence[Entry], held: Held) -> Imported:
        orders, firsts = arm_orders([e.spec for e in entries], held.next_order)
        all_records: list[Record] = []
        raw: list[RawFile] = []
        warnings: list[str] = []
        markers: list[str] = []
        model = None
        for entry in entries:
            jsonl, summary_path = _files(entry.file)
            summary, summary_data = _summary(summary_path) if summary_path is not None else (None, b"")
            if summary is not None and model is None:
                models = summary["input_config"].get("models", {}).get("items", [{}])
                model = models[0].get("name") if models and isinstance(models[0], dict) else None
            source = str(jsonl or summary_path or entry.file)
            concurrency = _concurrency(summary, entry.spec.concurrency, source)
            data = _read(jsonl) if jsonl is not None else summary_data
            marker = f"{NOTE_PREFIX} {sha16(data)}"
            markers.append(marker)
            cell = Cell(entry.spec.arm, entry.spec.boot, entry.spec.workload or DEFAULT_WORKLOAD, concurrency)
            if jsonl is not None:
                all_records.extend(
                    records(_timed(_check.text_of(data, source, EngineTextError), source), cell, marker)
                )
                raw.append(RawFile(f"{RAW_SUBDIR}/{sha16(data)}.jsonl", data.decode("utf-8")))
            elif summary is not None:
                warnings.append(
                    f"{source}: a summary only: per-request times are unknown, so summary records "
                    "were written"
                )
                all_records.extend(_summaries(summary, cell, marker, source, warnings))
                raw.append(RawFile(f"{RAW_SUBDIR}/{sha16(data)}.json", data.decode("utf-8")))
        all_records.extend(boot_records(entries, orders, markers))
        campaign = imported_campaign(
            held,
            entries,
            firsts,
            default_workload=DEFAULT_WORKLOAD,
            title="Runs imported from AIPerf profile exports",
            source="aiperf profile_export",
            model=model,
            description="requests sent by aiperf profile (imported)",
        )
        return Imported(campaign, tuple(all_records), tuple(raw), tuple(warnings), tuple(markers))


IMPORTER = AIPerf()
