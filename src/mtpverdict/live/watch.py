"""`watch`: scrape a live server's /metrics window by window and judge its acceptance against a decision.

Each window is the counter delta between two scrapes (parse/metrics.py, the collector's parser): a
counter that went down means the server restarted, so that window is not judged and the next one
counts from the new totals. A judged window has the live acceptance rate with its interval (one
window is one cluster of draft rounds: stats/acceptance_ci.py) and the live mean acceptance length
1 + accepted / drafts with its interval, and one status:

- below_break_even: the live length's upper end is below the decision's conservative break-even bound
  and below the measured length's low end (an arm whose evidence was already below break-even is
  judged by the second part, so only a departure from the evidence counts);
- below_evidence: the live rate's upper end is below the low end of the campaign's measured interval;
- above_evidence: the live rate's low end is above the high end of the measured interval (the traffic
  is easier than the evidence's, or the seat is another configuration): flagged, not a failure, since
  speculation pays more there than the decision measured;
- no_drafting: tokens were generated but nothing was drafted (or the counters are gone);
- unreachable: /metrics did not answer 200 within the bounds, or its text was not an exposition;
- holds, or idle (no token generated: nothing to judge) and reset (a counter went down).

A judged window whose drafted tokens per step differ from the decision arm's by more than
DRAFTED_PER_STEP_TOLERANCE carries a warning note: the seat may not run the decision's configuration
(a k=1 decision judged against a k=3 server), and its break-even bound is then not the seat's.

Failing windows in a row make one streak, whatever their failing statuses; the streak's status is the
most severe one in it (below_break_even, no_drafting, below_evidence, unreachable, in that order). A
streak of `confirm` windows ends the watch with that status; idle and reset windows neither extend nor
break a streak, and an answer after a streak of unreachable windows only ends it. When `duration` runs
out, a streak still open (the last windows failed, fewer than `confirm` of them) ends the watch with its
status, unconfirmed; a watch that judged no window (every one idle, reset or unreachable, with no open
streak) ends not_judged; otherwise the evidence held. Memory is bounded: the previous scrape and the
current streak are all that is kept; every scrape is bounded in bytes and time like collect's, and
only its engine lines (`vllm:`, `llamacpp:`, `sglang:` series other than histogram and summary parts)
reach the parser, at most MAX_ENGINE_LINES of them. The parser costs about a second of CPU per MiB of
series and the line filter about a tenth of that, so within MAX_SCRAPE_BYTES (4 MiB, a quarter of
collect's bound) a scrape costs well under a second of CPU whatever it holds.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from mtpverdict.errors import EngineTextError, InputError, Problem, printable
from mtpverdict.live.reference import Reference
from mtpverdict.parse.metrics import MetricsSnapshot, acceptance_delta, parse_metrics, prefixes
from mtpverdict.parse.model import AcceptanceReading, VoidWindow
from mtpverdict.stats.acceptance_ci import AcceptanceCounts, ClusterUnit, acceptance_intervals

if TYPE_CHECKING:
    import httpx

DEFAULT_WINDOW_SECONDS = 60.0
DEFAULT_DURATION_SECONDS = 600.0
DEFAULT_CONFIRM = 2  # consecutive failing windows before the watch ends: one noisy window is not a trend
MAX_SCRAPE_BYTES = 4 * 1024 * 1024  # a real /metrics is 0.1-0.5 MiB; 4 MiB filter in ~0.4 s of CPU
MAX_SCRAPE_SECONDS = 60.0  # and never longer than a window
MAX_ENGINE_LINES = 5_000  # engine lines parsed per scrape: a real server exports a few hundred
_SKIPPED_PARTS = ("_bucket", "_sum", "_count", "_created")  # histogram and summary parts: not read
DRAFTED_PER_STEP_TOLERANCE = 0.5  # tokens per step: more apart than this is another configuration


class Status(StrEnum):
    """What one window shows, or what ended the watch."""

    HOLDS = "holds"
    IDLE = "idle"
    RESET = "reset"
    BELOW_BREAK_EVEN = "below_break_even"
    BELOW_EVIDENCE = "below_evidence"
    ABOVE_EVIDENCE = "above_evidence"
    NO_DRAFTING = "no_drafting"
    UNREACHABLE = "unreachable"
    NOT_JUDGED = "not_judged"  # an outcome only: the watch ended without judging any window

    @property
    def failing(self) -> bool:
        return self in FAILING


FAILING = (Status.BELOW_BREAK_EVEN, Status.NO_DRAFTING, Status.BELOW_EVIDENCE, Status.UNREACHABLE)
"""The failing statuses, most severe first: a streak's status is the first of them it holds."""
JUDGED = (
    Status.HOLDS,
    Status.ABOVE_EVIDENCE,
    Status.BELOW_BREAK_EVEN,
    Status.NO_DRAFTING,
    Status.BELOW_EVIDENCE,
)


