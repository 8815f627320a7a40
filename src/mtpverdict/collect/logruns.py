"""Per-request acceptance lines of a server log (llama.cpp's), matched to the runs that printed them.

llama-server prints one ``draft acceptance = … (A accepted / D generated)`` line for each request that
drafted, when the request ends and before its final response is sent (tools/server/server-context.cpp:
``print_timings``, then ``send_final_response``), and the response's ``timings`` carry the same two
counts (``draft_n``, ``draft_n_accepted``) under the same condition, ``draft_n > 0``
(server-common.cpp ``server_slot_stats::to_json``). The collector sends its requests in groups, each
ending before the next begins (a run's streams, a warm-up run, one check request), so the log holds
the groups' lines in the groups' order: a group's lines are the next m lines, m the number of its
requests that drafted, and their (drafted, accepted) pairs equal the responses' as multisets.

Which readings of a log are per-request lines is the engine's rule (its `boot_log` part's
`per_request`; llama.cpp's is engines/llamacpp.py `per_request_line`). A request's response is
readable when the engine's own response object was read (collect/served.py `Served.own_read`),
whichever of its fields the engine gives. Matching walks the groups in order and stops at the first
it cannot place: a request without a readable response (its line may or may not exist), counts that
differ, or too few lines. Lines from there on are not attributed; so are lines left over after the
last group. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtpverdict.parse import AcceptanceReading

RunKey = tuple[str, int, int]  # (workload, concurrency, rep) of a measured run
Pair = tuple[int, int]  # (draft tokens, accepted tokens) of one request that drafted


@dataclass(frozen=True, slots=True)
class Sent:
    """One group of requests, in the order sent: a measured run, or warm-up and check requests."""

    run: RunKey | None  # None: a warm-up run or a check request (identity, coherence, likelihood)
    drafted: tuple[Pair, ...] | None  # per request that drafted; None when a request's counts are unknown
    what: str = ""  # how a note names the group

    @staticmethod
    def of(run: RunKey | None, requests: Sequence[tuple[bool, Pair | None]], what: str) -> Sent:
        """A group from its requests: (the response was read, its counts when it drafted)."""
        if not all(read for read, _ in requests):
            return Sent(run, None, what)
        return Sent(run, tuple(pair for _, pair in requests if pair is not None), what)


def sent_to_json(sent: Sequence[Sent]) -> list[list[Any]]:
    """The groups as a start file keeps them, so a resume can place a killed collect's lines."""
    return [
        [
            None if g.run is None else list(g.run),
            None if g.drafted is None else [list(p) for p in g.drafted],
            g.what,
        ]
        for g in sent
    ]


def sent_from_json(value: object) -> list[Sent] | None:
    """Groups read back from a start file; None when the value is not what sent_to_json writes."""
    try:
        if not isinstance(value, list):
            raise ValueError("not a list")
        return [_group(item) for item in value]
    except ValueError:
        return None


def _group(item: object) -> Sent:
    if not (isinstance(item, list) and len(item) == 3 and isinstance(item[2], str)):
        raise ValueError("not a group")
    run, drafted, what = item
    return Sent(None if run is None else _run_key(run), None if drafted is None else _pairs(drafted), what)


