"""Per-category verdicts: each dataset category a workload whose cells the arms are compared at, and the
category's acceptance and outcome reported; the arm's own verdict needs every category (IUT)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtpverdict.decide import decide
from mtpverdict.errors import PolicyError
from mtpverdict.formats.decision import Verdict
from mtpverdict.formats.policy import Policy
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.report.category_map import category_map_data
from mtpverdict.report.terminal import render_summary
from mtpverdict.report.weighted import weighted_table
from mtpverdict.rules import load_policy
from mtpverdict.sim import Scenario, SimArm, simulate_campaign

from ..conftest import ROOT

EFFECT = 0.2  # k1's true decode gain on chat (log ratio); on code the records are slowed to none


def _campaign(code_effect: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scenario = Scenario(
        name="categories",
        arms=(SimArm("off_A"), SimArm("k1", 1, EFFECT), SimArm("off_B")),
        boots_per_arm=3,
        reps=4,
        concurrency=(1, 4),
        workloads=("mixed.chat", "mixed.code"),
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(5))
    for w in campaign["workloads"]:
        w.update(category=w["id"].split(".")[1], dataset_sha256="0" * 64, dataset_seed=7)
    stretch = math.exp(EFFECT - code_effect)  # the decode window on code as if k1's gain were code_effect
    out = []
    for r in records:
        if r["kind"] == "request" and r["arm"] == "k1" and r["workload"] == "mixed.code" and r["t_end"]:
            r = {**r, "t_end": r["t_first"] + (r["t_end"] - r["t_first"]) * stretch}
        out.append(r)
    return campaign, out


def test_a_category_without_the_gain_is_reported_and_holds_the_arm_back() -> None:
    campaign, records = _campaign(code_effect=-0.1)
    decision = decide(results_from_records(campaign, records), load_policy("default"))
    found = {c.category: c for c in decision.categories}
    assert set(found) == {"chat", "code"} and all(c.arm == "k1" for c in found.values())
    assert found["chat"].outcome == "better" and found["code"].outcome != "better"
    assert found["chat"].ratio is not None and found["chat"].ratio > 1.1
    assert found["code"].ratio is not None and found["code"].ratio < 1.0
    assert decision.arm("k1").verdict is not Verdict.ELIGIBLE  # every category must hold
    for c in found.values():  # acceptance per category, with its interval around it
        assert c.acceptance_rate is not None and c.ci_low is not None and c.ci_high is not None
        assert c.ci_low <= c.acceptance_rate <= c.ci_high
        assert c.draft_tokens and c.accepted_tokens is not None


def test_a_gain_in_every_category_promotes_and_each_category_says_so() -> None:
    campaign, records = _campaign(code_effect=EFFECT)
    decision = decide(results_from_records(campaign, records), load_policy("default"))
    assert {c.category: c.outcome for c in decision.categories} == {"chat": "better", "code": "better"}
    assert decision.selected_arm == "k1"


def test_the_map_has_a_row_per_category_and_a_column_per_depth() -> None:
    campaign, records = _campaign(code_effect=-0.1)
    decision = decide(results_from_records(campaign, records), load_policy("default"))
    found = category_map_data(decision, "categories")
    assert not isinstance(found, str)
    assert found.categories == ("chat", "code") and found.columns == ("k1 (k=1)",)
    assert [[c.outcome for c in row if c is not None] for row in found.cells][0] == ["better"]


def test_a_campaign_without_categories_has_none_and_no_map() -> None:
    campaign, records = _campaign(code_effect=EFFECT)
    for w in campaign["workloads"]:
        for key in ("category", "dataset_sha256", "dataset_seed"):
            w.pop(key)
    decision = decide(results_from_records(campaign, records), load_policy("default"))
    assert decision.categories == ()
    assert isinstance(category_map_data(decision, "plain"), str)


def _weighted_policy(tmp: Path, weights: str) -> Policy:
    text = (ROOT / "rules" / "default.toml").read_text()
    text = text.replace('name = "default"', 'name = "weighted"', 1)
    path = tmp / "weighted.toml"
    path.write_text(text + f"\n[workloads.weights]\n{weights}\n")
    return load_policy(str(path))


def test_the_traffic_mix_is_compared_on_the_boots_weighted_means(tmp_path: Path) -> None:
    campaign, records = _campaign(code_effect=-0.1)
    results = results_from_records(campaign, records)
    # mostly chat traffic: the mix gains about 0.9 * 0.2 - 0.1 * 0.1 = +0.17 in log
    mostly_chat = decide(results, _weighted_policy(tmp_path, "chat = 9\ncode = 1"))
    (found,) = mostly_chat.weighted
    assert found.arm == "k1" and found.missing == ()
    assert [c for c, _ in found.shares] == ["chat", "code"]
    assert [s for _, s in found.shares] == pytest.approx([0.9, 0.1])
    assert found.outcome == "better" and found.ratio is not None
    assert math.log(found.ratio) == pytest.approx(
        -math.log(0.9 * math.exp(-EFFECT) + 0.1 * math.exp(0.1)), abs=0.03
    )
    assert found.ratio_low is not None and found.ratio_low <= found.ratio <= (found.ratio_high or 0)
    # mostly code traffic: the mix loses
    mostly_code = decide(results, _weighted_policy(tmp_path, "chat = 1\ncode = 9"))
    assert mostly_code.weighted[0].outcome in {"worse", "inconclusive", "below_min_effect", "equivalent"}
    assert mostly_code.weighted[0].outcome != "better"


def test_the_mix_is_the_seats_tokens_over_their_time_not_a_mean_of_ratios(tmp_path: Path) -> None:
    # half the tokens on chat (k1 1.22x), half on code (k1 at e^-1 = 0.37x): the seat's time per token
    # is the mean of the two, so its speed-up is 1 / (0.5 / 1.22 + 0.5 / 0.37) = 0.57x, not the
    # geometric mean of the ratios (0.67x)
    campaign, records = _campaign(code_effect=-1.0)
    decision = decide(
        results_from_records(campaign, records), _weighted_policy(tmp_path, "chat = 1\ncode = 1")
    )
    (found,) = decision.weighted
    assert found.ratio is not None
    seat = -math.log(0.5 * math.exp(-EFFECT) + 0.5 * math.exp(1.0))
    assert math.log(found.ratio) == pytest.approx(seat, abs=0.03)
    assert abs(math.log(found.ratio) - 0.5 * (EFFECT - 1.0)) > 0.1


def test_weights_at_the_end_of_the_float_range_are_normalised(tmp_path: Path) -> None:
    campaign, records = _campaign(code_effect=EFFECT)
    decision = decide(
        results_from_records(campaign, records), _weighted_policy(tmp_path, "chat = 1e308\ncode = 1e308")
    )
    (found,) = decision.weighted
    assert [s for _, s in found.shares] == pytest.approx([0.5, 0.5])
    assert found.outcome == "better"


def test_two_workloads_of_one_category_split_its_weight(tmp_path: Path) -> None:
    campaign, records = _campaign(code_effect=EFFECT)
    extra = [dict(w, id=w["id"] + "2") for w in campaign["workloads"] if w["category"] == "code"]
    campaign["workloads"] = [*campaign["workloads"], *extra]
    records = [
        *records,
        *(dict(r, workload="mixed.code2") for r in records if r.get("workload") == "mixed.code"),
    ]
    decision = decide(
        results_from_records(campaign, records), _weighted_policy(tmp_path, "chat = 1\ncode = 1")
    )
    (found,) = decision.weighted
    assert dict(found.shares) == pytest.approx({"chat": 0.5, "mixed.code": 0.25, "mixed.code2": 0.25})


def test_a_weighted_category_the_campaign_lacks_is_named_and_not_compared(tmp_path: Path) -> None:
    campaign, records = _campaign(code_effect=EFFECT)
    decision = decide(
        results_from_records(campaign, records), _weighted_policy(tmp_path, "chat = 1\nmath = 1")
    )
    (found,) = decision.weighted
    assert found.missing == ("math",) and found.outcome is None
    assert decide(results_from_records(campaign, records), load_policy("default")).weighted == ()


def test_weights_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"weighted.toml: workloads.weights.chat: .*> 0"):
        _weighted_policy(tmp_path, "chat = 0")
    with pytest.raises(PolicyError, match=r"weighted.toml: workloads.weights.chat: "):
        _weighted_policy(tmp_path, 'chat = "half"')


def test_the_mix_is_shown_in_the_terminal_and_the_report(tmp_path: Path) -> None:
    campaign, records = _campaign(code_effect=EFFECT)
    decision = decide(
        results_from_records(campaign, records), _weighted_policy(tmp_path, "chat = 3\ncode = 1")
    )
    text = render_summary(decision, "decode_tps", ["mixed.chat", "mixed.code"], width=160)
    assert "traffic mix ([workloads.weights], decode_tps" in text
    assert "chat 75%, code 25%" in text and "better" in text.split("traffic mix", 1)[1]
    table = weighted_table(decision)
    assert table is not None
    assert table.rows[0][:3] == ("k1", "chat 75%, code 25%", "better")


def test_a_mix_not_compared_says_why_in_the_reasons_and_the_terminal(tmp_path: Path) -> None:
    campaign, records = _campaign(code_effect=EFFECT)
    decision = decide(
        results_from_records(campaign, records), _weighted_policy(tmp_path, "chat = 1\nmath = 1")
    )
    assert any("[workloads.weights] names 'math'" in r for r in decision.reasons)
    assert "not compared (math not in the campaign)" in render_summary(
        decision, "decode_tps", ["mixed.chat", "mixed.code"], width=160
    )


def test_two_workloads_of_one_category_are_two_rows_of_the_map() -> None:
    campaign, records = _campaign(code_effect=EFFECT)
    extra = [dict(w, id=w["id"] + "2") for w in campaign["workloads"] if w["category"] == "code"]
    campaign["workloads"] = [*campaign["workloads"], *extra]
    records = [
        *records,
        *(dict(r, workload="mixed.code2") for r in records if r.get("workload") == "mixed.code"),
    ]
    decision = decide(results_from_records(campaign, records), load_policy("default"))
    found = category_map_data(decision, "shared")
    assert not isinstance(found, str)
    assert found.categories == ("chat", "mixed.code", "mixed.code2")
    assert all(row[0] is not None for row in found.cells)
