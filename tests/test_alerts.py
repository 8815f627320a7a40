"""`mtpverdict alerts`: Prometheus rules from a decision, checked and unit-tested by promtool.

promtool (Debian's `prometheus` package) runs `check rules` on the written file and `test rules` on
series that cross each threshold. Without promtool these tests skip, except in CI (CI set), where a
missing promtool is a failure: the rules would otherwise ship unvalidated.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mtpverdict.errors import InputError
from mtpverdict.live.alerts import (
    COUNTERS,
    AlertEngine,
    AlertOptions,
    duration_seconds,
    rule_groups,
    rules_yaml,
)
from mtpverdict.live.reference import Reference, load_reference

from .conftest import ROOT, run_cli

GOLDEN = ROOT / "tests" / "golden"
PROMOTED = GOLDEN / "thor-qwen36-35b-a3b@thor-c21-boring.json"  # promotes k3 on vLLM
LLAMA_LIKE = GOLDEN / "synthetic-clean-win@default.json"  # promotes k2 (simulated engine)
NOTHING_SELECTED = GOLDEN / "thor-qwen36-35b-a3b@default.json"
DRAFTS_PER_MINUTE = 600  # input series: draft rounds per minute of every scenario
OPTIONS = AlertOptions(AlertEngine.VLLM, "5m", "10m", ('model_name="qwen"',))


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed (apt-get install prometheus); CI must validate the rules")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def _ref() -> Reference:
    return load_reference(PROMOTED)


def test_the_reference_is_the_selected_arm_with_its_break_even_bound_and_interval() -> None:
    ref = _ref()
    assert ref.arm == "k3" and ref.engine == "vllm" and len(ref.short_hash) == 12
    assert ref.bound_length is not None and ref.bound_cell == "deep c=1"
    assert ref.bound_length == pytest.approx(2.48124, rel=1e-5)
    assert ref.rate_low is not None and ref.rate is not None and ref.rate_low < ref.rate


def test_a_decision_without_a_selected_arm_needs_arm_and_a_control_is_refused() -> None:
    with pytest.raises(InputError, match="selects no single arm; pass --arm"):
        load_reference(NOTHING_SELECTED)
    assert load_reference(NOTHING_SELECTED, "k3").arm == "k3"
    with pytest.raises(InputError, match="is a control"):
        load_reference(NOTHING_SELECTED, "off")
    with pytest.raises(InputError, match="no arm 'k9'"):
        load_reference(NOTHING_SELECTED, "k9")


def test_every_rule_names_the_decision_and_the_thresholds_are_the_decisions() -> None:
    ref = _ref()
    groups = rule_groups(ref, AlertOptions(AlertEngine.VLLM, "2m", "5m", ('model_name="qwen"',)))
    rules = [r for g in groups["groups"] for r in g["rules"]]
    assert all(r["labels"]["mtpverdict_decision"] == ref.short_hash for r in rules)
    exprs = {r.get("alert", r.get("record")): r["expr"] for r in rules}
    assert f"< {ref.bound_length:.6g}" in exprs["MtpverdictBelowBreakEven"]
    assert f"< {ref.rate_low:.6g}" in exprs["MtpverdictAcceptanceBelowEvidence"]
    rate = exprs["mtpverdict:spec_decode_acceptance_rate:rate2m"]
    assert 'vllm:spec_decode_num_accepted_tokens_total{model_name="qwen"}[2m]' in rate
    llama = rules_yaml(ref, AlertOptions(AlertEngine.LLAMACPP))
    assert "llamacpp:tokens_predicted_total[5m]" in llama and "vllm:" not in llama
    assert all(r["for"] == "5m" for r in rules if "alert" in r)


@pytest.mark.parametrize(
    ("window", "hold", "matcher", "key"),
    [
        ("5 minutes", "10m", 'a="b"', "--window"),
        ("5m", "10", 'a="b"', "--for"),
        ("5m", "1h", "a=b", "--match"),
    ],
)
def test_bad_options_are_one_problem_naming_the_option(
    window: str, hold: str, matcher: str, key: str
) -> None:
    with pytest.raises(InputError) as caught:
        rule_groups(_ref(), AlertOptions(AlertEngine.VLLM, window, hold, (matcher,)))
    assert [p.key for p in caught.value.problems] == [key]


def test_durations() -> None:
    assert duration_seconds("1h30m", "x", "--for") == 5400 and duration_seconds("90s", "x", "k") == 90
    with pytest.raises(InputError, match="not a positive duration"):
        duration_seconds("0s", "x", "--window")


def test_the_cli_writes_the_rules_and_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "rules.yaml"
    done = run_cli("alerts", PROMOTED, "--out", out)
    assert done.returncode == 0, done.output
    assert "break-even 2.481 at deep c=1" in done.output and yaml.safe_load(out.read_text())["groups"]
    bad = run_cli("alerts", LLAMA_LIKE, "--out", tmp_path / "x.yaml")
    assert bad.returncode == 2 and "engine 'simulated' exports no spec-decode counters" in bad.output
    assert not (tmp_path / "x.yaml").exists()
    ok = run_cli("alerts", LLAMA_LIKE, "--engine", "llamacpp", "--out", tmp_path / "y.yaml")
    assert ok.returncode == 0, ok.output
    missing = run_cli("alerts", tmp_path / "none.json", "--out", out)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    promtool = _promtool()
    for engine in COUNTERS:
        path = tmp_path / f"{engine}.yaml"
        path.write_text(rules_yaml(_ref(), AlertOptions(engine, "5m", "10m", ('model_name="qwen"',))))
        done = subprocess.run(
            [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS: 7 rules found" in done.stdout


def _series(instance: str, accepted_per_draft: float, *, drafting: bool = True) -> list[dict[str, str]]:
    """vLLM counters of one instance over 40 minutes: k=3 drafts at the given accepted tokens per draft."""
    drafts = DRAFTS_PER_MINUTE if drafting else 0
    per_minute = {
        "vllm:spec_decode_num_drafts_total": drafts,
        "vllm:spec_decode_num_draft_tokens_total": 3 * drafts,
        "vllm:spec_decode_num_accepted_tokens_total": round(accepted_per_draft * drafts),
        "vllm:generation_tokens_total": 2000,
    }
    labels = f'engine="0",instance="{instance}",model_name="qwen"'
    return [{"series": f"{name}{{{labels}}}", "values": f"0+{step}x40"} for name, step in per_minute.items()]


def _plain(instance: str, minutes: int = 40) -> list[dict[str, str]]:
    """A server without speculation: it generates tokens and exports no spec-decode counter."""
    labels = f'engine="0",instance="{instance}",model_name="qwen"'
    return [{"series": f"vllm:generation_tokens_total{{{labels}}}", "values": f"0+2000x{minutes}"}]


VALUE = '{{ $value | printf "%.3f" }}'


def _annotations(ref: Reference, alert: str, value: float) -> dict[str, str]:
    """The alert's annotations as Prometheus renders them at `value` (promtool compares them exactly)."""
    groups = rule_groups(ref, OPTIONS)
    rule = next(r for g in groups["groups"] for r in g["rules"] if r.get("alert") == alert)
    return {k: v.replace(VALUE, f"{value:.3f}") for k, v in rule["annotations"].items()}


