"""`mtpverdict watch`: live /metrics windows judged against a decision (scripted scrapes, a fake server)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from mtpverdict.live import watch as w
from mtpverdict.live.reference import Reference, load_reference
from mtpverdict.parse.metrics import MetricsSnapshot, parse_metrics

from .collect.conftest import FAKE, free_port
from .conftest import ROOT

DECISION = ROOT / "tests" / "golden" / "thor-qwen36-35b-a3b@thor-c21-boring.json"  # promotes k3
K = 3


def _ref() -> Reference:
    return load_reference(DECISION)


def _text(drafts: int, accepted_per_position: tuple[int, ...] | None, generated: int) -> str:
    """A vLLM exposition: k=3 counters (totals since boot) and the generated-token counter."""
    labels = '{engine="0",model_name="m"}'
    lines = [f"vllm:generation_tokens_total{labels} {generated}"]
    if accepted_per_position is not None:
        lines += [
            f"vllm:spec_decode_num_drafts_total{labels} {drafts}",
            f"vllm:spec_decode_num_draft_tokens_total{labels} {K * drafts}",
            f"vllm:spec_decode_num_accepted_tokens_total{labels} {sum(accepted_per_position)}",
        ]
        per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        lines += [
            f'{per_pos}{{engine="0",model_name="m",position="{i}"}} {n}'
            for i, n in enumerate(accepted_per_position)
        ]
    return "\n".join(lines) + "\n"


def _judge(before: str, after: str, ref: Reference | None = None) -> w.WindowReport:
    ref = ref or _ref()
    return w.judge(ref, 1, parse_metrics(before), parse_metrics(after), ref.alpha)


ZERO = _text(0, (0, 0, 0), 0)


def test_a_drafter_like_the_evidence_holds() -> None:
    got = _judge(ZERO, _text(400, (390, 375, 360), 1600))
    assert got.status is w.Status.HOLDS
    assert got.rate == pytest.approx(1125 / 1200) and got.length == pytest.approx(1 + 1125 / 400)
    assert got.rate is not None and got.rate_low is not None and got.rate_high is not None
    assert got.rate_low < got.rate < got.rate_high
    assert got.length is not None and got.length_low is not None and got.length_low < got.length


def test_a_void_drafter_is_below_break_even() -> None:
    got = _judge(ZERO, _text(400, (2, 0, 0), 402))
    ref = _ref()
    assert got.status is w.Status.BELOW_BREAK_EVEN
    assert got.length_high is not None and ref.bound_length is not None and got.length_high < ref.bound_length


def test_acceptance_below_the_interval_but_above_break_even_is_below_the_evidence() -> None:
    got = _judge(ZERO, _text(4000, (3600, 3200, 2800), 13600))  # rate 0.8, length 3.4
    assert got.status is w.Status.BELOW_EVIDENCE


def test_generating_without_drafting_and_an_idle_seat() -> None:
    assert _judge(ZERO, _text(0, (0, 0, 0), 500)).status is w.Status.NO_DRAFTING
    gone = _judge(ZERO, _text(0, None, 500))  # restarted without speculation: no spec counters at all
    assert gone.status is w.Status.RESET  # the next window, both scrapes without counters, is no_drafting
    assert _judge(_text(0, None, 0), _text(0, None, 500)).status is w.Status.NO_DRAFTING
    assert _judge(ZERO, ZERO).status is w.Status.IDLE


def test_a_counter_reset_is_not_judged() -> None:
    got = _judge(_text(400, (390, 375, 360), 1600), _text(10, (9, 8, 7), 40))
    assert got.status is w.Status.RESET and "went down" in (got.note or "")


def test_an_arm_whose_evidence_is_below_break_even_is_judged_by_departure_from_it() -> None:
    """Live acceptance like the evidence holds even when the evidence itself never paid; only a drop
    below the measured length counts as below break-even."""
    ref = replace(_ref(), bound_length=4.5, length_low=3.6)
    assert _judge(ZERO, _text(400, (390, 375, 360), 1600), ref).status is w.Status.HOLDS
    assert _judge(ZERO, _text(400, (2, 0, 0), 402), ref).status is w.Status.BELOW_BREAK_EVEN


def _run(texts: list[str | None], options: w.WatchOptions) -> tuple[w.WatchResult, list[w.WindowReport]]:
    """watch() over scripted scrapes (None: unreachable), on an injected clock."""
    answers: Iterator[str | None] = iter(texts)
    seen: list[w.WindowReport] = []
    slept: list[float] = []

    async def scrape() -> w.Scrape:
        text = next(answers)
        return w.Scrape(text, None if text is not None else "GET /metrics: ConnectError")

    async def sleep_until(at: float) -> None:
        slept.append(at)

    result = asyncio.run(w.watch(_ref(), options, scrape=scrape, sleep_until=sleep_until, report=seen.append))
    assert slept == [options.window * i for i in range(1, len(slept) + 1)]
    return result, seen


def _cumulative(*windows: tuple[int, tuple[int, int, int]]) -> list[str | None]:
    """Scrapes whose windows add the given (drafts, per-position accepted) to the totals."""
    drafts, pos, generated = 0, [0, 0, 0], 0
    out: list[str | None] = [ZERO]
    for d, accepted in windows:
        drafts += d
        pos = [p + a for p, a in zip(pos, accepted, strict=True)]
        generated += d + sum(accepted)
        out.append(_text(drafts, (pos[0], pos[1], pos[2]), generated))
    return out


GOOD = (400, (390, 375, 360))
VOID = (400, (2, 0, 0))


def test_the_watch_holds_to_its_end_and_one_bad_window_is_not_a_trend() -> None:
    result, seen = _run(
        _cumulative(GOOD, VOID, GOOD, GOOD), w.WatchOptions(window=60, duration=240, confirm=2)
    )
    assert result.status is w.Status.HOLDS and result.windows == 4
    assert [s.status for s in seen] == [
        w.Status.HOLDS,
        w.Status.BELOW_BREAK_EVEN,
        w.Status.HOLDS,
        w.Status.HOLDS,
    ]


def test_a_confirmed_failure_ends_the_watch_and_idle_windows_do_not_break_the_streak() -> None:
    idle = (0, (0, 0, 0))
    result, seen = _run(_cumulative(GOOD, VOID, idle, VOID, GOOD), w.WatchOptions(60, 600, 2))
    assert result.status is w.Status.BELOW_BREAK_EVEN and result.windows == 4 and result.streak == 2
    assert len(seen) == 4  # nothing scraped after the failure was confirmed


def test_after_a_counter_reset_the_next_window_counts_from_the_new_totals() -> None:
    restarted = [_text(0, (0, 0, 0), 0), _text(400, (2, 0, 0), 402), _text(800, (4, 0, 0), 804)]
    texts = [*_cumulative(GOOD, GOOD), *restarted]
    result, seen = _run(texts, w.WatchOptions(60, 600, 2))
    statuses = [s.status for s in seen]
    assert statuses == [
        w.Status.HOLDS,
        w.Status.HOLDS,
        w.Status.RESET,
        w.Status.BELOW_BREAK_EVEN,
        w.Status.BELOW_BREAK_EVEN,
    ]
    assert result.status is w.Status.BELOW_BREAK_EVEN and seen[3].drafts == 400


def test_an_unreachable_server_is_confirmed_like_any_failure_and_answers_restart_the_baseline() -> None:
    texts: list[str | None] = [ZERO, None, _text(400, (390, 375, 360), 1600), None, None]
    result, seen = _run(texts, w.WatchOptions(60, 600, 2))
    assert [s.status for s in seen] == [w.Status.UNREACHABLE, w.Status.UNREACHABLE, w.Status.UNREACHABLE]
    assert result.status is w.Status.UNREACHABLE and result.streak == 2


def test_a_malformed_exposition_is_unreachable_naming_its_line() -> None:
    result, seen = _run(
        [ZERO, "vllm:spec_decode_num_drafts_total{engine= 1\n", None], w.WatchOptions(1, 10, 2)
    )
    assert result.status is w.Status.UNREACHABLE and (seen[0].note or "").startswith(
        "/metrics:1: not a valid"
    )


def test_metrics_url() -> None:
    assert w.metrics_url("http://h:8000") == "http://h:8000/metrics"
    assert w.metrics_url("http://h:8000/") == "http://h:8000/metrics"
    assert w.metrics_url("http://h:8000/custom/metrics") == "http://h:8000/custom/metrics"


# ---------------------------------------------------------------------------------------------------
# against tests/fakeserver.py: a good drafter, a void one, none, and no server


class Fake:
    """A fake vLLM server serving its own traffic."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE), "--port", str(self.port), "--boot-delay", "0", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/metrics", timeout=1.0)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError("the fake server did not answer in 30 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[Fake]:
    server = Fake(*request.param)
    try:
        yield server
    finally:
        server.close()


def _watch(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mtpverdict", "watch", url, "--decision", str(DECISION), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _spec(accept: float) -> tuple[str, ...]:
    return (
        "--speculative-config",
        json.dumps({"num_speculative_tokens": K, "fake_accept": accept}),
        "--traffic",
        "300",
    )


@pytest.mark.parametrize("fake", [_spec(0.98)], indirect=True)
def test_a_good_drafter_holds_for_the_whole_watch(fake: Fake) -> None:
    done = _watch(fake.url, "--window", "1s", "--for", "3s", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["reference"]["arm"] == "k3" and lines[-1]["outcome"] == "holds"
    judged = [line for line in lines[1:-1] if line["status"] == "holds"]
    assert judged and all(line["rate_low"] <= line["rate"] <= line["rate_high"] for line in judged)


@pytest.mark.parametrize("fake", [_spec(0.0)], indirect=True)
def test_a_void_drafter_is_below_break_even_within_a_few_windows(fake: Fake) -> None:
    done = _watch(fake.url, "--window", "1s", "--for", "30s")
    assert done.returncode == 6, done.stdout + done.stderr
    assert "below_break_even in 2 consecutive windows" in done.stdout


@pytest.mark.parametrize("fake", [("--traffic", "300")], indirect=True)
def test_a_seat_that_stopped_drafting(fake: Fake) -> None:
    done = _watch(fake.url, "--window", "1s", "--for", "30s")
    assert done.returncode == 8, done.stdout + done.stderr


def test_no_server_is_unreachable_and_bad_options_are_one_line() -> None:
    done = _watch(f"http://127.0.0.1:{free_port()}", "--window", "1s", "--for", "10s")
    assert done.returncode == 9 and "unreachable" in done.stdout, done.stdout + done.stderr
    bad = _watch("http://127.0.0.1:1", "--window", "soon")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--window" in bad.stderr
    none = subprocess.run(
        [
            sys.executable,
            "-m",
            "mtpverdict",
            "watch",
            "http://127.0.0.1:1",
            "--decision",
            str(ROOT / "nope.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert none.returncode == 2 and "Traceback" not in none.stderr


@pytest.mark.parametrize("fake", [("--fault", "huge-metrics:0", *_spec(0.98))], indirect=True)
def test_a_huge_exposition_is_refused_at_the_bound(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(w, "MAX_SCRAPE_BYTES", 1024 * 1024)
    seen: list[w.WindowReport] = []
    result = asyncio.run(w.watch_url(_ref(), fake.url, w.WatchOptions(0.2, 1.0, 2), seen.append))
    assert result.status is w.Status.UNREACHABLE
    assert "more than 1048576 bytes" in (seen[0].note or "")


# ---------------------------------------------------------------------------------------------------
# how a watch ends when windows failed without a confirmed streak, or when nothing was judged

BELOW = (4000, (3600, 3200, 2800))  # rate 0.8, length 3.4: below the evidence, above break-even


def test_failing_windows_of_different_statuses_make_one_streak_ending_with_the_most_severe() -> None:
    result, seen = _run(_cumulative(VOID, BELOW, VOID, BELOW), w.WatchOptions(60, 240, 2))
    assert [s.status for s in seen][:2] == [w.Status.BELOW_BREAK_EVEN, w.Status.BELOW_EVIDENCE]
    assert result.status is w.Status.BELOW_BREAK_EVEN and result.streak == 2 and result.confirmed


def test_a_watch_whose_last_windows_failed_unconfirmed_does_not_hold() -> None:
    result, _ = _run(_cumulative(GOOD, GOOD, VOID), w.WatchOptions(60, 180, 2))
    assert result.status is w.Status.BELOW_BREAK_EVEN and result.streak == 1 and not result.confirmed
    one, _ = _run(_cumulative(VOID), w.WatchOptions(1, 1, 1))
    assert one.status is w.Status.BELOW_BREAK_EVEN


def test_a_watch_that_judged_no_window_is_not_judged() -> None:
    idle = _cumulative((0, (0, 0, 0)), (0, (0, 0, 0)))
    assert _run(idle, w.WatchOptions(60, 120, 2))[0].status is w.Status.NOT_JUDGED
    assert _run(["", "", ""], w.WatchOptions(60, 120, 2))[0].status is w.Status.NOT_JUDGED
    node: list[str | None] = [f'node_cpu_seconds_total{{cpu="0"}} {i}\n' for i in range(3)]
    assert _run(node, w.WatchOptions(60, 120, 2))[0].status is w.Status.NOT_JUDGED
    resets: list[str | None] = [_text(10**6 - 100 * i, (0, 0, 0), 10**6 - 100 * i) for i in range(4)]
    assert _run(resets, w.WatchOptions(60, 180, 2))[0].status is w.Status.NOT_JUDGED
    flaky: list[str | None] = [ZERO, None, ZERO, None, ZERO]
    assert _run(flaky, w.WatchOptions(60, 240, 2))[0].status is w.Status.NOT_JUDGED


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mtpverdict", "watch", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_confirm_above_the_number_of_windows_is_refused() -> None:
    done = _cli("http://127.0.0.1:1", "--decision", str(DECISION), "--window", "1s", "--for", "1s")
    assert done.returncode == 2 and "--confirm" in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("url", ["http://[::1", "notaurl", "ftp://x/", "http://h:99999", "http://"])
def test_a_bad_url_is_bad_input_in_one_line(url: str) -> None:
    done = _cli(url, "--decision", str(DECISION), "--window", "1s", "--for", "2s")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, (
        done.stderr
    )


def test_acceptance_above_the_measured_interval_is_flagged_but_not_a_failure() -> None:
    ref = replace(_ref(), rate_high=0.9)  # the live drafter below accepts 1125/1200 = 0.94 [0.92, 0.95]
    got = _judge(ZERO, _text(400, (390, 375, 360), 1600), ref)
    assert got.status is w.Status.ABOVE_EVIDENCE and not got.status.failing


def test_a_seat_drafting_another_depth_than_the_decisions_is_warned_about() -> None:
    ref = replace(_ref(), drafted_per_step=1.0)  # a k=1 decision against this k=3 seat
    got = _judge(ZERO, _text(400, (390, 375, 360), 1600), ref)
    assert got.note is not None and "per step" in got.note and "3.00" in got.note
    assert _judge(ZERO, _text(400, (390, 375, 360), 1600)).note is None


def test_only_the_engines_counters_reach_the_parser_and_their_number_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A large exposition costs the parser only its engine counters: other series, histogram buckets
    and comments are blanked (line numbers stay), and too many engine lines are refused."""
    parsed: list[str] = []

    def recording(text: str, *, source: str = "<metrics>") -> MetricsSnapshot:
        parsed.append(text)
        return parse_metrics(text, source=source)

    monkeypatch.setattr(w, "parse_metrics", recording)
    noise = "".join(f'node_x{{b="{i}"}} 1\n' for i in range(5000))
    buckets = "".join(f'vllm:e2e_request_latency_seconds_bucket{{le="{i}"}} 1\n' for i in range(500))
    text = noise + buckets + _text(400, (390, 375, 360), 1600)

    async def scrape() -> w.Scrape:
        return w.Scrape(text, None)

    snapshot, error = asyncio.run(w._snapshot(scrape))
    assert error is None and snapshot is not None and snapshot.drafts == 400
    assert "node_x" not in parsed[0] and "_bucket" not in parsed[0]
    assert parsed[0].count("\n") == text.count("\n")  # a malformed line is still named by its number
    monkeypatch.setattr(w, "MAX_ENGINE_LINES", 3)
    snapshot, error = asyncio.run(w._snapshot(scrape))
    assert snapshot is None and error is not None and "more than 3" in error


def test_the_readme_exit_code_table_is_the_clis_codes() -> None:
    import re

    from mtpverdict.cli import _common

    codes = {v for k, v in vars(_common).items() if k.startswith("EXIT_") and isinstance(v, int)}
    readme = (ROOT / "README.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert {int(n) for n in re.findall(r"^\| (\d+) \|", readme, re.MULTILINE)} == codes
