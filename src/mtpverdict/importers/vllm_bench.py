"""Importer of `vllm bench serve --save-result` JSON into a results directory (results format v1).

What the bench writes (vllm/benchmarks/serve.py and lib/endpoint_request_func.py; see
docs/engine-formats.md):

- always: ``completed``, ``failed``, ``duration``, ``output_throughput`` (total output tokens / wall
  time of the run), ``median_ttft_ms``, ``median_tpot_ms`` (TPOT = (latency - TTFT) / (output - 1)
  per request), ``max_concurrency`` and, when the server exported them, the spec-decode fields
  ``spec_decode_num_drafts``, ``spec_decode_draft_tokens``, ``spec_decode_accepted_tokens``,
  ``spec_decode_acceptance_rate`` (percent), ``spec_decode_acceptance_length`` and
  ``spec_decode_per_position_acceptance_rates`` (fractions): differences of the server's /metrics
  counters read before and after the main run (warm-ups excluded), engine-wide.
- with ``--save-detailed``, per request: ``ttfts`` (s from send to the first chunk with choices),
  ``itls`` (s between consecutive chunks; one chunk may carry several tokens), ``output_lens``
  (``usage.completion_tokens``, else the client's token count; 0 for a failed request),
  ``input_lens``, ``generated_texts``, ``errors`` (empty for success) and, in newer releases,
  ``start_times`` (``time.perf_counter()`` at send, after waiting for the client's concurrency slot).
  Newer releases also write ``latencies`` (last chunk - send) and ``queue_times`` (time waiting for a
  slot before sending) even without ``--save-detailed``.

Request records are written only when per-request data AND ``start_times`` exist: t_start is the
bench's send time, t_first = t_start + TTFT, t_end = t_start + latency (``latencies``, else
TTFT + sum(ITL), which the bench's latency equals). Without start times no send time is invented:
the run becomes summary records, from the file's medians. The bench keeps c requests in flight
continuously and has no runs of c requests sent together; requests are grouped in send order into
runs of c (rep = i // c + first free rep of the cell, stream = i mod c), each keeping its true times.

Re-importing a file is a no-op: records carry a note naming the file's SHA-256 and run, and a run
whose records are present is completed (never duplicated) by the writer's key check.

Many files at once (``import_vllm_bench_entries``, a manifest naming each file's arm, boot and order):
the files are imported in boot order and each boot gets a boot record with its position in that order.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from mtpverdict._jsonio import atomic_write, canonical
from mtpverdict.engines.names import Engine
from mtpverdict.errors import EngineTextError, InputError, Problem, ResultsError
from mtpverdict.formats import _check
from mtpverdict.formats.results import Arm, Campaign, Method, Role, Spec, Workload, as_builtins
from mtpverdict.formats.results_io import ResultsWriter
from mtpverdict.importers.interface import COMMAND_LINE, Entry, Importer, ImportReport, Where, new_campaign
from mtpverdict.importers.write import arm_orders, boot_record, campaign_id, check_names, held_in

METHODS = tuple(m.value for m in Method)
ROLES = tuple(r.value for r in Role)

CAMPAIGN_FILE = "campaign.json"
RAW_SUBDIR = "vllm-bench"
DEFAULT_WORKLOAD = "vllm-bench"
NOTE_PREFIX = "vllm-bench"
HASH_CHARS = 16  # of the file's SHA-256 in notes and raw file names: unique enough, short to read
MAX_BENCH_BYTES = 256 << 20  # a detailed result of thousands of requests, generated texts included
MAX_ERROR_CHARS = 2000  # a request's error (often a traceback) is kept up to here
# one request's output tokens: beyond any context window served today (10M tokens), as collect bounds a
# server's usage.completion_tokens by the request's max_tokens
MAX_OUTPUT_TOKENS = 1 << 24
# the bench writes NaN only for a statistic of no value (np.mean of none): there, and nowhere else, NaN
# is read (as no value); Infinity never is
NAN_STATISTIC = re.compile(r"(?:mean|median|std|p[0-9]{1,3}(?:\.[0-9]{1,3})?)_[a-z0-9_]{1,64}")
MS_PER_SECOND = 1000.0
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
DETAILED_KEYS = ("ttfts", "itls", "output_lens", "input_lens", "errors")
REQUIRED_KEYS = ("completed",)
SPEC_COUNT_KEYS = ("spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens")
SPEC_KEYS = (
    *SPEC_COUNT_KEYS,
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_per_position_acceptance_rates",
)


@dataclass(frozen=True, slots=True)
class _Run:
    """One result object of a bench file (files written with --append-result hold several)."""

    path: str
    line: int
    sha16: str
    index: int
    data: dict[str, Any]
    text: str  # the whole file, kept under raw/ as evidence

    @property
    def marker(self) -> str:
        return f"{NOTE_PREFIX} {self.sha16} run {self.index}"

    def problem(self, message: str, key: str | None = None) -> EngineTextError:
        return EngineTextError([Problem(self.path, message, line=self.line, key=key)])


@dataclass(slots=True)
class _Tally:
    """Counts of records written and already present, and the warnings of one import."""

    written: dict[str, int] = field(default_factory=dict)
    present: int = 0
    warnings: list[str] = field(default_factory=list)

    def add(self, writer: ResultsWriter, record: dict[str, Any], run: _Run) -> None:
        try:
            fresh = writer.append(record)
        except ValueError as exc:
            raise run.problem(f"cannot be imported: {exc}") from None
        if fresh:
            self.written[record["kind"]] = self.written.get(record["kind"], 0) + 1
        else:
            self.present += 1


def import_vllm_bench(
    files: Sequence[str | os.PathLike[str]],
    *,
    arm: str,
    boot: int = 1,
    out: str | os.PathLike[str],
    role: str | None = None,
    method: str | None = None,
    k: int | None = None,
    workload: str = DEFAULT_WORKLOAD,
    concurrency: int | None = None,
    where: Where = COMMAND_LINE,
) -> ImportReport:
    """Import bench result files as one arm's boot; create or extend campaign.json as needed.

    ``role`` defaults to ``candidate`` when ``method`` or ``k`` is given, else ``control``. The arm
    and workload are added to campaign.json when missing; an existing arm must agree with the role,
    method and k given. ``concurrency`` is needed only when a file lacks ``max_concurrency``. A bad
    argument raises EngineTextError naming ``where`` it was given (the command line's options).
    """
    _check_arguments(arm, boot, workload, concurrency, where)
    runs = [run for path in files for run in _read_runs(Path(path))]
    root = Path(out)
    held = _held_campaign(root / CAMPAIGN_FILE)
    _check_runs(runs, None if held is None else held[0].scope.model, concurrency)
    campaign, campaign_obj = _campaign(root, runs, _NewArm(arm, role, method, k, where), workload)
    tally = _Tally()
    with ResultsWriter(root, campaign_obj, sync_each=False) as writer:  # a rerun imports again
        # Every record is built, and every clash found, before the first one is written.
        planned: list[tuple[_Run, dict[str, Any]]] = []
        for run in runs:
            known = [*writer.records, *(record for _, record in planned)]
            planned.extend(
                (run, record)
                for record in _plan_run(writer, known, run, arm, boot, workload, concurrency, k, tally)
            )
        for run, record in planned:
            tally.add(writer, record, run)
    if not any(a.is_control for a in campaign.arms):
        tally.warnings.append(
            "the campaign has no control arm yet; import an unspeculated run with --role control"
        )
    return ImportReport(
        out=str(root),
        written=tuple(sorted(tally.written.items())),
        already_present=tally.present,
        runs=len(runs),
        warnings=tuple(tally.warnings),
    )


def _check_runs(runs: Sequence[_Run], held_model: str | None, concurrency: int | None) -> None:
    """Refuse a run sent at a request rate (no fixed concurrency) unless the concurrency is given, and
    runs of another model than the campaign's or each other's: one campaign serves one model."""
    first = None if held_model is None else (held_model, CAMPAIGN_FILE)
    for run in runs:
        rate = run.data.get("request_rate", "inf")
        infinite = rate == "inf" or (isinstance(rate, float) and math.isinf(rate) and rate > 0)
        if not infinite and concurrency is None:
            raise run.problem(
                f"request_rate is {rate!r}: the requests were sent at a rate, so no concurrency was fixed "
                "(only --request-rate inf, the default, maps to a concurrency cell); pass the concurrency "
                "the requests ran at",
                key="request_rate",
            )
        model = run.data.get("model_id")
        if not isinstance(model, str):
            continue
        if first is None:
            first = (model, run.path)
        elif model != first[0]:
            raise run.problem(
                f"model_id is {model!r} but {first[1]} has {first[0]!r}; one campaign serves one model",
                key="model_id",
            )


def _check_arguments(arm: str, boot: int, workload: str, concurrency: int | None, where: Where) -> None:
    for label, name in (("arm", arm), ("workload", workload)):
        if not NAME_RE.match(name):
            raise where.error(
                f"{label} {name!r} must start with a letter or digit and hold only letters, digits and "
                "_.+- (at most 64 characters)",
                label,
            )
    if boot < 1:
        raise where.error(f"boot must be 1 or more; got {boot}", "boot")
    if concurrency is not None and concurrency < 1:
        raise where.error(f"concurrency must be 1 or more; got {concurrency}", "concurrency")


# ---------------------------------------------------------------------------------------------------
# bench files


def _read_runs(path: Path) -> Iterator[_Run]:
    source = str(path)
    data = _check.read_document(
        path, limit=MAX_BENCH_BYTES, what="a bench result file", error=EngineTextError
    )
    sha16 = hashlib.sha256(data).hexdigest()[:HASH_CHARS]
    text = _check.text_of(data, source, EngineTextError)
    position, index = 0, 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            break
        line = text.count("\n", 0, position) + 1
        try:
            obj, position = _check.raw_decode_strict(text, position, allow_nan=True)  # the bench writes NaN
        except _check.LimitError as exc:  # a duplicate key, deep nesting or a huge integer
            raise EngineTextError([Problem(source, str(exc), line=line)]) from None
        except ValueError as exc:
            where = getattr(exc, "lineno", line)
            raise EngineTextError(
                [Problem(source, f"not valid JSON ({str(exc).split(':')[0]})", line=where)]
            ) from None
        index += 1
        _refuse_nonfinite(obj, source, line)
        if not isinstance(obj, dict):
            raise EngineTextError(
                [Problem(source, "expected a JSON object written by `vllm bench serve --save-result`", line)]
            )
        missing = [key for key in REQUIRED_KEYS if key not in obj]
        if missing or not ("output_throughput" in obj or "ttfts" in obj):
            raise EngineTextError(
                [
                    Problem(
                        source,
                        "does not look like a `vllm bench serve --save-result` file (no 'completed' "
                        "or 'output_throughput')",
                        line,
                    )
                ]
            )
        yield _Run(path=source, line=line, sha16=sha16, index=index, data=obj, text=text)
    if index == 0:
        raise EngineTextError([Problem(source, "empty; expected a `vllm bench serve` result JSON")])


def _refuse_nonfinite(obj: Any, source: str, line: int) -> None:
    """NaN only as a top-level statistic's value (docs/security.md: no JSON read holds a non-finite)."""
    for key in _check.nonfinite_keys(obj):
        value = obj.get(key) if isinstance(obj, dict) else None
        if isinstance(value, float) and math.isnan(value) and NAN_STATISTIC.fullmatch(key):
            continue
        why = "must be a finite number (NaN is read only as a summary statistic of no value)"
        raise EngineTextError([Problem(source, why, line=line, key=key)])


# ---------------------------------------------------------------------------------------------------
# campaign.json


@dataclass(frozen=True, slots=True)
class _NewArm:
    """The arm the options describe, and where they were given."""

    name: str
    role: str | None
    method: str | None
    k: int | None
    where: Where


def _campaign(root: Path, runs: list[_Run], given: _NewArm, workload: str) -> tuple[Campaign, dict[str, Any]]:
    """The typed campaign the import writes into (created, or extended by the arm and the workload), and
    its JSON object: the file's own when nothing was added, so a directory is continued as it is."""
    path = root / CAMPAIGN_FILE
    held = _held_campaign(path)
    if held is None:
        model = next((r.data.get("model_id") for r in runs if isinstance(r.data.get("model_id"), str)), None)
        campaign = new_campaign(
            campaign_id(root, DEFAULT_WORKLOAD),
            "Runs imported from vllm bench serve result files",
            "vllm bench serve --save-result",
            Engine.VLLM,
            model,
            _workload(workload),
        )
        campaign = msgspec.structs.replace(campaign, workloads=())
    else:
        campaign = held[0]
    existing = next((a for a in campaign.arms if a.name == given.name), None)
    if existing is None:
        campaign = msgspec.structs.replace(campaign, arms=(*campaign.arms, _new_arm(campaign.arms, given)))
    else:
        _check_existing_arm(path, existing, given.role, given.method, given.k)
    if workload not in {w.id for w in campaign.workloads}:
        campaign = msgspec.structs.replace(campaign, workloads=(*campaign.workloads, _workload(workload)))
    if held is not None and campaign == held[0]:
        return campaign, held[1]
    obj = _campaign_object(campaign)
    atomic_write(path, canonical(obj))
    return campaign, obj


# keys msgspec writes at their defaults that this importer's campaign.json never held: left out, so
# a directory it wrote before is continued byte for byte and a new one reads as it always did
CAMPAIGN_DEFAULTS: tuple[tuple[str, object], ...] = (
    ("notes", None),
    ("synthetic", False),
    ("concurrency", None),
    ("sequential_looks", 1),
)
ARM_DEFAULTS: tuple[tuple[str, object], ...] = (("labels", {}), ("family", "default"))
SPEC_DEFAULTS: tuple[tuple[str, object], ...] = (("config", None),)


def _campaign_object(campaign: Campaign) -> dict[str, Any]:
    """campaign.json's object of the typed campaign, the keys at their defaults left out."""
    obj: dict[str, Any] = msgspec.to_builtins(campaign)
    tables = [(obj, CAMPAIGN_DEFAULTS)]
    tables += [(arm, ARM_DEFAULTS) for arm in obj["arms"]] + [
        (arm["spec"], SPEC_DEFAULTS) for arm in obj["arms"]
    ]
    for table, defaults in tables:
        for key, default in defaults:
            if key in table and table[key] == default:
                del table[key]
    return obj


def _held_campaign(path: Path) -> tuple[Campaign, dict[str, Any]] | None:
    """The campaign a directory holds, typed (a campaign without its control yet is fine: imports add
    arms one at a time), with the file's object; None when there is none."""
    if not path.exists():
        return None
    data = _check.read_document(path, what="campaign.json", error=ResultsError)
    try:
        obj = _check.loads_strict(_check.text_of(data, str(path), ResultsError))
    except ValueError as exc:
        raise ResultsError([Problem(str(path), f"cannot be read as JSON: {exc}")]) from None
    try:
        return _check.convert(obj, Campaign, str(path)), obj
    except InputError as exc:
        raise ResultsError(exc.problems) from None


def _workload(workload: str) -> Workload:
    return Workload(
        id=workload,
        prompt_tokens=None,
        max_tokens=None,
        expect_identical=False,
        description="requests sent by vllm bench serve (imported)",
    )


def _new_arm(arms: Sequence[Arm], given: _NewArm) -> Arm:
    method, k, where = given.method, given.k, given.where
    role = given.role
    if role is None:
        role = "candidate" if method is not None or k else "control"
    if role not in ROLES:
        raise where.error(f"must be one of {', '.join(ROLES)}; got {role!r}", "role")
    if role == "control":
        if method is not None or k:
            raise where.error(
                "a control arm runs with speculation off: drop the method and k (or use k 0)",
                "method" if method is not None else "k",
            )
        spec = Spec(method=None, k=0)
    else:
        if method not in METHODS:
            raise where.error(f"a candidate arm needs a method, one of {', '.join(METHODS)}", "method")
        if k is None or k < 1:
            raise where.error("a candidate arm needs k, the speculative tokens per step (1 or more)", "k")
        spec = Spec(method=Method(method), k=k)
    order = max((a.order for a in arms), default=0) + 1
    return Arm(name=given.name, role=Role(role), spec=spec, order=order, serve_argv=None)


def _check_existing_arm(
    path: Path, existing: Arm, role: str | None, method: str | None, k: int | None
) -> None:
    clashes = []
    if role is not None and existing.role != role:
        clashes.append(f"role {str(existing.role)!r}, not {role!r}")
    if method is not None and existing.spec.method != method:
        held = None if existing.spec.method is None else str(existing.spec.method)
        clashes.append(f"method {held!r}, not {method!r}")
    if k is not None and (existing.spec.k or 0) != k:
        clashes.append(f"k {existing.spec.k!r}, not {k}")
    if clashes:
        raise ResultsError(
            [
                Problem(
                    str(path),
                    f"arm {existing.name!r} already exists with {'; '.join(clashes)}; "
                    "drop the option or import under another --arm",
                    key="arms",
                )
            ]
        )


# ---------------------------------------------------------------------------------------------------
# records


def _plan_run(
    writer: ResultsWriter,
    known: list[dict[str, Any]],
    run: _Run,
    arm: str,
    boot: int,
    workload: str,
    concurrency: int | None,
    k: int | None,
    tally: _Tally,
) -> list[dict[str, Any]]:
    """The records of one run; ``known`` holds the records present or planned before it."""
    data = run.data
    cell_concurrency = _concurrency(run, concurrency, tally)
    raw = _store_raw(writer, run)
    common = {"arm": arm, "boot": boot, "workload": workload, "concurrency": cell_concurrency}
    records: list[dict[str, Any]]
    if all(key in data for key in DETAILED_KEYS) and "start_times" in data:
        records = list(_request_records(known, run, common))
    else:
        if all(key in data for key in DETAILED_KEYS):
            tally.warnings.append(
                f"{run.path}:{run.line}: per-request data without start_times (older vllm bench): "
                "send times are unknown, so summary records were written from the file's medians"
            )
        records = list(_summary_records(known, run, common, tally))
    acceptance = _acceptance_record(run, common, raw, k, tally)
    if acceptance is not None:
        records.append(acceptance)
    return records


def _concurrency(run: _Run, override: int | None, tally: _Tally) -> int:
    value = run.data.get("max_concurrency")
    in_file = value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None
    if override is not None:
        if in_file is not None and in_file != override:
            raise run.problem(
                f"max_concurrency is {in_file} in the file but the concurrency given is {override}; "
                "leave it out or give the file's",
                key="max_concurrency",
            )
        return override
    if in_file is None:
        raise run.problem(
            "max_concurrency is absent or null (the bench ran without --max-concurrency); pass "
            "--concurrency with the number of requests in flight",
            key="max_concurrency",
        )
    return in_file


def _store_raw(writer: ResultsWriter, run: _Run) -> str:
    """Keep the bench file under raw/ so acceptance records can point at it."""
    relative = f"{RAW_SUBDIR}/{run.sha16}.json"
    target = writer.raw_path(relative)
    if not target.exists():
        atomic_write(target, run.text)
    return f"raw/{relative}"


def _request_records(
    known: list[dict[str, Any]], run: _Run, common: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    data = run.data
    keys = (*DETAILED_KEYS, "start_times")
    columns = {key: data[key] for key in keys}
    texts = data.get("generated_texts")
    for key, column in columns.items():
        if not isinstance(column, list):
            raise run.problem("must be a list (one entry per request)", key=key)
    count = len(columns["ttfts"])
    for key, column in columns.items():
        if len(column) != count:
            raise run.problem(f"has {len(column)} entries but ttfts has {count}", key=key)
    if texts is not None and (not isinstance(texts, list) or len(texts) != count):
        raise run.problem(f"must be a list of {count} texts", key="generated_texts")
    latencies = data.get("latencies")
    if latencies is not None and (not isinstance(latencies, list) or len(latencies) != count):
        raise run.problem(f"must be a list of {count} latencies in seconds", key="latencies")
    c = common["concurrency"]
    first_rep = _first_rep(known, run, common)
    for i in range(count):
        record = _request(run, i, columns, texts, latencies, common)
        record["rep"] = first_rep + i // c
        record["stream"] = i % c
        yield record


def _first_rep(known: list[dict[str, Any]], run: _Run, common: dict[str, Any]) -> int:
    """The rep of this run's first request: as imported before, else after the cell's last rep."""
    marker = run.marker + " request "
    last = 0
    for rec in known:
        if rec.get("kind") != "request" or any(rec.get(key) != value for key, value in common.items()):
            continue
        note = rec.get("note") or ""
        if note.startswith(marker) and note[len(marker) :].isdigit():
            index = int(note[len(marker) :])
            return int(rec["rep"]) - index // int(common["concurrency"])
        last = max(last, int(rec.get("rep", 0)))
    return last + 1


def _request(
    run: _Run,
    i: int,
    columns: dict[str, list[Any]],
    texts: list[Any] | None,
    latencies: list[Any] | None,
    common: dict[str, Any],
) -> dict[str, Any]:
    def number(key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise run.problem(f"entry {i} is {value!r}, not a finite number", key=key)
        if value < 0:
            raise run.problem(f"entry {i} is negative ({value})", key=key)
        return float(value)

    t_start = number("start_times", columns["start_times"][i])
    error = columns["errors"][i]
    prompt = columns["input_lens"][i]
    prompt_tokens = (
        prompt if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt >= 0 else None
    )
    record: dict[str, Any] = {
        "kind": "request",
        **common,
        "warmup": False,
        "t_start": t_start,
        "t_first": None,
        "t_end": None,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": None,
        "status": "ok",
        "note": f"{run.marker} request {i}",
    }
    output = columns["output_lens"][i]
    if error:
        record.update(status="error", error=str(error)[:MAX_ERROR_CHARS])
        return record
    itl = columns["itls"][i]
    if not isinstance(itl, list):
        raise run.problem(f"entry {i} must be a list of gaps in seconds", key="itls")
    if isinstance(output, bool) or not isinstance(output, int) or output < 1:
        record.update(status="error", error=f"the bench recorded {output!r} output tokens for a success")
        return record
    if output > MAX_OUTPUT_TOKENS:
        why = f"entry {i} is {output} tokens, more than {MAX_OUTPUT_TOKENS} (any context window served today)"
        raise run.problem(why, key="output_lens")
    ttft = number("ttfts", columns["ttfts"][i])
    latency = ttft + sum(number("itls", gap) for gap in itl)
    if latencies is not None:
        latency = number("latencies", latencies[i])  # the bench's own: last chunk - send
    record.update(
        t_first=t_start + ttft,
        t_end=t_start + max(latency, ttft),
        completion_tokens=output,
        chunks=1 + len(itl),
    )
    if texts is not None and isinstance(texts[i], str):
        record["output_sha256"] = hashlib.sha256(texts[i].encode("utf-8")).hexdigest()
    return record


def _summary_records(
    known: list[dict[str, Any]], run: _Run, common: dict[str, Any], tally: _Tally
) -> Iterator[dict[str, Any]]:
    data = run.data
    completed = data.get("completed")
    if isinstance(completed, bool) or not isinstance(completed, int) or completed < 1:
        tally.warnings.append(f"{run.path}:{run.line}: no completed request; no summary written")
        return
    distinct = _distinct_outputs(data)
    values: list[tuple[str, Any, int, str]] = [
        ("decode_tps", _per_second(data.get("median_tpot_ms")), completed, "median_tpot_ms"),
        ("ttft_ms", _finite(data.get("median_ttft_ms")), completed, "median_ttft_ms"),
        ("aggregate_tps", _finite(data.get("output_throughput")), 1, "output_throughput"),
    ]
    for metric, value, n, key in values:
        if value is None:
            tally.warnings.append(f"{run.path}:{run.line}: {key} absent or not positive; no {metric} summary")
            continue
        record: dict[str, Any] = {
            "kind": "summary",
            **common,
            "metric": metric,
            "n": n,
            "median": value,
            "min": None,
            "max": None,
            "note": run.marker,
        }
        if distinct is not None and n > 1:
            record["distinct_outputs"] = min(distinct, n)
        held = next((r for r in known if r.get("kind") == "summary" and _same(r, record)), None)
        if held is not None and held.get("note") != run.marker:
            raise run.problem(
                f"a {metric} summary for arm {common['arm']} boot {common['boot']} workload "
                f"{common['workload']} concurrency {common['concurrency']} is already recorded from "
                f"another file ({held.get('note')}); import this one under another --boot or --workload"
            )
        yield record


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("arm", "boot", "workload", "concurrency", "metric")
    return all(a.get(key) == b.get(key) for key in keys)


def _acceptance_record(
    run: _Run, common: dict[str, Any], raw: str, k: int | None, tally: _Tally
) -> dict[str, Any] | None:
    data = run.data
    if not any(key in data for key in SPEC_KEYS):
        return None
    record: dict[str, Any] = {
        "kind": "acceptance",
        **common,
        "rep": None,
        "source": "metrics",
        "scoped": "window",
        "raw": raw,
        "line": run.line,
        "note": run.marker,
    }
    counts = {key: data.get(key) for key in SPEC_COUNT_KEYS}
    if any(isinstance(v, int | float) and not isinstance(v, bool) and v < 0 for v in counts.values()):
        record.update(
            status="void",
            drafts=None,
            draft_tokens=None,
            accepted_tokens=None,
            error="a spec-decode counter went down during the bench run: the server restarted "
            "(counter reset); this window is void",
        )
        return record
    drafts = _count(counts["spec_decode_num_drafts"])
    drafted = _count(counts["spec_decode_draft_tokens"])
    accepted = _count(counts["spec_decode_accepted_tokens"])
    if drafted is not None and accepted is not None and accepted > drafted:
        record.update(
            status="void",
            drafts=None,
            draft_tokens=None,
            accepted_tokens=None,
            error=f"{accepted} tokens accepted but {drafted} drafted: the counters are inconsistent",
        )
        return record
    record.update(drafts=drafts, draft_tokens=drafted, accepted_tokens=accepted)
    length = _finite(data.get("spec_decode_acceptance_length"))
    record["mean_acceptance_length"] = length if length is not None and length >= 1.0 else None
    rates = data.get("spec_decode_per_position_acceptance_rates")
    if isinstance(rates, list) and rates:
        if all(isinstance(r, int | float) and not isinstance(r, bool) and 0 <= r <= 1 for r in rates):
            record["per_position_rate"] = [float(r) for r in rates]
            if k is not None and len(rates) != k:
                tally.warnings.append(
                    f"{run.path}:{run.line}: the server reported {len(rates)} draft positions but the arm "
                    f"says k={k}"
                )
        else:
            tally.warnings.append(f"{run.path}:{run.line}: per-position rates out of [0, 1]; left out")
    if drafted is None or accepted is None:
        rate = _finite(data.get("spec_decode_acceptance_rate"))
        if rate is not None and 0 <= rate <= 100:
            record["acceptance_rate"] = rate / 100.0  # the bench writes a percentage
        if "acceptance_rate" not in record and "per_position_rate" not in record:
            tally.warnings.append(f"{run.path}:{run.line}: spec-decode fields without usable values; skipped")
            return None
    return record


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    if value < 0 or value != math.floor(value):
        return None
    return int(value)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value) if value > 0 else None


def _per_second(tpot_ms: Any) -> float | None:
    tpot = _finite(tpot_ms)
    return None if tpot is None else MS_PER_SECOND / tpot


def _distinct_outputs(data: dict[str, Any]) -> int | None:
    texts, errors = data.get("generated_texts"), data.get("errors")
    if not isinstance(texts, list):
        return None
    failed = errors if isinstance(errors, list) and len(errors) == len(texts) else [""] * len(texts)
    kept = {
        hashlib.sha256(text.encode("utf-8")).hexdigest()
        for text, error in zip(texts, failed, strict=True)
        if isinstance(text, str) and not error
    }
    return len(kept) or None


# ---------------------------------------------------------------------------------------------------
# many files at once: a manifest, and the importer-interface entry point


def import_vllm_bench_entries(entries: Sequence[Entry], *, out: str | os.PathLike[str]) -> ImportReport:
    """Import each entry's bench file as its arm's boot, in boot order, with a boot record per boot.

    The boot records carry each boot's position in the campaign's boot order (the manifest's ``order``,
    else after the boots already imported), which the drift check of the controls reads.
    """
    for entry in entries:
        check_names(entry.spec)
    held = held_in(out)
    orders, _ = arm_orders([e.spec for e in entries], held.next_order)
    ranked = sorted(zip(orders, entries, strict=True), key=lambda pair: pair[0])
    written: dict[str, int] = {}
    present, runs = 0, 0
    warnings: list[str] = []
    for order, entry in ranked:
        spec = entry.spec
        report = import_vllm_bench(
            [entry.file],
            arm=spec.arm,
            boot=spec.boot,
            out=out,
            role=None if spec.role is None else str(spec.role),
            method=None if spec.method is None else str(spec.method),
            k=spec.k,
            workload=spec.workload or DEFAULT_WORKLOAD,
            concurrency=spec.concurrency,
            where=spec.where,
        )
        boot = _write_boot(out, spec.arm, spec.boot, order, f"{NOTE_PREFIX} {entry.file.name}")
        for kind, n in (*report.written, *((("boot", 1),) if boot else ())):
            written[kind] = written.get(kind, 0) + n
        present += report.already_present + (0 if boot else 1)
        runs += report.runs
        warnings.extend(w for w in report.warnings if "no control arm" not in w)
    return ImportReport(
        out=str(out),
        written=tuple(sorted(written.items())),
        already_present=present,
        runs=runs,
        warnings=tuple(dict.fromkeys(warnings)),
    )


def _write_boot(out: str | os.PathLike[str], arm: str, boot: int, order: int, note: str) -> bool:
    """Append the boot's record (False when one is present already)."""
    root = Path(out)
    data = _check.read_document(root / CAMPAIGN_FILE, what="campaign.json", error=ResultsError)
    campaign = _check.loads_strict(_check.text_of(data, str(root / CAMPAIGN_FILE), ResultsError))
    with ResultsWriter(root, campaign) as writer:
        return writer.append(as_builtins(boot_record(arm, boot, order, note)))


class VllmBench(Importer):
    """`vllm bench serve --save-result` JSON files, one arm boot each."""

    name = "vllm-bench"
    tool = "vllm bench serve --save-result [--save-detailed] JSON"

    def run(self, out: str | os.PathLike[str], entries: Sequence[Entry]) -> ImportReport:
        return import_vllm_bench_entries(entries, out=out)


IMPORTER = VllmBench()
