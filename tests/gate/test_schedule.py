"""The gate with schedules and context envelopes: each batch-size range against the evidence, the
proposal's method and settings per depth, and the context a serve config allows against the envelope
in which a promotion holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpverdict.formats.decision import ContextEnvelope, Schedule, ScheduleRange
from mtpverdict.gate import ArmEvidence, GateEvidence, context_limit, differences, evaluate, parse_spec
from mtpverdict.serveconfig import ServeConfig

from ..conftest import FIXTURES, ROOT, run_cli

CROSSOVER = FIXTURES / "synthetic-crossover"
BASE = ("--model", "synthetic")


def _config(k: int, table: list[list[int]] | None = None, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    spec: dict[str, object] = {"method": "mtp", "num_speculative_tokens": k}
    if table is not None:
        spec["num_speculative_tokens_per_batch_size"] = table
    return (*BASE, "--speculative-config", json.dumps(spec), *extra)


def _arm(name: str, k: int | None, extra: tuple[str, ...] = ()) -> ArmEvidence:
    argv = (*BASE, *extra) if k is None else _config(k, extra=extra)
    verdict = "control" if k is None else "eligible"
    return ArmEvidence(name, k is None, None if k is None else "mtp", k, verdict, (), argv, argv, ("0.32.0",))


def _schedule(*ranges: tuple[int, int, int]) -> Schedule:
    return Schedule(
        family="default",
        metric="decode_tps",
        baseline=None,
        method="mtp",
        ranges=tuple(
            ScheduleRange(a, b, k, f"k{k}" if k else None, (), (f"measured k={k}",)) for a, b, k in ranges
        ),
        rule="stated",
        speculative_config=None,
        note=None,
    )


def _evidence(
    schedule: Schedule | None, envelopes: tuple[ContextEnvelope, ...] = (), extra: tuple[str, ...] = ()
) -> GateEvidence:
    """A promotion (of k2, or of a schedule) whose arms were served with `extra` arguments."""
    return GateEvidence(
        decision="promote",
        selected=None if schedule is not None else "k2",
        reasons=("the decision's own reason",),
        arms=tuple(_arm(n, k, extra) for n, k in (("off_A", None), ("k1", 1), ("k2", 2), ("off_B", None))),
        engine_version=None,
        schedule=schedule,
        envelopes=envelopes,
    )


CROSS = _schedule((1, 2, 2), (3, 1024, 0))


def test_each_range_of_a_proposed_schedule_is_checked_against_the_decisions() -> None:
    same = evaluate(_evidence(CROSS), None, ServeConfig(_config(2, [[1, 2, 2], [3, 64, 0]]), None, "s.argv"))
    assert same.supported, same.reasons
    assert "batch sizes 1-2 k=2, batch sizes 3 and above k=0" in same.reasons[0]
    longer = evaluate(
        _evidence(CROSS), None, ServeConfig(_config(2, [[1, 4, 2], [5, 64, 0]]), None, "s.argv")
    )
    assert not longer.supported
    assert "batch sizes 3-4: proposing k=2, but the evidence runs k=0 there" in longer.reasons
    assert "decision schedule batch sizes 1-2: k=2: measured k=2" in longer.reasons


def test_a_fixed_depth_or_off_against_a_schedule_is_refused_where_they_differ() -> None:
    fixed = evaluate(_evidence(CROSS), parse_spec("k=2"), None)
    assert not fixed.supported
    assert fixed.reasons[0] == "batch sizes 3 and above: proposing k=2, but the evidence runs k=0 there"
    off = evaluate(_evidence(CROSS), parse_spec("off"), None)
    assert (
        not off.supported
        and off.reasons[0] == "batch sizes 1-2: proposing k=0, but the evidence runs k=2 there"
    )


def test_a_schedule_against_a_single_depth_decision() -> None:
    evidence = _evidence(None)  # promote k2 at every batch size
    switching = evaluate(evidence, None, ServeConfig(_config(2, [[1, 8, 2], [9, 64, 0]]), None, "s.argv"))
    assert not switching.supported
    assert "batch sizes 9 and above: proposing k=0, but the evidence runs k=2 there" in switching.reasons
    whole = evaluate(evidence, None, ServeConfig(_config(2, [[1, 64, 2]]), None, "s.argv"))
    assert whole.supported, whole.reasons


def test_a_depth_no_arm_measured_in_those_settings_has_no_evidence() -> None:
    other = (*BASE, "--speculative-config", json.dumps(_spec_with("enforce_eager", True)))
    found = evaluate(_evidence(CROSS), None, ServeConfig(other, None, "s.argv"))
    assert not found.supported
    assert any(r.startswith("k=2: no evidence for this configuration") for r in found.reasons)


def _spec_with(key: str, value: object) -> dict[str, object]:
    return {
        "method": "mtp",
        "num_speculative_tokens": 2,
        "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 64, 0]],
        key: value,
    }


def test_differences_follow_vllms_carry_forward() -> None:
    # vLLM fills a gap with the previous range's depth and carries the last range on past its end
    assert differences([(1, 2, 2), (3, 1024, 0)], [(1, 2, 2), (3, 3, 0)]) == []
    assert differences([(1, 2, 2), (3, 1024, 0)], [(1, 4, 2)]) == [(3, 0, 2, 0)]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--max-model-len", "32768"), ("--max-model-len", 32768)),
        (("--max_model_len=32K",), ("--max-model-len", 32768)),
        (("--max-model-len", "25.6k"), ("--max-model-len", 25600)),
        (("--max-model-len", "auto"), ("--max-model-len", None)),
        (("--context-length", "4096"), ("--context-length", 4096)),
        (("-c", "0"), ("-c", None)),
        (("--port", "8000"), None),
    ],
)
def test_the_context_a_serve_command_allows(argv: tuple[str, ...], expected: object) -> None:
    assert context_limit(("serve", "m", *argv)) == expected


ENVELOPE = ContextEnvelope(
    "k2", "long-context", 6146, 34819, False, "k2 holds only below 34,819 prompt tokens"
)


def test_a_serve_config_reaching_beyond_the_envelope_is_refused() -> None:
    def gate(measured: tuple[str, ...], envelope: ContextEnvelope = ENVELOPE) -> tuple[bool, tuple[str, ...]]:
        found = evaluate(
            _evidence(None, (envelope,), measured),
            None,
            ServeConfig(_config(2, extra=measured), None, "s.argv"),
        )
        return found.supported, found.reasons

    ok, reasons = gate(("--max-model-len", "32K"))
    assert ok, reasons
    assert "context within the envelope (long-context): --max-model-len 32,768 < 34,819" in reasons
    ok, reasons = gate(("--max-model-len", "64k"))  # fresh evidence, but prompts reach the loss
    assert not ok
    assert any("s.argv allows 64,000 tokens (--max-model-len): set it below 34,819" in r for r in reasons)
    ok, reasons = gate(())
    assert not ok and any("s.argv sets no context limit" in r for r in reasons)
    accepted = ContextEnvelope("k2", "long-context", 6146, 34819, True, "k2 holds only below 34,819")
    ok, reasons = gate(("--max-model-len", "64k"), accepted)
    assert ok and any("the policy accepts contexts beyond it" in r for r in reasons)


def test_the_arc_seed_states_its_envelope_and_the_gate_enforces_it(tmp_path: Path) -> None:
    # the Arc seed's long-context rule as a warning: a3b_mtp1 is promoted, only below 32K prompts
    text = (ROOT / "rules" / "arc-b70.toml").read_text()
    text = text.replace(
        'kind = "context_regime"\nseverity = "veto"', 'kind = "context_regime"\nseverity = "warn"'
    )
    rules = tmp_path / "arc-warn.toml"
    rules.write_text(text)
    argv = tmp_path / "serve.json"
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 1})
    argv.write_text(
        json.dumps(["vllm", "serve", "q", "--speculative-config", spec, "--max-model-len", "128k"])
    )
    done = run_cli("gate", FIXTURES / "arc-b70-qwen36", "--rules", rules, "--serve-config", argv)
    assert done.returncode == 1
    assert "a3b_mtp1 holds only below 34,819 prompt tokens (shown up to 6,146; not between)" in done.stdout
    assert "allows 128,000 tokens (--max-model-len): set it below 34,819 tokens" in done.stdout


def test_the_crossover_fixtures_schedule_passes_the_gate(tmp_path: Path) -> None:
    text = (ROOT / "rules" / "default.toml").read_text().replace('mode = "fastest"', 'mode = "schedule"')
    rules = tmp_path / "schedule.toml"
    rules.write_text(text)
    spec = json.dumps(
        {
            "method": "mtp",
            "num_speculative_tokens": 2,
            "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 1024, 0]],
        }
    )
    run = ("gate", CROSSOVER, "--rules", rules, "--proposed")
    ok = run_cli(*run, spec)
    assert ok.returncode == 0, ok.stdout
    wrong = run_cli(*run, "k=2")
    assert wrong.returncode == 1
    assert "batch sizes 3 and above: proposing k=2, but the evidence runs k=0 there" in wrong.stdout


def test_the_decision_states_the_envelope_and_whether_the_policy_accepts_beyond_it(tmp_path: Path) -> None:
    from mtpverdict.decide import decide_directory

    text = (ROOT / "rules" / "arc-b70.toml").read_text()
    text = text.replace(
        'kind = "context_regime"\nseverity = "veto"', 'kind = "context_regime"\nseverity = "warn"'
    )
    rules = tmp_path / "arc-warn.toml"
    rules.write_text(text)
    d = decide_directory(FIXTURES / "arc-b70-qwen36", str(rules)).decision
    assert d.selected_arm == "a3b_mtp1"
    (envelope,) = d.envelopes
    assert (envelope.arm, envelope.rule, envelope.holds_to, envelope.fails_from, envelope.accepted) == (
        "a3b_mtp1",
        "no-long-context-loss",
        6146,
        34819,
        False,
    )
    assert any(
        r.startswith("context envelope (no-long-context-loss): a3b_mtp1 holds only below") for r in d.reasons
    )
    rules.write_text(text.replace("[selection]", '[gate]\noutside_envelope = "accept"\n\n[selection]', 1))
    accepted = decide_directory(FIXTURES / "arc-b70-qwen36", str(rules)).decision
    assert accepted.envelopes[0].accepted
    assert any("the policy accepts serving beyond it" in r for r in accepted.reasons)


def _with_arms(evidence: GateEvidence, *arms: ArmEvidence) -> GateEvidence:
    return GateEvidence(
        decision=evidence.decision,
        selected=evidence.selected,
        reasons=evidence.reasons,
        arms=(*evidence.arms, *arms),
        engine_version=evidence.engine_version,
        schedule=evidence.schedule,
        envelopes=evidence.envelopes,
    )


def test_a_range_is_supported_only_by_the_arm_the_decision_runs_there() -> None:
    """Another arm of the same depth in other settings, rejected by the rules, supports nothing."""
    bad = {"method": "mtp", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1}
    k2bad = ArmEvidence(
        "k2bad", False, "mtp", 2, "rejected", (), (*BASE, "--speculative-config", json.dumps(bad)), None, ()
    )
    proposal = {**bad, "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 64, 0]]}
    argv = (*BASE, "--speculative-config", json.dumps(proposal))
    for evidence in (_with_arms(_evidence(CROSS), k2bad), _with_arms(_evidence(None), k2bad)):
        found = evaluate(evidence, None, ServeConfig(argv, None, "s.argv"))
        assert not found.supported, found.reasons
        assert any("k2bad" in r and "not the arm the decision runs" in r for r in found.reasons), (
            found.reasons
        )


def test_an_arm_that_ran_a_schedule_never_supports_one_fixed_depth() -> None:
    """A confirmation arm drafted k=2 only at batch size 1: `--proposed k=2` is not what it measured."""
    sched_argv = _config(2, [[1, 1, 2], [2, 1024, 0]])
    sched = ArmEvidence("sched", False, "mtp", 2, "eligible", (), sched_argv, sched_argv, ("0.32.0",))
    evidence = GateEvidence(
        decision="promote",
        selected="sched",
        reasons=("the decision's own reason",),
        arms=(_arm("off_A", None), sched, _arm("off_B", None)),
        engine_version=None,
    )
    found = evaluate(evidence, parse_spec("k=2"), None)
    assert not found.supported, found.reasons
    assert any("per-batch-size schedule" in r for r in found.reasons), found.reasons


@pytest.mark.parametrize("flag", [("--data-parallel-size", "2"), ("-dp", "4"), ("--data-parallel-size=2",)])
def test_a_schedule_under_data_parallelism_is_refused(flag: tuple[str, ...]) -> None:
    """vLLM turns the per-batch-size schedule off under data parallelism and runs its largest depth."""
    argv = _config(2, [[1, 2, 2], [3, 64, 0]], extra=flag)
    found = evaluate(_evidence(CROSS, extra=flag), None, ServeConfig(argv, None, "s.argv"))
    assert not found.supported, found.reasons
    assert any("data parallelism" in r and "k=2 at every batch size" in r for r in found.reasons), (
        found.reasons
    )
    one = evaluate(
        _evidence(CROSS, extra=("--data-parallel-size", "1")),
        None,
        ServeConfig(_config(2, [[1, 2, 2], [3, 64, 0]], extra=("--data-parallel-size", "1")), None, "s.argv"),
    )
    assert one.supported, one.reasons


def _keep_off() -> GateEvidence:
    return GateEvidence(
        decision="keep_mtp_disabled",
        selected=None,
        reasons=("no depth beats off",),
        arms=tuple(_arm(n, k) for n, k in (("off_A", None), ("k2", 2), ("off_B", None))),
        engine_version=None,
    )


def test_a_schedule_that_never_drafts_is_not_speculation_off() -> None:
    """It loads the drafter (its KV, its setup) that no arm measured standing idle."""
    idle = evaluate(_keep_off(), None, ServeConfig(_config(3, [[1, 4096, 0]]), None, "s.argv"))
    assert not idle.supported, idle.reasons
    assert any("num_speculative_tokens 3" in r and "largest depth 0" in r for r in idle.reasons), idle.reasons
    off = evaluate(_keep_off(), None, ServeConfig(BASE, None, "s.argv"))
    assert off.supported, off.reasons


def test_num_speculative_tokens_must_be_the_schedules_largest_depth() -> None:
    """vLLM sizes the drafter by num_speculative_tokens; the arms ran it equal to their depth."""
    wide = evaluate(_evidence(CROSS), None, ServeConfig(_config(7, [[1, 2, 2], [3, 64, 0]]), None, "s.argv"))
    assert not wide.supported, wide.reasons
    assert any("num_speculative_tokens 7" in r and "largest depth 2" in r for r in wide.reasons)


def test_every_arm_a_schedule_runs_is_checked_for_freshness() -> None:
    """The k1 range rests on an arm collected with other arguments: stale, though k2's is fresh."""
    schedule = _schedule((1, 2, 1), (3, 8, 2), (9, 1024, 0))
    arms = (
        _arm("off_A", None),
        _arm("k1", 1, ("--max-model-len", "2048")),
        _arm("k2", 2),
        _arm("off_B", None),
    )
    evidence = GateEvidence("promote", None, ("why",), arms, None, schedule)
    found = evaluate(evidence, None, ServeConfig(_config(2, [[1, 2, 1], [3, 8, 2], [9, 64, 0]]), None, "s"))
    assert not found.supported, found.reasons
    assert any("stale evidence" in r and "k1" in r and "--max-model-len" in r for r in found.reasons)


