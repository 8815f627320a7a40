"""records.jsonl: what the types cannot say, per record and column-wise across a loaded table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import numpy.typing as npt

from mtpverdict.formats import _check
from mtpverdict.formats.results import (
    ABSENT_DEFAULTS,
)
from mtpverdict.formats.results_io.common import (
    RAW_DIR,
    TIME_SLACK,
    _Problems,
    safe_relative,
)
from mtpverdict.formats.results_io.decode import (
    _PATTERNS,
)

if TYPE_CHECKING:
    pass


def record_problems(kind: str, rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    """Cross-field checks of one record (absent optional keys at their defaults)."""
    checks = {
        "request": _request_problems,
        "acceptance": _acceptance_problems,
        "boot": _boot_problems,
        "summary": _summary_problems,
    }
    out = checks[kind](rec) if kind in checks else []
    for key in ("raw", "log"):
        value = rec.get(key)
        if isinstance(value, str) and not (safe_relative(value) and value.startswith(RAW_DIR + "/")):
            out.append(
                (key, f"{value[:80]!r} must be a relative path under {RAW_DIR}/ inside the results directory")
            )
    return out


def _request_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    t0, t1, t2 = rec["t_start"], rec["t_first"], rec["t_end"]
    if rec["status"] == "ok":
        out.extend(
            (key, "must be set when status is ok")
            for key in ("t_first", "t_end", "completion_tokens")
            if rec[key] is None
        )
        if rec["completion_tokens"] is not None and rec["completion_tokens"] < 1:
            out.append(("completion_tokens", "must be >= 1 when status is ok"))
    elif not rec.get("error"):
        out.append(("error", "must say what failed when status is error"))
    if t1 is not None and t1 + TIME_SLACK < t0:
        out.append(("t_first", f"is before t_start ({t1} < {t0}); times must not be inverted"))
    if t2 is not None and t1 is not None and t2 + TIME_SLACK < t1:
        out.append(("t_end", f"is before t_first ({t2} < {t1}); times must not be inverted"))
    if t2 is not None and t1 is None:
        out.append(("t_first", "is null while t_end is set"))
    if rec["stream"] >= rec["concurrency"]:
        out.append(("stream", f"must be below concurrency {rec['concurrency']}"))
    return out


def _acceptance_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    drafted, accepted, drafts = rec["draft_tokens"], rec["accepted_tokens"], rec["drafts"]
    if drafted is not None and accepted is not None and accepted > drafted:
        out.append(("accepted_tokens", f"{accepted} exceeds draft_tokens {drafted}"))
    if drafts is not None and drafted is not None and drafts > drafted:
        out.append(("drafts", f"{drafts} exceeds draft_tokens {drafted}"))
    out.extend(_position_problems(rec))
    mal = rec["mean_acceptance_length"]
    if mal is not None and mal < 1:
        out.append(("mean_acceptance_length", f"{mal} is below 1 (it counts the bonus token)"))
    has_counts = drafted is not None and accepted is not None
    has_rates = rec["per_position_rate"] is not None or rec["acceptance_rate"] is not None
    if rec["status"] == "ok" and not (has_counts or has_rates):
        out.append(
            (
                None,
                "an acceptance record needs draft_tokens and accepted_tokens, or per_position_rate, "
                "or acceptance_rate",
            )
        )
    if rec["status"] == "void" and not rec["error"]:
        out.append(("error", "must say why the window is void"))
    if rec["scoped"] == "run" and rec["rep"] is None:
        out.append(("rep", "must be set when scoped is run"))
    return out


def _position_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    per_pos, accepted, drafts = rec["accepted_per_position"], rec["accepted_tokens"], rec["drafts"]
    out: list[tuple[str | None, str]] = []
    if per_pos is not None:
        if accepted is not None and sum(per_pos) != accepted:
            out.append(("accepted_per_position", f"sums to {sum(per_pos)}, not accepted_tokens {accepted}"))
        if drafts is not None and any(c > drafts for c in per_pos):
            out.append(("accepted_per_position", f"a position count exceeds drafts {drafts}"))
        if drafts is None:
            out.append(("drafts", "must be set when accepted_per_position is given"))
        if rec["per_position_rate"] is not None:
            out.append(("per_position_rate", "give counts or rates, not both"))
    return out


def _boot_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    if rec["status"] == "failed" and not rec["error"]:
        return [("error", "must say why the boot failed")]
    return []


def _summary_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    lo, mid, hi = rec["min"], rec["median"], rec["max"]
    if lo is not None and lo > mid + TIME_SLACK:
        out.append(("min", f"{lo} exceeds median {mid}"))
    if hi is not None and hi + TIME_SLACK < mid:
        out.append(("max", f"{hi} is below median {mid}"))
    if rec["distinct_outputs"] is not None and rec["distinct_outputs"] > rec["n"]:
        out.append(("distinct_outputs", f"exceeds n {rec['n']}"))
    return out


def _as_float(values: list[Any]) -> npt.NDArray[np.float64]:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _request_suspects(cols: dict[str, list[Any]]) -> npt.NDArray[np.bool_]:
    """Rows that may break a request check: a superset of _request_problems, computed column-wise."""
    t0, t1, t2 = (_as_float(cols[k]) for k in ("t_start", "t_first", "t_end"))
    tokens = _as_float(cols["completion_tokens"])
    ok = np.array([s == "ok" for s in cols["status"]], dtype=bool)
    errors = np.array([bool(e) for e in cols["error"]], dtype=bool)
    missing = np.isnan(t1) | np.isnan(t2) | np.isnan(tokens) | (tokens < 1)
    inverted = (t1 + TIME_SLACK < t0) | (t2 + TIME_SLACK < t1) | (~np.isnan(t2) & np.isnan(t1))
    stream = np.array(cols["stream"], dtype=float) >= np.array(cols["concurrency"], dtype=float)
    suspects: npt.NDArray[np.bool_] = (ok & missing) | (~ok & ~errors) | inverted | stream
    return suspects


def _fill_absent(kind: str, cols: dict[str, list[Any]]) -> None:
    """Replace UNSET (an absent optional key) by the value it stands for."""
    defaults = ABSENT_DEFAULTS.get(kind, {})
    unset = msgspec.UNSET
    for name, values in cols.items():
        if values.count(unset):
            default = defaults.get(name)
            cols[name] = [default if v is unset else v for v in values]


def _pattern_checks(
    kind: str, cols: dict[str, list[Any]], lines: list[int], source: str, problems: _Problems
) -> set[int]:
    """String patterns, checked once per distinct value (the fast decoder skipped them)."""
    bad: set[int] = set()
    for name, pattern in _PATTERNS[kind].items():
        search = _check.pattern_matcher(pattern)
        wrong = {v for v in set(cols[name]) if isinstance(v, str) and not search(v)}
        for i, value in enumerate(cols[name]) if wrong else ():
            if value in wrong:
                problems.add(source, f"{value[:80]!r} does not match {pattern}", line=lines[i], key=name)
                bad.add(i)
    return bad


def _cross_checks(
    kind: str, cols: dict[str, list[Any]], lines: list[int], source: str, problems: _Problems
) -> set[int]:
    """Run the per-record checks where needed; return the positions of records that broke one."""
    names = list(cols)
    rows: list[int] = list(range(len(lines)))
    if kind == "request" and lines:
        rows = np.flatnonzero(_request_suspects(cols)).tolist()
    bad: set[int] = set()
    for i in rows:
        rec = {name: cols[name][i] for name in names}
        for key, message in record_problems(kind, rec):
            problems.add(source, message, line=lines[i], key=key)
            bad.add(i)
    return bad
