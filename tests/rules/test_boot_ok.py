"""boot_ok: failed boots, the request error rate and the depth seen in force, against the arm's."""

from __future__ import annotations

from typing import Any

import pytest

from mtpverdict.evidence.gather import gather
from mtpverdict.evidence.model import BootInfo, Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules.kinds.boot_ok import KIND, BootFinding

from .conftest import assert_on_missing, boot, candidate, control, make_evidence, params, policy, refusals

K2 = candidate()  # k = 2


def evidence(*boots: BootInfo, requests: tuple[int, int] = (100, 0)) -> Evidence:
    return make_evidence([control(), K2], boots={"k2": boots}, request_counts={"k2": requests})


def judge(ev: Evidence, body: str = "") -> BootFinding:
    return KIND.evaluate(ev, K2, params("boot_ok", body))


def test_ready_boots_without_errors_pass() -> None:
    finding = judge(evidence(boot(1, observed_k=2), boot(2, observed_k=2)))
    assert finding == BootFinding(RuleStatus.PASS, 0, 0, 2, 2, (), 100, 0, None, False, False)


def test_a_failed_boot_beyond_the_allowance_fails() -> None:
    ev = evidence(boot(1, "failed", error="CUDA OOM"), boot(2), boot(3, "failed", error="CUDA OOM"))
    finding = judge(ev, "max_failed_boots = 1")
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.FAIL, 2, 1)
    assert (finding.ready, finding.boots, finding.failed_errors, finding.too_many_failed) == (
        1,
        3,
        ("CUDA OOM",),
        True,
    )
    assert judge(ev, "max_failed_boots = 2").status is RuleStatus.PASS


def test_an_interrupted_boot_is_neither_failed_nor_ready() -> None:
    finding = judge(evidence(boot(1), boot(2, "interrupted")))
    assert (finding.status, finding.value, finding.ready, finding.boots) == (RuleStatus.PASS, 0, 1, 2)


@pytest.mark.parametrize(("limit", "status"), [("0.03", RuleStatus.PASS), ("0.029", RuleStatus.FAIL)])
def test_the_request_error_rate(limit: str, status: RuleStatus) -> None:
    finding = judge(evidence(boot(1), requests=(100, 3)), f"max_error_rate = {limit}")
    assert (finding.status, finding.requests, finding.errors) == (status, 100, 3)
    assert finding.too_many_errors is (status is RuleStatus.FAIL)
    assert judge(evidence(boot(1), requests=(100, 1))).status is RuleStatus.FAIL  # default: none allowed


def test_a_depth_other_than_the_arms_fails() -> None:
    ev = evidence(boot(1, observed_k=4), boot(2, observed_k=3), boot(3, observed_k=2), boot(4))
    finding = judge(ev)
    assert (finding.status, finding.wrong_k) == (RuleStatus.FAIL, 3)  # the smallest wrong depth
    assert judge(ev, "check_observed_k = false").status is RuleStatus.PASS


def test_an_arm_without_a_recorded_k_has_no_depth_to_check() -> None:
    unknown = candidate(k=None)
    ev = make_evidence([control(), unknown], boots={"k2": (boot(1, observed_k=3),)}, request_counts={})
    finding = KIND.evaluate(ev, unknown, params("boot_ok"))
    assert (finding.status, finding.wrong_k) == (RuleStatus.PASS, None)


def test_requests_without_boot_records_are_judged() -> None:
    ev = make_evidence([control(), K2], request_counts={"k2": (10, 1)})
    finding = judge(ev, "max_error_rate = 0.1")
    assert (finding.status, finding.boots, finding.value) == (RuleStatus.PASS, 0, 0)


def test_no_boot_or_request_records_is_missing() -> None:
    ev = make_evidence([control(), K2], request_counts={"k2": (0, 0)})
    finding = judge(ev)
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.MISSING, None, None)
    assert_on_missing(ev, K2, "boot_ok")


def gathered() -> Evidence:
    """The same facts from records: a failed boot, a boot at the wrong depth, one failed request."""
    arms = [
        {
            "name": "off_A",
            "role": "control",
            "spec": {"method": None, "k": 0},
            "order": 1,
            "serve_argv": None,
        },
        {
            "name": "k2",
            "role": "candidate",
            "spec": {"method": "mtp", "k": 2},
            "order": 2,
            "serve_argv": None,
        },
    ]
    campaign = {
        "format": "mtpverdict.results/1",
        "id": "unit",
        "title": "boots",
        "scope": {"device": None, "engine": None, "engine_version": None, "model": None, "claim": None},
        "arms": arms,
        "workloads": [{"id": "short", "prompt_tokens": 10, "max_tokens": 8, "expect_identical": False}],
        "window_tokens": None,
    }
    records = [
        _boot("off_A", 1, 1, "ready", None),
        _boot("k2", 1, 2, "failed", None, error="OOM"),
        _boot("k2", 2, 3, "ready", 3),
        *(_request("k2", 2, rep, "error" if rep == 4 else "ok") for rep in range(1, 5)),
        _request("k2", 2, 5, "error", warmup=True),  # warm-ups are not measured
    ]
    return gather(results_from_records(campaign, records), policy())


def _boot(
    arm: str, n: int, order: int, status: str, observed_k: int | None, error: str | None = None
) -> dict[str, Any]:
    return {
        "kind": "boot",
        "arm": arm,
        "boot": n,
        "order": order,
        "status": status,
        "ready_seconds": None,
        "kv_cache_tokens": None,
        "block_size": None,
        "num_blocks": None,
        "max_model_len": None,
        "engine_version": None,
        "argv": None,
        "error": error,
        "observed_k": observed_k,
    }


def _request(arm: str, n: int, rep: int, status: str, warmup: bool = False) -> dict[str, Any]:
    return {
        "kind": "request",
        "arm": arm,
        "boot": n,
        "workload": "short",
        "concurrency": 1,
        "rep": rep,
        "warmup": warmup,
        "t_start": 0.0,
        "t_first": 0.1,
        "t_end": 1.0,
        "prompt_tokens": 10,
        "completion_tokens": 8 if status == "ok" else None,
        "status": status,
        "error": None if status == "ok" else "timeout",
    }


def test_gathered_from_records() -> None:
    finding = judge(gathered(), "max_failed_boots = 1\nmax_error_rate = 0.25")
    assert finding == BootFinding(RuleStatus.FAIL, 1, 1, 2, 1, ("OOM",), 4, 1, 3, False, False)


def test_out_of_range_keys_are_refused() -> None:
    assert refusals("boot_ok", "max_failed_boots = -1\nmax_error_rate = 2") == [
        ("rules[0].max_failed_boots", "must be >= 0, got -1"),
        ("rules[0].max_error_rate", "must be <= 1, got 2 (a fraction between 0 and 1)"),
    ]


def test_sentences() -> None:
    ev = evidence(boot(1, "failed", error="OOM"), boot(2, observed_k=3), requests=(200, 5))
    assert KIND.render(judge(ev), K2) == (
        "k2: 1 of 2 boots failed (OOM); 5 of 200 requests failed (2.5%); the server ran k=3 where the arm "
        "asks for k=2"
    )
    assert KIND.render(judge(evidence(boot(1), boot(2), requests=(50, 0))), K2) == (
        "k2: 2/2 boots ready, 0 request errors"
    )
    missing = judge(make_evidence([control(), K2]))
    assert KIND.render(missing, K2) == "k2: no boot or request records"