def _whole(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("not a count")
    return value


def _run_key(value: object) -> RunKey:
    if not (isinstance(value, list) and len(value) == 3 and isinstance(value[0], str)):
        raise ValueError("not a run")
    return (value[0], _whole(value[1]), _whole(value[2]))


def _pairs(value: object) -> tuple[Pair, ...]:
    if not isinstance(value, list):
        raise ValueError("not a list of pairs")
    pairs: list[Pair] = []
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ValueError("not a pair")
        pairs.append((_whole(pair[0]), _whole(pair[1])))
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class RunLines:
    """The lines of one measured run's requests, in log order."""

    run: RunKey
    lines: tuple[AcceptanceReading, ...]


@dataclass(frozen=True, slots=True)
class Matched:
    """Where every per-request line went."""

    runs: tuple[RunLines, ...]  # measured runs with at least one line
    set_aside: int  # lines of warm-up and check requests: not measured, so not recorded
    unmatched: tuple[AcceptanceReading, ...]  # lines no group could be placed for
    reason: str | None  # why matching stopped before the last line; None when every line was placed


def _pair(reading: AcceptanceReading) -> Pair:
    assert reading.draft_tokens is not None and reading.accepted_tokens is not None
    return (reading.draft_tokens, reading.accepted_tokens)


def match_lines(lines: Sequence[AcceptanceReading], sent: Sequence[Sent]) -> Matched:
    """Place each per-request line (in log order) in the group that printed it (module docstring)."""
    runs: list[RunLines] = []
    set_aside = 0
    at = 0
    for group in sent:
        if group.drafted is None:
            return _stop(runs, set_aside, lines, at, f"{group.what}: a request has no readable response")
        take = lines[at : at + len(group.drafted)]
        if len(take) < len(group.drafted):
            reason = f"{group.what}: {len(group.drafted)} requests drafted, {len(take)} lines are left"
            return _stop(runs, set_aside, lines, at, reason)
        if Counter(map(_pair, take)) != Counter(group.drafted):
            seen = ", ".join(f"{a}/{d}" for d, a in map(_pair, take))
            sent_pairs = ", ".join(f"{a}/{d}" for d, a in group.drafted)
            reason = f"{group.what}: the responses counted {sent_pairs} accepted/drafted, the lines {seen}"
            return _stop(runs, set_aside, lines, at, reason)
        at += len(take)
        if group.run is None:
            set_aside += len(take)
        elif take:
            runs.append(RunLines(group.run, tuple(take)))
    if at < len(lines):
        reason = f"{len(lines) - at} lines more than the requests that drafted"
        return _stop(runs, set_aside, lines, at, reason)
    return Matched(tuple(runs), set_aside, (), None)


def _stop(
    runs: list[RunLines], set_aside: int, lines: Sequence[AcceptanceReading], at: int, reason: str
) -> Matched:
    rest = tuple(lines[at:])
    return Matched(tuple(runs), set_aside, rest, reason if rest else None)


def run_record(arm: str, boot: int, raw: str, found: RunLines) -> dict[str, Any]:
    """One acceptance record for a measured run's lines: their counts summed, scoped to the run.

    A line's rates (mean length, per position) are per request; with several lines they cannot be
    pooled without each request's verification steps, which the line does not print, so they are kept
    only when the run has one line.
    """
    workload, concurrency, rep = found.run
    one = found.lines[0] if len(found.lines) == 1 else None
    record: dict[str, Any] = {
        "kind": "acceptance",
        "arm": arm,
        "boot": boot,
        "workload": workload,
        "concurrency": concurrency,
        "rep": rep,
        "source": "log",
        "scoped": "run",
        "drafts": None,
        "draft_tokens": sum(_pair(r)[0] for r in found.lines),
        "accepted_tokens": sum(_pair(r)[1] for r in found.lines),
        "per_position_rate": None if one is None else _rates(one),
        "acceptance_rate": None if one is None else one.acceptance_rate,
        "mean_acceptance_length": None if one is None else one.mean_acceptance_length,
        "raw": raw,
        "line": found.lines[0].line,
    }
    if one is None:
        numbers = ", ".join(str(r.line) for r in found.lines)
        record["note"] = f"log lines {numbers} ({len(found.lines)} requests)"
    return record


def window_record(arm: str, boot: int, raw: str, reading: AcceptanceReading) -> dict[str, Any]:
    """One acceptance record for a log line not matched to a run: an engine-wide window."""
    return {
        "kind": "acceptance",
        "arm": arm,
        "boot": boot,
        "workload": None,
        "concurrency": None,
        "rep": None,
        "source": "log",
        "scoped": "window",
        "drafts": reading.drafts,
        "draft_tokens": reading.draft_tokens,
        "accepted_tokens": reading.accepted_tokens,
        "per_position_rate": _rates(reading),
        "acceptance_rate": reading.acceptance_rate,
        "mean_acceptance_length": reading.mean_acceptance_length,
        "raw": raw,
        "line": reading.line,
    }


def _rates(reading: AcceptanceReading) -> list[float] | None:
    """Per-position rates clipped to [0, 1] (a printed rate may round past 1 by a last digit)."""
    rates = reading.per_position_rate
    return None if rates is None else [min(1.0, max(0.0, x)) for x in rates]