def test_under_a_veto_the_decision_still_states_where_the_arm_would_hold() -> None:
    """The shipped Arc policy vetoes a3b_mtp1 for losing from 32K, yet it is 29% faster at 4K: the
    decision says so as an envelope, names the veto, and records no promotion envelope for gate."""
    from mtpverdict.decide import decide_directory

    d = decide_directory(FIXTURES / "arc-b70-qwen36", str(ROOT / "rules" / "arc-b70.toml")).decision
    assert d.arm("a3b_mtp1").verdict == "rejected" and d.envelopes == ()
    (line,) = [r for r in d.reasons if r.startswith("context envelope (no-long-context-loss): a3b_mtp1")]
    assert "a3b_mtp1 holds only below 34,819 prompt tokens (shown up to 6,146; not between)" in line
    assert (
        'the rule is a veto and the only one a3b_mtp1 fails, so it is rejected; with severity = "warn"'
        in line
    )
    assert "gate refusing serve configs that allow prompts of 34,819 tokens or more" in line
    assert not any(r.startswith("context envelope (no-long-context-loss): dense_mtp") for r in d.reasons)


def test_the_veto_envelope_is_not_stated_when_another_veto_also_rejects_the_arm(tmp_path: Path) -> None:
    from mtpverdict.decide import decide_directory

    text = (ROOT / "rules" / "arc-b70.toml").read_text()
    strict = text.replace(
        "[[rules]]",
        '[[rules]]\nkind = "stable_acceptance"\nseverity = "veto"\nmin_lower_bound = 0.99\n\n[[rules]]',
        1,
    )
    rules = tmp_path / "arc-acceptance.toml"
    rules.write_text(strict)
    d = decide_directory(FIXTURES / "arc-b70-qwen36", str(rules)).decision
    assert any(r.kind == "stable_acceptance" and r.passed is False for r in d.arm("a3b_mtp1").rules)
    assert not any(r.startswith("context envelope (no-long-context-loss): a3b_mtp1") for r in d.reasons)
