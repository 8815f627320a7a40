"""kv_ceiling: pool / window against min_concurrency; the pool's share of the control's against max_loss."""

from __future__ import annotations

import pytest

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.kv_ceiling import KIND

from .conftest import (
    assert_on_missing,
    candidate,
    control,
    kv,
    make_evidence,
    params,
    refusals,
    refused,
    workload,
)

K2 = candidate()
POOL = 65536
WORKLOADS = (
    workload("short", 512, 128),
    workload("long", 8000, 192),  # window 8192
    workload("unsized"),  # tokens unknown
)


def evidence(
    pool: int | None = POOL, ratio: float | None = 0.9, window_tokens: int | None = 4096
) -> Evidence:
    return make_evidence(
        [control(), K2], workloads=WORKLOADS, window_tokens=window_tokens, kv=[kv("k2", pool, ratio)]
    )


def test_the_ceiling_is_the_pool_over_the_campaign_window() -> None:
    finding = KIND.evaluate(evidence(), K2, params("kv_ceiling", "min_concurrency = 16"))
    assert finding.status is RuleStatus.PASS
    assert (finding.value, finding.ceiling, finding.window, finding.kv_cache_tokens) == (
        16.0,
        16.0,
        4096,
        POOL,
    )
    assert finding.threshold == {"min_concurrency": 16.0, "max_loss": None, "window_tokens": 4096}
    assert KIND.evaluate(evidence(), K2, params("kv_ceiling", "min_concurrency = 16.5")).status is (
        RuleStatus.FAIL
    )


@pytest.mark.parametrize(
    ("body", "window"),
    [
        ("window_tokens = 8192", 8192),
        ('workload = "long"', 8192),  # its prompt + max tokens
        ('workload = "short"', 640),
        ('workload = "unsized"', 4096),  # tokens unknown: the campaign's window
    ],
)
def test_the_window_is_the_rules_then_its_workloads_then_the_campaigns(body: str, window: int) -> None:
    finding = KIND.evaluate(evidence(), K2, params("kv_ceiling", f"min_concurrency = 1\n{body}"))
    assert finding.window == window and finding.ceiling == pytest.approx(POOL / window)
    assert isinstance(finding.threshold, dict) and finding.threshold["window_tokens"] == window


def test_no_window_is_missing() -> None:
    finding = KIND.evaluate(evidence(window_tokens=None), K2, params("kv_ceiling", "min_concurrency = 1"))
    assert (finding.status, finding.value, finding.window) == (RuleStatus.MISSING, None, None)
    assert finding.missing == "no window to divide the KV pool by"
    assert finding.threshold == {"min_concurrency": 1.0, "max_loss": None, "window_tokens": None}


@pytest.mark.parametrize(("max_loss", "status"), [(0.1, RuleStatus.PASS), (0.09, RuleStatus.FAIL)])
def test_max_loss_against_the_controls_pool(max_loss: float, status: RuleStatus) -> None:
    finding = KIND.evaluate(evidence(ratio=0.9), K2, params("kv_ceiling", f"max_loss = {max_loss}"))
    assert (finding.status, finding.value, finding.ratio_to_control) == (status, None, 0.9)
    assert finding.max_loss == max_loss


def test_no_control_pool_is_missing_unless_the_ceiling_already_failed() -> None:
    body = "min_concurrency = 8\nmax_loss = 0.1"
    finding = KIND.evaluate(evidence(ratio=None), K2, params("kv_ceiling", body))
    assert (finding.status, finding.value) == (RuleStatus.MISSING, 16.0)
    assert finding.missing == "no control KV pool to compare with"
    failing = KIND.evaluate(
        evidence(ratio=None), K2, params("kv_ceiling", "min_concurrency = 32\nmax_loss = 0.1")
    )
    assert (failing.status, failing.value) == (RuleStatus.FAIL, 16.0)


def test_either_threshold_failing_fails() -> None:
    body = "min_concurrency = 8\nmax_loss = 0.05"
    assert KIND.evaluate(evidence(ratio=0.9), K2, params("kv_ceiling", body)).status is RuleStatus.FAIL
    body = "min_concurrency = 32\nmax_loss = 0.5"
    assert KIND.evaluate(evidence(ratio=0.9), K2, params("kv_ceiling", body)).status is RuleStatus.FAIL


def test_no_pool_is_missing() -> None:
    finding = KIND.evaluate(evidence(pool=None), K2, params("kv_ceiling", "min_concurrency = 1"))
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.MISSING, None, None)
    assert finding.missing == "no KV pool recorded"
    assert_on_missing(evidence(pool=None), K2, "kv_ceiling", "min_concurrency = 1")


def test_a_workload_the_campaign_lacks_is_not_a_crash() -> None:
    finding = KIND.evaluate(evidence(), K2, params("kv_ceiling", 'min_concurrency = 1\nworkload = "nope"'))
    assert finding.status is RuleStatus.MISSING


def test_contradictions_are_refused() -> None:
    assert refusals("kv_ceiling", 'workload = "long"') == [
        ("rules[0]", "sets no threshold; give min_concurrency or max_loss")
    ]
    body = 'min_concurrency = 1\nwindow_tokens = 8192\nworkload = "long"'
    assert refused("kv_ceiling", body, "rules[0].window_tokens", "give window_tokens or workload, not both")
    assert refused("kv_ceiling", "max_loss = 1.5", "rules[0].max_loss", "fraction")
    assert refused("kv_ceiling", "min_concurrency = 1\nwindow_tokens = 0", "rules[0].window_tokens", ">= 1")


def test_sentences() -> None:
    rule = params("kv_ceiling", "min_concurrency = 8\nmax_loss = 0.2")
    assert KIND.render(KIND.evaluate(evidence(), K2, rule), K2) == (
        "k2: KV pool 65,536 tokens, ceiling 16.00x at 4,096 tokens, 90% of the control's pool "
        "(a ceiling, not measured concurrency)"
    )
    rule = params("kv_ceiling", "min_concurrency = 20\nmax_loss = 0.05")
    assert KIND.render(KIND.evaluate(evidence(), K2, rule), K2) == (
        "k2: KV pool 65,536 tokens, ceiling 16.00x at 4,096 tokens, 90% of the control's pool; "
        "ceiling 16.00x is below the 20.0x minimum; keeps 90% of the control's pool, a loss beyond 5%"
    )
    rule = params("kv_ceiling", "min_concurrency = 1")
    assert KIND.render(KIND.evaluate(evidence(pool=None), K2, rule), K2) == "k2: no KV pool recorded"