def _fires(ref: Reference, alert: str, severity: str, *at: tuple[str, float]) -> dict[str, Any]:
    return {
        "eval_time": "30m",
        "alertname": alert,
        "exp_alerts": [
            {
                "exp_labels": _labels(ref, instance, severity),
                "exp_annotations": _annotations(ref, alert, value),
            }
            for instance, value in at
        ],
    }


def test_promtool_fires_each_alert_where_its_threshold_is_crossed_and_none_where_the_evidence_holds(
    tmp_path: Path,
) -> None:
    promtool = _promtool()
    ref = _ref()
    assert ref.bound_length is not None and ref.rate_low is not None
    holds = 3 * (ref.rate_low + 1.0) / 2  # accepted per draft: inside the evidence, above break-even
    below_evidence = 3 * ref.rate_low * 0.97  # below the interval, still above break-even
    below_break_even = (ref.bound_length - 1.0) * 0.9
    assert 1 + below_evidence > ref.bound_length and 1 + holds > ref.bound_length
    rules = tmp_path / "rules.yaml"
    rules.write_text(rules_yaml(ref, OPTIONS))
    series = [
        *_series("holds", holds),
        *_series("evidence", below_evidence),
        *_series("breakeven", below_break_even),
        *_series("stopped", 0.0, drafting=False),
        *_plain("plain"),  # a seat that never speculated: not this decision's, no alert
    ]

    def accepted(per_draft: float) -> float:
        return round(per_draft * DRAFTS_PER_MINUTE) / DRAFTS_PER_MINUTE

    checks = [
        _fires(ref, "MtpverdictBelowBreakEven", "critical", ("breakeven", 1 + accepted(below_break_even))),
        _fires(
            ref,
            "MtpverdictAcceptanceBelowEvidence",
            "warning",
            ("breakeven", accepted(below_break_even) / 3),
            ("evidence", accepted(below_evidence) / 3),
        ),
        _fires(ref, "MtpverdictDraftingStopped", "critical", ("stopped", 2000 / 60)),
    ]
    # the 5m rates exist from the second minute on; 10m of `for` have not passed at 8m: nothing fires yet
    early = [{"eval_time": "8m", "alertname": name, "exp_alerts": []} for name, _ in _names()]
    cases = [{"interval": "1m", "input_series": series, "alert_rule_test": [*checks, *early]}]
    spec = tmp_path / "test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": cases}))
    done = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _names() -> tuple[tuple[str, str], ...]:
    return (
        ("MtpverdictBelowBreakEven", "critical"),
        ("MtpverdictAcceptanceBelowEvidence", "warning"),
        ("MtpverdictDraftingStopped", "critical"),
    )