@dataclass(frozen=True, slots=True)
class WindowReport:
    """One window: the live counts, the acceptance with its interval, and the status."""

    window: int
    status: Status
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    generated_tokens: int | None = None
    rate: float | None = None
    rate_low: float | None = None
    rate_high: float | None = None
    length: float | None = None
    length_low: float | None = None
    length_high: float | None = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Status) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class WatchResult:
    """How the watch ended: its status (module docstring), the windows, and whether a streak confirmed it."""

    status: Status
    windows: int
    streak: int
    last: WindowReport | None
    confirmed: bool = False
    judged: int = 0


@dataclass(frozen=True, slots=True)
class Scrape:
    """One /metrics answer: the text, or why there is none."""

    text: str | None
    error: str | None


def judge(
    ref: Reference, index: int, before: MetricsSnapshot, after: MetricsSnapshot, alpha: float
) -> WindowReport:
    """The status of the window between two scrapes (module docstring); pure."""
    delta = acceptance_delta(before, after)
    generated = _generated(before, after)
    if isinstance(delta, VoidWindow):
        return WindowReport(index, Status.RESET, note=delta.reason)
    if generated is not None and generated < 0:
        return WindowReport(
            index, Status.RESET, note="the generated-token counter went down: the server restarted"
        )
    drafted = None if delta is None else delta.draft_tokens
    if not drafted:
        if generated:
            why = "no spec-decode counters" if delta is None else "no draft token proposed"
            return WindowReport(index, Status.NO_DRAFTING, generated_tokens=generated, note=why)
        return WindowReport(index, Status.IDLE, generated_tokens=generated, note="no token generated")
    assert delta is not None
    return _judged(ref, index, delta, generated, alpha)


def _judged(
    ref: Reference, index: int, delta: AcceptanceReading, generated: int | None, alpha: float
) -> WindowReport:
    drafted = delta.draft_tokens or 0
    accepted = delta.accepted_tokens or 0
    rate = accepted / drafted
    low = high = None
    if delta.drafts:
        unit = ClusterUnit.ROUND if delta.accepted_per_position else ClusterUnit.ROUND_BOUND
        counts = AcceptanceCounts(delta.drafts, drafted, accepted, delta.accepted_per_position)
        try:
            found = acceptance_intervals([counts], unit=unit, alpha=alpha)
        except ValueError:
            found = None  # per-position counts that are not a chain: the rate stands without an interval
        if found is not None:
            low, high = found.overall.low, found.overall.high
    length = length_low = length_high = None
    if delta.drafts:
        k_bar = drafted / delta.drafts
        length = 1.0 + accepted / delta.drafts
        if low is not None and high is not None:
            length_low, length_high = 1.0 + k_bar * low, 1.0 + k_bar * high
    status = _status(
        ref,
        rate if low is None else low,
        rate if high is None else high,
        length if length_high is None else length_high,
    )
    note = None
    if delta.drafts and ref.drafted_per_step is not None:
        live = drafted / delta.drafts
        if abs(live - ref.drafted_per_step) > DRAFTED_PER_STEP_TOLERANCE:
            note = (
                f"warning: the seat drafts {live:.2f} tokens per step, the decision's arm "
                f"{ref.drafted_per_step:.2f}: is it the decision's configuration?"
            )
    return WindowReport(
        index,
        status,
        delta.drafts,
        drafted,
        accepted,
        generated,
        rate,
        low,
        high,
        length,
        length_low,
        length_high,
        note,
    )


