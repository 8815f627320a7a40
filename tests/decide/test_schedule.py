"""The regime map and schedules: per-cell outcomes against off, the best-supported depth, and a depth
per batch-size range compiled into vLLM's --speculative-config, through `decide` on simulated campaigns."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from mtpverdict.decide import decide
from mtpverdict.decide.regime import Choice
from mtpverdict.decide.schedule import segments
from mtpverdict.errors import PolicyError
from mtpverdict.formats.decision import Decision
from mtpverdict.formats.policy import Beyond
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.report.terminal import render_summary
from mtpverdict.rules.registry import parse_rules
from mtpverdict.sim import Scenario, SimArm, simulate_campaign

from ..conftest import ROOT

DEFAULT = (ROOT / "rules" / "default.toml").read_text()


def _policy(selection: str = "", rules_from: str = DEFAULT) -> Any:
    """The default policy asking for a schedule, with extra [selection] keys."""
    text = rules_from.replace('mode = "fastest"', 'mode = "schedule"\n' + selection)
    return parse_rules(text, "schedule.toml")


def _slope(at_1: float, at_8: float) -> float:
    """The per-doubling log slope from a gain at c=1 to a gain at c=8."""
    return (math.log1p(at_8) - math.log1p(at_1)) / 3


def _arm(name: str, k: int, at_1: float = 0.0, at_8: float | None = None) -> SimArm:
    at_8 = at_1 if at_8 is None else at_8
    return SimArm(name, k, math.log1p(at_1), _slope(at_1, at_8))


def _decide(
    arms: tuple[SimArm, ...],
    policy: Any = None,
    *,
    concurrency: tuple[int, ...] = (1, 2, 4, 8),
    seed: int = 1,
    edit: Any = None,
) -> Decision:
    scenario = Scenario(
        name="schedule",
        arms=(SimArm("off_A"), *arms, SimArm("off_B")),
        boots_per_arm=3,
        reps=2,
        concurrency=concurrency,
        completion_tokens=128,
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(seed))
    if edit is not None:
        edit(campaign, records)
    return decide(results_from_records(campaign, records, label="schedule"), policy or _policy())


def _ranges(d: Decision) -> list[tuple[int, int, int]]:
    assert d.schedule is not None
    return [(r.start, r.end, r.k) for r in d.schedule.ranges]


CROSSOVER = (_arm("k1", 1), _arm("k2", 2, 0.30, -0.15), _arm("k3", 3))


# ---------------------------------------------------------------------------------------------------
# the regime map


def test_the_map_is_the_family_procedures_per_cell_outcomes() -> None:
    d = _decide(CROSSOVER)
    assert [(c.workload, c.concurrency) for c in d.regime] == [
        ("chat", 1),
        ("chat", 2),
        ("chat", 4),
        ("chat", 8),
    ]
    for cell in d.regime:
        for entry in cell.depths:
            comp = d.comparison(entry.arm, cell.workload, cell.concurrency, "decode_tps")
            assert comp is not None
            assert (entry.outcome, entry.ratio, entry.ci_low, entry.ci_high) == (
                comp.outcome,
                comp.ratio,
                comp.ci_low,
                comp.ci_high,
            )
    k2 = {c.concurrency: next(e for e in c.depths if e.arm == "k2") for c in d.regime}
    assert k2[1].outcome == "better" and k2[8].outcome in ("worse", "below_min_effect")
    assert k2[1].ci_low is not None and k2[1].ci_low > 1.2
    best = [(c.concurrency, c.best_arm, c.best_k) for c in d.regime]
    assert best[0] == (1, "k2", 2) and best[2:] == [(4, None, 0), (8, None, 0)]


def test_the_map_keeps_the_smaller_depth_unless_a_deeper_one_is_resolved_better() -> None:
    # k1 and k2 both clearly beat off; k2's lead over k1 (+1%) is far inside the floor
    d = _decide((_arm("k1", 1, 0.20), _arm("k2", 2, 0.21)), concurrency=(1, 4))
    for cell in d.regime:
        assert cell.best_arm == "k1" and not cell.resolved
        assert "no deeper depth is resolved better than k1" in cell.why
    # a clear lead is resolved, with the pairwise step's alpha counted over the cells that need it
    d = _decide((_arm("k1", 1, 0.10), _arm("k2", 2, 0.30)), concurrency=(1, 4))
    for cell in d.regime:
        assert cell.best_arm == "k2" and cell.resolved
        assert "alpha 0.025" in cell.why  # 0.05 / 2 cells needing the step


def test_off_is_resolved_only_when_every_depth_is_shown_not_better() -> None:
    d = _decide((_arm("k1", 1, -0.20), _arm("k2", 2, -0.30)), concurrency=(1, 4))
    assert all(c.best_k == 0 and c.resolved for c in d.regime)
    settled = {"worse", "equivalent", "below_min_effect"}
    seen = set()
    for seed in (1, 3):
        for cell in _decide((_arm("k1", 1), _arm("k2", 2)), concurrency=(1, 4), seed=seed).regime:
            assert cell.best_k == 0
            assert cell.resolved == all(e.outcome in settled for e in cell.depths)
            seen.add(cell.resolved)
            if not cell.resolved:
                assert cell.why.endswith("off, the boring choice")
    assert seen == {True, False}


# ---------------------------------------------------------------------------------------------------
# schedules


def test_a_crossover_becomes_a_schedule_and_vllms_json() -> None:
    d = _decide(CROSSOVER, concurrency=(1, 2, 8))
    assert str(d.decision) == "promote" and d.selected is None
    assert _ranges(d) == [(1, 2, 2), (3, 1024, 0)]
    assert d.schedule is not None and d.schedule.speculative_config is not None
    assert json.loads(d.schedule.speculative_config) == {
        "method": "mtp",
        "num_speculative_tokens": 2,
        "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 1024, 0]],
    }
    text = "\n".join(d.reasons)
    assert "batch sizes 3-7: between c=2 (k=2) and c=8 (k=0), which differ" in text
    assert "beyond the largest measured concurrency c=8; not measured, so off runs" in text
    assert "schedule mode: faster_than_off asks k2 for a gain at every concurrency at once" in text
    assert d.arm("k2").verdict == "rejected"  # its verdict over every concurrency at once is unchanged


def test_no_true_difference_never_switches() -> None:
    d = _decide((_arm("k1", 1), _arm("k2", 2), _arm("k3", 3)))
    assert str(d.decision) == "inconclusive"
    assert _ranges(d) == [(1, 1024, 0)]
    assert d.schedule is not None and d.schedule.speculative_config is None
    assert d.schedule.note == "no range speculates: serve without --speculative-config"


def test_a_depth_losing_everywhere_keeps_speculation_off() -> None:
    d = _decide((_arm("k1", 1, -0.25), _arm("k2", 2, -0.30)), concurrency=(1, 4))
    assert str(d.decision) == "keep_mtp_disabled"
    assert _ranges(d) == [(1, 1024, 0)]


def test_beyond_the_largest_measured_concurrency_is_stated_and_chosen_by_the_policy() -> None:
    win = (_arm("k2", 2, 0.30),)
    assert _ranges(_decide(win, concurrency=(1, 4))) == [(1, 4, 2), (5, 1024, 0)]
    extend = _policy('beyond = "extend"\nmax_batch = 64')
    d = _decide(win, extend, concurrency=(2, 4))
    assert _ranges(d) == [(1, 64, 2)]
    text = "\n".join(d.reasons)
    assert "batch size 1: below the smallest measured concurrency c=2; its depth carries on" in text
    assert "between c=2 and c=4, which both run k=2: it holds between" in text


def test_between_measured_concurrencies_that_differ_runs_the_baseline() -> None:
    k2 = Choice(_stub_arm(2), True, (), "k2 wins")
    off = Choice(None, True, (), "off")
    pieces = segments([2, 8], [k2, off], off, Beyond.BASELINE, 16)
    assert [(p.start, p.end, p.choice.k) for p in pieces] == [
        (1, 1, 0),
        (2, 2, 2),
        (3, 7, 0),
        (8, 8, 0),
        (9, 16, 0),
    ]
    assert "which differ: nothing measured supports a switch there, so off runs" in pieces[2].reason
    pieces = segments([2, 8], [k2, off], off, Beyond.EXTEND, 16)
    assert [(p.start, p.end, p.choice.k) for p in pieces] == [
        (1, 1, 2),
        (2, 2, 2),
        (3, 7, 0),
        (8, 8, 0),
        (9, 16, 0),
    ]


def _stub_arm(k: int) -> Any:
    from mtpverdict.formats.results import Arm, Method, Role, Spec

    return Arm(f"k{k}", Role.CANDIDATE, Spec(Method.MTP, k), 2, None)


def test_a_reference_is_kept_unless_something_beats_it_at_a_concurrency() -> None:
    arms = (_arm("k1", 1, 0.15), _arm("k2", 2, 0.45, 0.0))  # k2 leaves k1 far behind at c=1 only
    d = _decide(arms, _policy('reference = "k1"'), concurrency=(1, 8))
    assert d.schedule is not None and d.schedule.baseline == "k1"
    assert _ranges(d) == [(1, 1, 2), (2, 1024, 1)]
    assert "k2 is better than the reference k1 beyond the floor" in d.schedule.ranges[0].reasons[0]
    same = (_arm("k1", 1, 0.15), _arm("k2", 2, 0.15))
    kept = _decide(same, _policy('reference = "k1"'), concurrency=(1, 8))
    assert str(kept.decision) == "keep_reference" and kept.selected is not None
    assert kept.selected.arm == "k1"


def test_a_quality_veto_keeps_an_arm_out_of_the_schedule() -> None:
    def void_k2(campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
        for rec in records:
            if rec["kind"] == "acceptance" and rec["arm"] == "k2":
                rec["accepted_tokens"] = 0
                rec["accepted_per_position"] = [0] * len(rec["accepted_per_position"])

    d = _decide(CROSSOVER, edit=void_k2)
    assert d.arm("k2").verdict == "void"
    assert all(r.arm != "k2" for r in (d.schedule.ranges if d.schedule else ()))


def test_the_speculative_config_keeps_the_arms_other_settings() -> None:
    def ngram(campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
        argv = {}
        for arm in campaign["arms"]:
            if arm["spec"]["k"]:
                config = {
                    "method": "ngram",
                    "num_speculative_tokens": arm["spec"]["k"],
                    "prompt_lookup_max": 4,
                }
                arm["spec"]["method"] = "ngram"
                arm["serve_argv"] = ["--model", "synthetic", "--speculative-config", json.dumps(config)]
                argv[arm["name"]] = arm["serve_argv"]
        for rec in records:
            if rec["kind"] == "boot" and rec["arm"] in argv:
                rec["argv"] = argv[rec["arm"]]

    d = _decide(CROSSOVER, concurrency=(1, 2, 8), edit=ngram)
    assert d.schedule is not None and d.schedule.speculative_config is not None
    assert json.loads(d.schedule.speculative_config) == {
        "method": "ngram",
        "num_speculative_tokens": 2,
        "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 1024, 0]],
        "prompt_lookup_max": 4,
    }


def test_depths_with_different_settings_cannot_share_a_schedule() -> None:
    def mixed(campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
        for arm in campaign["arms"]:
            if arm["name"] == "k3":
                config = {"method": "mtp", "num_speculative_tokens": 3, "enforce_eager": True}
                arm["serve_argv"] = ["--model", "synthetic", "--speculative-config", json.dumps(config)]
        for rec in records:
            if rec["kind"] == "boot" and rec["arm"] == "k3":
                rec["argv"] = None

    d = _decide(CROSSOVER, edit=mixed)
    assert str(d.decision) == "inconclusive" and d.schedule is None
    assert "a schedule varies the depth only" in d.reasons[0]


def test_the_terminal_shows_the_map_and_the_schedule() -> None:
    d = _decide(CROSSOVER, concurrency=(1, 2, 8))
    text = render_summary(d, "decode_tps", ["chat"])
    assert "regime map (decode_tps against off per cell" in text
    assert "chat c=8" in text and "k2 (k=2)" in text
    assert "batch sizes 1-2: k=2 (k2)  measured at c=1, 2" in text
    assert 'vLLM: --speculative-config \'{"method":"mtp"' in text


# ---------------------------------------------------------------------------------------------------
# the policy keys


def test_schedule_keys_are_read_and_checked() -> None:
    policy = _policy('beyond = "extend"\nmax_batch = 256')
    assert (str(policy.selection.mode), str(policy.selection.beyond), policy.selection.max_batch) == (
        "schedule",
        "extend",
        256,
    )
    with pytest.raises(PolicyError, match="selection.beyond"):
        _policy('beyond = "guess"')
    with pytest.raises(PolicyError, match="selection.max_batch"):
        _policy("max_batch = 0")


# ---------------------------------------------------------------------------------------------------
# the confirmation arm: an arm that ran the schedule itself


SCHEDULE_18 = [[1, 1, 2], [2, 1024, 0]]  # k2 at batch size 1, off from 2: the crossover at c=1 and c=8


def _serving(schedule: list[list[int]]) -> Any:
    """An edit serving the `sched` arm with `schedule` (k = its largest depth)."""

    def edit(campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
        config = {
            "method": "mtp",
            "num_speculative_tokens": max(k for _, _, k in schedule),
            "num_speculative_tokens_per_batch_size": schedule,
        }
        argv = ["--model", "synthetic", "--speculative-config", json.dumps(config)]
        for arm in campaign["arms"]:
            if arm["name"] == "sched":
                arm["serve_argv"] = argv
        for rec in records:
            if rec["kind"] == "boot" and rec["arm"] == "sched":
                rec["argv"] = argv

    return edit


_with_schedule_arm = _serving(SCHEDULE_18)  # k2 at batch size 1, off from 2


def _sched(at_1: float, at_8: float) -> SimArm:
    return SimArm("sched", 2, effect_at=((1, math.log1p(at_1)), (8, math.log1p(at_8))))


def test_an_arm_running_the_schedule_confirms_it() -> None:
    arms = (*CROSSOVER, _sched(0.30, 0.0))  # as k2 at batch size 1, as off from 2
    d = _decide(arms, _policy("confirm = true"), concurrency=(1, 8), edit=_with_schedule_arm)
    assert str(d.decision) == "promote" and d.schedule is not None
    assert _ranges(d) == [(1, 1, 2), (2, 1024, 0)]  # the schedule arm is not a depth of it
    assert d.schedule.confirmed is True
    (line,) = d.schedule.confirmation
    assert line.startswith("confirmation arm sched confirms the schedule: c=1: sched vs off better")
    assert "vs k2 " in line and "c=8: sched runs k=0" not in line
    assert [e.k for e in d.regime[0].depths if e.arm == "sched"] == [None]  # it runs several depths


def test_an_arm_running_the_schedule_that_gains_nothing_does_not_confirm_it() -> None:
    arms = (*CROSSOVER, _sched(0.0, 0.0))  # the engine's switching costs the gain away
    kept = _decide(arms, _policy(), concurrency=(1, 8), edit=_with_schedule_arm)
    assert str(kept.decision) == "promote" and kept.schedule is not None and kept.schedule.confirmed is False
    assert kept.schedule.confirmation[0].startswith("confirmation arm sched does not confirm the schedule")
    required = _decide(arms, _policy("confirm = true"), concurrency=(1, 8), edit=_with_schedule_arm)
    assert str(required.decision) == "inconclusive"
    assert (
        "only when an arm that ran it confirms it ([selection] confirm); none confirms it"
        in required.reasons[0]
    )


def test_requiring_confirmation_without_a_schedule_arm_is_inconclusive() -> None:
    d = _decide(CROSSOVER, _policy("confirm = true"), concurrency=(1, 8))
    assert str(d.decision) == "inconclusive" and d.schedule is not None and d.schedule.confirmed is None
    assert d.reasons[0].endswith("none ran it")


def test_a_depth_better_everywhere_is_the_default_and_the_schedule_does_not_wander() -> None:
    """synthetic-void-arm: k1 +10% and k3 +14% at every concurrency. Per cell (Holm across every arm
    and cell) the gains are resolved only at some concurrencies; a schedule built from those alone ran
    off, k3, off. The fixed-depth verdict (k1 better at every cell) is the default instead, and only a
    difference resolved at a concurrency departs from it."""
    from mtpverdict.decide import decide_directory

    from ..conftest import FIXTURES

    policy = _policy()
    d = decide(decide_directory(FIXTURES / "synthetic-void-arm").results, policy)
    assert _ranges(d) == [(1, 8, 1), (9, 1024, 0)]
    assert "k1 is better than off at every measured cell (the fixed-depth verdict)" in "\n".join(d.reasons)
    assert d.schedule is not None
    assert "else the default depth (k=1, better than off everywhere)" in d.schedule.rule  # as it runs


def test_outside_schedule_mode_an_arm_that_ran_a_schedule_is_never_selected_as_one_depth() -> None:
    """It drafted k=2 only where its schedule said: promoting it as "k=2" would deploy what never ran."""
    fixed = parse_rules(DEFAULT, "default.toml")
    alone = _decide((_arm("k1", 1), _sched(0.30, 0.30)), fixed, concurrency=(1, 8), edit=_with_schedule_arm)
    assert str(alone.decision) == "inconclusive" and alone.selected is None
    assert any("sched ran a per-batch-size schedule" in r and 'mode = "schedule"' in r for r in alone.reasons)
    beside = _decide(
        (_arm("k1", 1, 0.15), _sched(0.30, 0.30)), fixed, concurrency=(1, 8), edit=_with_schedule_arm
    )
    assert str(beside.decision) == "promote"
    assert beside.selected is not None and beside.selected.arm == "k1"


def test_under_a_reference_a_range_that_keeps_it_is_confirmed_by_running_like_it() -> None:
    """With `reference = "k1"` a range that keeps k1 claims only that nothing beats k1 there, not a gain
    over off: an arm that runs k1 there as k1 does confirms it, though k1 is no faster than off. Where
    k2 beat k1 (c=1) the arm must beat k1 too."""
    arms = (_arm("k1", 1), _arm("k2", 2, 0.45, 0.0), _sched(0.45, 0.0))
    edit = _serving([[1, 1, 2], [2, 1024, 1]])
    d = _decide(arms, _policy('reference = "k1"\nconfirm = true'), concurrency=(1, 8), edit=edit)
    assert d.schedule is not None and _ranges(d) == [(1, 1, 2), (2, 1024, 1)]
    assert d.schedule.confirmed is True, d.schedule.confirmation
    assert str(d.decision) == "promote"
    line = d.schedule.confirmation[0]
    assert "c=1: sched vs off better" in line and "vs k1 better" in line and "vs k2 " in line
    assert "c=8: sched vs off " in line and line.endswith(")") and "vs k1 " in line.split("c=8")[1]
    slower = (*arms[:2], _sched(0.45, -0.20))  # the engine's switching costs k1's pace at c=8
    d = _decide(slower, _policy('reference = "k1"\nconfirm = true'), concurrency=(1, 8), edit=edit)
    assert d.schedule is not None and d.schedule.confirmed is False
    assert "c=8: sched vs off worse" in d.schedule.confirmation[0]