def _labels(ref: Reference, instance: str, severity: str) -> dict[str, str]:
    return {
        "instance": instance,
        "model_name": "qwen",
        "mtpverdict_decision": ref.short_hash,
        "mtpverdict_arm": ref.arm,
        "severity": severity,
    }


# ---------------------------------------------------------------------------------------------------
# what the rules refuse: an arm with nothing to hold to, durations and matchers promtool rejects,
# template text from a hand-edited decision


def _decision() -> Any:
    from mtpverdict.formats.decision import parse_decision

    return parse_decision(PROMOTED.read_text(), str(PROMOTED))


def _with_arm(**changes: Any) -> Any:
    import msgspec

    decision = _decision()
    arms = tuple(msgspec.structs.replace(a, **changes) if a.name == "k3" else a for a in decision.arms)
    return msgspec.structs.replace(decision, arms=arms)


def test_an_arm_without_thresholds_or_with_a_void_verdict_is_refused() -> None:
    import msgspec

    from mtpverdict.formats.decision import Verdict
    from mtpverdict.live.reference import reference

    k3 = _decision().find_arm("k3")
    assert k3 is not None and k3.acceptance is not None
    bare = msgspec.structs.replace(k3.acceptance.primary, ci_low=None, ci_high=None)
    no_interval = msgspec.structs.replace(k3.acceptance, primary=bare)
    with pytest.raises(InputError, match="no threshold"):
        reference(_with_arm(acceptance=no_interval, break_even=None), "0" * 64, "d.json")
    with pytest.raises(InputError, match="void"):
        reference(_with_arm(verdict=Verdict.VOID, void_reason="the drafter never loaded"), "0" * 64, "d.json")


@pytest.mark.parametrize(
    "duration", ["1m1m", "1s1m", "0s", "0m0s", "99999999999999999999y", "1.5m", "-1m", "1M", "1 m", ""]
)
def test_durations_promtool_rejects_are_refused(duration: str) -> None:
    with pytest.raises(InputError):
        rule_groups(_ref(), AlertOptions(AlertEngine.VLLM, duration, "10m"))
    with pytest.raises(InputError):
        rule_groups(_ref(), AlertOptions(AlertEngine.VLLM, "5m", duration))


@pytest.mark.parametrize(
    "matcher",
    [
        'model_name=~"("',
        'model_name!~"[a-"',
        '__name__="vllm:x"',
        'model_name="\\q"',
        'model_name="\\x4"',
        '9abc="x"',
    ],
)
def test_matchers_promtool_rejects_are_refused(matcher: str) -> None:
    with pytest.raises(InputError) as caught:
        rule_groups(_ref(), AlertOptions(AlertEngine.VLLM, "5m", "10m", (matcher,)))
    assert [p.key for p in caught.value.problems] == ["--match"]