def _status(ref: Reference, rate_low: float, rate_high: float, length_high: float | None) -> Status:
    if length_high is not None and ref.bound_length is not None and length_high < ref.bound_length:
        if ref.length_low is None or length_high < ref.length_low:
            return Status.BELOW_BREAK_EVEN
    if ref.rate_low is not None and rate_high < ref.rate_low:
        return Status.BELOW_EVIDENCE
    if ref.rate_high is not None and rate_low > ref.rate_high:
        return Status.ABOVE_EVIDENCE
    return Status.HOLDS


def _generated(before: MetricsSnapshot, after: MetricsSnapshot) -> int | None:
    if before.generation_tokens is None or after.generation_tokens is None:
        return None
    return after.generation_tokens - before.generation_tokens


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """How long to watch, how often, and how many failing windows in a row end the watch."""

    window: float = DEFAULT_WINDOW_SECONDS
    duration: float = DEFAULT_DURATION_SECONDS
    confirm: int = DEFAULT_CONFIRM

    @property
    def windows(self) -> int:
        """How many windows the watch judges at most."""
        return max(1, math.ceil(self.duration / self.window))


def check_watch(options: WatchOptions) -> None:
    """Refuse a --confirm no watch of this length can reach (InputError naming --confirm)."""
    if options.confirm > options.windows:
        raise InputError(
            [
                Problem(
                    "watch",
                    f"--confirm {options.confirm} is more than the {options.windows} windows of --for "
                    f"{options.duration:g} s at --window {options.window:g} s: no streak could confirm",
                    key="--confirm",
                )
            ]
        )


class _Streak:
    """The current run of failing windows and its most severe status (idle and reset pass through it)."""

    def __init__(self) -> None:
        self.status: Status | None = None
        self.count = 0

    def clear(self) -> None:
        self.status, self.count = None, 0

    def add(self, status: Status) -> None:
        if status in (Status.IDLE, Status.RESET):
            return
        if not status.failing:
            self.clear()
            return
        self.count += 1
        if self.status is None or FAILING.index(status) < FAILING.index(self.status):
            self.status = status


async def watch(
    ref: Reference,
    options: WatchOptions,
    *,
    scrape: Callable[[], Awaitable[Scrape]],
    sleep_until: Callable[[float], Awaitable[None]],
    report: Callable[[WindowReport], None],
) -> WatchResult:
    """Scrape every `options.window` seconds until a failing status is confirmed or the duration ends.

    `sleep_until(t)` waits until t seconds after the start (injected: tests need no wall clock);
    `report` receives every window as it is judged.
    """
    windows = options.windows
    streak = _Streak()
    judged = 0
    previous: MetricsSnapshot | None = None
    last: WindowReport | None = None
    for index in range(windows + 1):  # scrape 0 is the baseline; windows 1..n are judged
        if index:
            await sleep_until(index * options.window)
        snapshot, error = await _snapshot(scrape)
        if snapshot is None:
            last = WindowReport(index, Status.UNREACHABLE, note=error)
            previous = None  # the next answer is a new baseline
        elif previous is None:
            previous = snapshot  # a baseline: the server answers again, so it is not unreachable
            if streak.status is Status.UNREACHABLE:
                streak.clear()
            continue
        else:
            last = judge(ref, index, previous, snapshot, ref.alpha)
            previous = snapshot
        report(last)
        judged += last.status in JUDGED
        streak.add(last.status)
        if streak.status is not None and streak.count >= options.confirm:
            return WatchResult(streak.status, index, streak.count, last, confirmed=True, judged=judged)
    if streak.status is not None:
        return WatchResult(streak.status, windows, streak.count, last, judged=judged)
    return WatchResult(Status.HOLDS if judged else Status.NOT_JUDGED, windows, 0, last, judged=judged)


