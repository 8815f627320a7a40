"""Prometheus snapshots: sums over engines, counter deltas, void windows, observed depth, bad input."""

from __future__ import annotations

import pytest

from mtpverdict.errors import EngineTextError
from mtpverdict.parse import (
    AcceptanceReading,
    MetricsSnapshot,
    VoidWindow,
    acceptance_delta,
    observed_k,
    parse_metrics,
)

from .support import ENGINE_CASES


def _vllm(
    drafts: float, drafted: float, accepted: float, per_pos: tuple[float, ...], engines: int = 1
) -> str:
    lines = []
    for name, value in (
        ("vllm:spec_decode_num_drafts", drafts),
        ("vllm:spec_decode_num_draft_tokens", drafted),
        ("vllm:spec_decode_num_accepted_tokens", accepted),
    ):
        lines += [f"# HELP {name}_total counter.", f"# TYPE {name}_total counter"]
        lines += [f'{name}_total{{engine="{e}",model_name="m"}} {value / engines}' for e in range(engines)]
        lines += [f"# TYPE {name}_created gauge", f'{name}_created{{engine="0",model_name="m"}} 1.7e9']
    name = "vllm:spec_decode_num_accepted_tokens_per_pos"
    lines += [f"# TYPE {name}_total counter"]
    for e in range(engines):
        lines += [
            f'{name}_total{{engine="{e}",model_name="m",position="{p}"}} {v / engines}'
            for p, v in enumerate(per_pos)
        ]
    return "\n".join(lines) + "\n"


def test_delta_of_two_scrapes() -> None:
    before = parse_metrics(_vllm(100, 300, 200, (90, 70, 40)))
    after = parse_metrics(_vllm(160, 480, 290, (140, 100, 50)))
    delta = acceptance_delta(before, after)
    assert delta == AcceptanceReading(
        source="metrics",
        scoped="window",
        kind="counter_delta",
        drafts=60,
        draft_tokens=180,
        accepted_tokens=90,
        accepted_per_position=(50, 30, 10),
    )
    assert observed_k(after) == 3


def test_counters_are_summed_over_data_parallel_engines() -> None:
    snapshot = parse_metrics(_vllm(200, 600, 300, (150, 100, 50), engines=2))
    assert (snapshot.drafts, snapshot.draft_tokens, snapshot.accepted_tokens) == (200, 600, 300)
    assert snapshot.accepted_per_position == ((0, 150), (1, 100), (2, 50))
    assert snapshot.engine == "vllm"


@pytest.mark.parametrize(
    ("before", "after", "reason"),
    [
        ((100, 300, 200, (90, 70, 40)), (10, 30, 20, (9, 7, 4)), "went down"),
        ((100, 300, 200, (90, 70, 40)), (100, 300, 210, (95, 70, 45)), "accepted but only"),
        ((100, 300, 200, (90, 70, 40)), (120, 340, 220, (100, 80)), "draft positions changed"),
        ((100, 300, 200, (90, 70, 40)), (120, 360, 230, (95, 60, 75)), "per-position counter 1 went down"),
    ],
)
def test_void_windows(before: tuple, after: tuple, reason: str) -> None:  # type: ignore[type-arg]
    result = acceptance_delta(parse_metrics(_vllm(*before)), parse_metrics(_vllm(*after)))
    assert isinstance(result, VoidWindow)
    assert reason in result.reason


def test_restart_is_void_with_a_reason_naming_the_counter() -> None:
    result = acceptance_delta(
        parse_metrics(_vllm(100, 300, 200, (90, 70, 40))), parse_metrics(_vllm(5, 15, 9, (4, 3, 2)))
    )
    assert isinstance(result, VoidWindow)
    assert "spec_decode_num_drafts went down from 100 to 5" in result.reason
    assert "restarted" in result.reason


def test_gauges_cannot_be_differenced() -> None:
    text = (ENGINE_CASES / "sglang" / "metrics_sglang.txt").read_text()
    snapshot = parse_metrics(text)
    assert acceptance_delta(snapshot, snapshot) is None
    assert [r.kind for r in snapshot.readings()] == ["gauge"]
    assert observed_k(snapshot) is None


def test_spec_off_vllm_has_depth_zero() -> None:
    snapshot = parse_metrics((ENGINE_CASES / "vllm" / "metrics_no_spec.txt").read_text())
    assert observed_k(snapshot) == 0
    assert acceptance_delta(snapshot, snapshot) is None
    assert snapshot.generation_tokens == 4096


def test_llamacpp_counters_and_depth() -> None:
    snapshot = parse_metrics((ENGINE_CASES / "llamacpp" / "metrics_llamacpp.txt").read_text())
    assert snapshot.engine == "llamacpp"
    assert observed_k(snapshot) == 4
    assert snapshot.prompt_tokens == 3054060
    assert snapshot.generation_tokens == 812345


def test_counter_present_in_one_scrape_only_is_void() -> None:
    full = parse_metrics(_vllm(100, 300, 200, (90, 70, 40)))
    bare = parse_metrics('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 1\n')
    result = acceptance_delta(bare, full)
    assert isinstance(result, VoidWindow)


def test_fractional_counter_is_left_out_with_a_warning() -> None:
    snapshot = parse_metrics(
        "# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total 1.5\n"
    )
    assert snapshot.drafts is None
    assert any("not a whole count" in w for w in snapshot.warnings)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("# TYPE vllm:x counter\nvllm:x_total{engine=0} 1\n", 2),
        ('vllm:spec_decode_num_drafts_total{engine="0"} one\n', 1),
        ('# TYPE a gauge\na 1\nvllm:x{a="1" 2\n', 3),
    ],
)
def test_malformed_exposition_names_the_line(text: str, line: int) -> None:
    with pytest.raises(EngineTextError) as info:
        parse_metrics(text, source="scrape.txt")
    problem = info.value.problems[0]
    assert problem.source == "scrape.txt"
    assert problem.line == line
    assert str(problem).startswith(f"scrape.txt:{line}: not a valid Prometheus text exposition")


def test_snapshot_is_frozen() -> None:
    snapshot = parse_metrics(_vllm(1, 3, 2, (1, 1, 0)))
    assert isinstance(snapshot, MetricsSnapshot)
    with pytest.raises(AttributeError):
        snapshot.drafts = 5  # type: ignore[misc]