def test_valid_durations_and_matchers_pass_promtool(tmp_path: Path) -> None:
    options = AlertOptions(
        AlertEngine.VLLM, "1h30m", "1d2h", ('model_name=~"qwen.*|llama"', 'job!="x\\"y"', 'a="\\n"')
    )
    out = tmp_path / "ok.yaml"
    out.write_text(rules_yaml(_ref(), options))
    done = subprocess.run(
        [_promtool(), "check", "rules", str(out)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", 'k3 {{ range query "up" }}{{ .Labels }}{{ end }}'), ("name", "k3 {{ .Broken")],
)
def test_template_text_in_an_arm_name_is_refused(field: str, value: str) -> None:
    import msgspec

    from mtpverdict.live.reference import reference

    decision = _with_arm(**{field: value})
    decision = msgspec.structs.replace(
        decision, selected=msgspec.structs.replace(decision.selected, arm=value)
    )
    with pytest.raises(InputError, match="is not a name"):
        reference(decision, "0" * 64, "d.json")
    spec = msgspec.structs.replace(_decision().find_arm("k3").spec, method="mtp {{ .X }}")
    with pytest.raises(InputError, match="template delimiter"):
        reference(_with_arm(spec=spec), "0" * 64, "d.json")


def test_template_text_in_the_bound_workload_never_reaches_the_rules(tmp_path: Path) -> None:
    import msgspec

    from mtpverdict.live.reference import reference

    k3 = _decision().find_arm("k3")
    assert k3 is not None and k3.break_even is not None
    be = msgspec.structs.replace(k3.break_even, bound_workload="deep {{ $labels.instance }}")
    with pytest.raises(InputError, match="bound_workload"):
        reference(_with_arm(break_even=be), "0" * 64, "d.json")


def test_alerts_refuses_an_out_file_in_a_missing_directory(tmp_path: Path) -> None:
    out = tmp_path / "none" / "deeper" / "o.yaml"
    done = run_cli("alerts", PROMOTED, "--out", out)
    assert done.returncode == 2 and "does not exist" in done.output, done.output
    assert not (tmp_path / "none").exists()


def test_drafting_stopped_fires_where_the_counters_vanished_and_never_on_a_seat_that_never_drafted(
    tmp_path: Path,
) -> None:
    """A seat restarted without speculation loses its spec-decode counters: the alert fires there, and
    not on servers of the same model that never drafted (they match the rules as much)."""
    promtool = _promtool()
    ref = _ref()
    rules = tmp_path / "rules.yaml"
    rules.write_text(rules_yaml(ref, OPTIONS))
    labels = 'engine="0",instance="vanished",model_name="qwen"'
    vanished = [
        {"series": f"vllm:spec_decode_num_drafts_total{{{labels}}}", "values": "0+600x10 _x50"},
        {"series": f"vllm:spec_decode_num_draft_tokens_total{{{labels}}}", "values": "0+1800x10 _x50"},
        {"series": f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}}", "values": "0+1700x10 _x50"},
        {"series": f"vllm:generation_tokens_total{{{labels}}}", "values": "0+2000x60"},
    ]
    checks = [
        {
            "eval_time": "45m",
            "alertname": "MtpverdictDraftingStopped",
            "exp_alerts": [
                {
                    "exp_labels": _labels(ref, "vanished", "critical"),
                    "exp_annotations": _annotations(ref, "MtpverdictDraftingStopped", 2000 / 60),
                }
            ],
        }
    ]
    cases = [{"interval": "1m", "input_series": [*vanished, *_plain("plain", 60)], "alert_rule_test": checks}]
    spec = tmp_path / "test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": cases}))
    done = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_engine_without_counters_is_refused_by_name() -> None:
    without = next(e for e in AlertEngine if e not in COUNTERS)
    with pytest.raises(InputError, match=f"engine '{without}' exports no spec-decode counters"):
        rule_groups(_ref(), AlertOptions(without))
