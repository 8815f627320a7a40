"""A boot's engine log read after the boot: its acceptance (the second surface) and KV pool, as records."""

from __future__ import annotations

import dataclasses
from typing import Any

from mtpverdict.collect import logruns
from mtpverdict.collect.boot_record import RecordedBoot
from mtpverdict.collect.context import CollectContext
from mtpverdict.engines.interface import BootLog
from mtpverdict.parse.model import AcceptanceReading


def read_engine_log(
    ctx: CollectContext, record: RecordedBoot, log_rel: str, sent: list[logruns.Sent] | None = None
) -> RecordedBoot:
    """The log's acceptance records appended, and `record` with the KV pool and version it shows.

    Cumulative lines (llama.cpp's per-drafter `statistics`, totals since boot) are left out: the
    /metrics deltas cover the same counters per run. For an engine whose `boot_log` part says which
    readings of its log are per-request lines (llama.cpp's), they are matched to the runs that
    printed them (collect/logruns.py), given the boot's request groups in order
    (`sent`; None for a boot a killed collect left, whose groups are not known); each measured
    run's lines become one run-scoped record, warm-up and check lines are set aside, and lines
    that cannot be placed are kept as engine-wide windows.
    """
    from mtpverdict.parse import parse_file

    path = ctx.results / log_rel
    if not path.is_file():
        return record
    arm, boot = record.arm, record.boot
    engine: Any = ctx.plan.server.engine
    parsed = parse_file(path, engine)
    for kv in parsed.kv_capacity:
        if record.kv_cache_tokens is None and kv.kv_cache_tokens is not None:
            record = dataclasses.replace(record, kv_cache_tokens=kv.kv_cache_tokens)
    if record.engine_version is None and parsed.engine_version:
        record = dataclasses.replace(record, engine_version=parsed.engine_version)
    boot_log = ctx.boot_log
    if boot_log is not None and record.kv_cache_tokens is None:
        ctx.missing(boot_log.no_kv_line, arm, boot)
    readings = [r for r in parsed.acceptance if r.source == "log" and r.kind != "counter_total"]
    windows = readings
    if boot_log is not None:
        windows = _request_lines(ctx, record, log_rel, readings, sent, boot_log)
    for reading in windows:
        rec = logruns.window_record(arm, boot, log_rel, reading)
        has_counts = rec["draft_tokens"] is not None and rec["accepted_tokens"] is not None
        if has_counts or rec["per_position_rate"] is not None or rec["acceptance_rate"] is not None:
            _append_log(ctx, arm, boot, rec)
    return record


def _request_lines(
    ctx: CollectContext,
    record: RecordedBoot,
    log_rel: str,
    readings: list[AcceptanceReading],
    sent: list[logruns.Sent] | None,
    boot_log: BootLog,
) -> list[AcceptanceReading]:
    """The per-request lines (as the engine's `boot_log.per_request` tells them) matched to their runs
    and appended; the windows left (those that cannot be placed among them). `no_request_lines` is
    said when a boot drafted and its log printed none."""
    arm, boot = record.arm, record.boot
    lines = [r for r in readings if boot_log.per_request(r)]
    windows = [r for r in readings if not boot_log.per_request(r)]
    if not lines and any(group.drafted for group in sent or ()):
        ctx.missing(boot_log.no_request_lines, arm, boot)
    matched = logruns.match_lines(lines, sent) if sent is not None else None
    for found in () if matched is None else matched.runs:
        _append_log(ctx, arm, boot, logruns.run_record(arm, boot, log_rel, found))
    windows += list(lines if matched is None else matched.unmatched)
    if matched is not None and matched.reason:
        detail = f"{len(matched.unmatched)} per-request log lines kept as windows: {matched.reason}"
        ctx.note(arm, boot, detail)
    return windows


def _append_log(ctx: CollectContext, arm: str, boot: int, rec: dict[str, Any]) -> None:
    try:
        ctx.append(rec)
    except ValueError as exc:  # a log window the results format cannot hold is kept as a note
        ctx.note(arm, boot, f"log window at line {rec['line']} kept out: {exc}")