def engine_lines(text: str) -> str | None:
    """The exposition with every line but the engines' series (and their comments) blank; None when it
    holds more than MAX_ENGINE_LINES of them. Blank lines keep a malformed line's number."""
    import io

    parts: list[str] = []
    blanks = kept = 0
    engine_prefixes = tuple(prefixes())
    for line in io.StringIO(text):
        stripped = line.lstrip()
        if stripped.startswith("#"):
            words = stripped.split(None, 3)
            name = words[2] if len(words) > 2 and words[1] in ("TYPE", "HELP") else ""
        else:
            name = stripped.split("{", 1)[0].split(None, 1)[0] if stripped.strip() else ""
        if name.startswith(engine_prefixes) and not name.endswith(_SKIPPED_PARTS):
            kept += 1
            if kept > MAX_ENGINE_LINES:
                return None
            parts.append("\n" * blanks)
            parts.append(line if line.endswith("\n") else line + "\n")
            blanks = 0
        else:
            blanks += 1
    parts.append("\n" * blanks)
    return "".join(parts)


async def _snapshot(scrape: Callable[[], Awaitable[Scrape]]) -> tuple[MetricsSnapshot | None, str | None]:
    got = await scrape()
    if got.text is None:
        return None, got.error
    text = engine_lines(got.text)
    if text is None:
        return None, f"/metrics: more than {MAX_ENGINE_LINES} engine series lines (the bound)"
    try:
        return parse_metrics(text, source="/metrics"), None
    except EngineTextError as exc:
        return None, str(exc.problems[0])


def metrics_url(url: str) -> str:
    """The /metrics URL of a server: a bare base URL gets /metrics, a URL with a path is kept.

    InputError (key URL) for anything but an http(s) URL with a host and a valid port.
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        _ = parts.port  # ValueError when out of range or not a number
        bad = None
        if parts.scheme not in ("http", "https"):
            bad = "is not an http:// or https:// URL"
        elif not parts.hostname:
            bad = "names no host"
    except ValueError as exc:
        bad = f"is not a valid URL ({exc})"
    if bad is not None:
        raise InputError([Problem("watch", f"{printable(url)!r} {bad}", key="URL")])
    if parts.path in ("", "/"):
        return url.rstrip("/") + "/metrics"
    return url


async def _bounded_get(client: httpx.AsyncClient, url: str, seconds: float) -> Scrape:
    """GET with a bound on the body's size and the total time, as collect reads /metrics."""
    import asyncio

    import httpx

    try:
        async with asyncio.timeout(seconds):
            async with client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as response:
                if response.status_code != 200:
                    return Scrape(None, f"GET {url}: HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) > MAX_SCRAPE_BYTES:
                        return Scrape(None, f"GET {url}: more than {MAX_SCRAPE_BYTES} bytes (the bound)")
    except TimeoutError:
        return Scrape(None, f"GET {url}: took longer than {seconds:g} s (the bound)")
    except httpx.HTTPError as exc:
        return Scrape(None, f"GET {url}: {type(exc).__name__}: {exc}"[:300])
    return Scrape(body.decode("utf-8", errors="replace"), None)


async def watch_url(
    ref: Reference, url: str, options: WatchOptions, report: Callable[[WindowReport], None]
) -> WatchResult:
    """watch() over HTTP: bounded GETs of the server's /metrics, windows on the monotonic clock."""
    import asyncio
    import time

    import httpx

    target = metrics_url(url)
    start = time.monotonic()
    seconds = min(MAX_SCRAPE_SECONDS, options.window)

    async def sleep_until(at: float) -> None:
        await asyncio.sleep(max(0.0, start + at - time.monotonic()))

    async with httpx.AsyncClient(timeout=seconds) as client:

        async def scrape() -> Scrape:
            return await _bounded_get(client, target, seconds)

        return await watch(ref, options, scrape=scrape, sleep_until=sleep_until, report=report)
