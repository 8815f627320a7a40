"""Golden decisions: each fixture under each policy gives a byte-identical decision JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.decide import decide_directory

from .conftest import FIXTURES, GOLDEN, ROOT

BORING = "thor-c21-boring"
SCHEDULE = "default-schedule"  # the default policy asking for a depth per batch-size range
CASES = [
    ("thor-qwen36-35b-a3b", "default"),
    ("thor-qwen36-35b-a3b", "thor-c21"),
    ("thor-qwen36-35b-a3b", BORING),
    ("arc-b70-qwen36", "arc-b70"),
    ("arc-b70-qwen36", "default"),
    ("synthetic-clean-win", "default"),
    ("synthetic-null", "default"),
    ("synthetic-void-arm", "default"),
    ("synthetic-drift", "default"),
    ("synthetic-blind", "default"),
    ("synthetic-clean-win", "strict-ci"),
    ("synthetic-crossover", "default"),
    ("synthetic-crossover", SCHEDULE),
]


@pytest.fixture(autouse=True)
def _in_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _policy(name: str, tmp: Path) -> str:
    if name == SCHEDULE:
        text = (ROOT / "rules" / "default.toml").read_text()
        text = text.replace('mode = "fastest"', 'mode = "schedule"').replace(
            'name = "default"', f'name = "{SCHEDULE}"'
        )
        path = tmp / f"{SCHEDULE}.toml"
        path.write_text(text)
        return str(path)
    if name != BORING:
        return name
    # the Thor bar with the "boring" selection: smallest depth within 10% of the fastest eligible arm
    text = (ROOT / "rules" / "thor-c21.toml").read_text()
    text = text.replace('mode = "reference"', 'mode = "boring"').replace(
        'name = "thor-c21"', f'name = "{BORING}"'
    )
    path = tmp / f"{BORING}.toml"
    path.write_text(text)
    return str(path)


def _decide(fixture: str, policy: str, tmp: Path) -> dict[str, object]:
    # the results directory as a user in the checkout names it (a decision names no path: its next-step
    # command says RESULTS; tests/decide/test_verify_paths.py decides from other spellings)
    run = decide_directory((FIXTURES / fixture).relative_to(ROOT), _policy(policy, tmp))
    return {"text": run.json_text, "decision": json.loads(run.json_text)}


@pytest.mark.parametrize(("fixture", "policy"), CASES, ids=[f"{f}@{p}" for f, p in CASES])
def test_golden_decision(fixture: str, policy: str, tmp_path: Path, regen_golden: bool) -> None:
    got = _decide(fixture, policy, tmp_path)["text"]
    assert isinstance(got, str)
    golden = GOLDEN / f"{fixture}@{policy}.json"
    if regen_golden:
        golden.write_text(got)
    assert golden.exists(), f"no golden file {golden.name}: run pytest --regen-golden on purpose"
    assert got == golden.read_text(), f"{golden.name} changed; review, then pytest --regen-golden"


def _d(fixture: str, policy: str, tmp: Path) -> dict[str, Any]:
    decision = _decide(fixture, policy, tmp)["decision"]
    assert isinstance(decision, dict)
    return decision


def _arm(decision: dict[str, Any], name: str) -> dict[str, Any]:
    arms = decision["arms"]
    assert isinstance(arms, list)
    return next(a for a in arms if a["name"] == name)


def _reasons(decision: dict[str, Any]) -> str:
    reasons = decision["reasons"]
    assert isinstance(reasons, list)
    return "\n".join(reasons)


def test_thor_c21_keeps_reference_and_says_no_bracketing_control(tmp_path: Path) -> None:
    d = _d("thor-qwen36-35b-a3b", "thor-c21", tmp_path)
    assert d["decision"] == "keep_reference"
    assert d["selected"]["arm"] == "k3"
    k7 = _arm(d, "k7")
    assert k7["verdict"] == "rejected"
    stable = next(r for r in k7["rules"] if r["kind"] == "stable_acceptance")
    assert "63 drafted tokens" in stable["detail"] and "0.222" in stable["detail"]
    text = _reasons(d)
    assert "clears the 61.2 floor and misses the 100.0 target" in text  # off
    for arm in ("k1", "k3", "k5"):
        assert f"{arm} eligible" in text and _arm(d, arm)["verdict"] == "eligible"
    assert "no bracketing" in text and "k5 is +6.0% over k3" in text


def test_thor_boring_policy_picks_k3(tmp_path: Path) -> None:
    d = _d("thor-qwen36-35b-a3b", BORING, tmp_path)
    assert d["decision"] == "promote"
    assert d["selected"]["arm"] == "k3"


def test_thor_default_is_inconclusive_for_want_of_a_floor(tmp_path: Path) -> None:
    d = _d("thor-qwen36-35b-a3b", "default", tmp_path)
    assert d["decision"] == "inconclusive"
    assert "sensitivity floor unknown" in _reasons(d)


def test_arc_keeps_mtp_disabled_with_the_seed_reasons(tmp_path: Path) -> None:
    d = _d("arc-b70-qwen36", "arc-b70", tmp_path)
    assert d["decision"] == "keep_mtp_disabled"
    text = _reasons(d)
    assert "replay_bf16_mtp1 rejected by coherent-graph-mode: replay_bf16_mtp1: 2/6" in text
    assert "a3b_mtp1 rejected by no-long-context-loss" in text and "loses from ctx32k onward" in text
    for k in range(1, 5):
        assert f"dense_mtp{k} rejected by faster-at-4k" in text
    assert "dense_mtp4 rejected by kv-for-115k" in text and "0.39x" in text
    assert "identity on ctx4k not established" in text
    assert _arm(d, "replay_input_copy")["verdict"] == "rejected"


def test_synthetic_outcomes(tmp_path: Path) -> None:
    win = _d("synthetic-clean-win", "default", tmp_path)
    assert win["decision"] == "promote" and win["selected"]["arm"] == "k2"
    assert _d("synthetic-null", "default", tmp_path)["decision"] in ("keep_mtp_disabled", "inconclusive")
    void = _d("synthetic-void-arm", "default", tmp_path)
    assert _arm(void, "k2")["verdict"] == "void"
    assert void["selected"]["arm"] != "k2"
    drift = _d("synthetic-drift", "default", tmp_path)
    assert drift["decision"] == "inconclusive" and "drift" in _reasons(drift).split("\n")[0]
    blind = _d("synthetic-blind", "default", tmp_path)
    assert blind["decision"] == "inconclusive" and "harness blind" in _reasons(blind).split("\n")[0]


def test_crossover_schedule_follows_the_true_crossover(tmp_path: Path) -> None:
    """The synthetic crossover (k2 +30% at c=1, -15% at c=8): one depth for every concurrency keeps
    speculation off; a schedule runs k2 where it wins and off where it loses, as vLLM's JSON says."""
    fixed = _d("synthetic-crossover", "default", tmp_path)
    assert fixed["decision"] == "keep_mtp_disabled"
    d = _d("synthetic-crossover", SCHEDULE, tmp_path)
    assert d["decision"] == "promote" and d["selected"] is None
    ranges = [(r["start"], r["end"], r["k"], r["arm"]) for r in d["schedule"]["ranges"]]
    assert ranges == [(1, 2, 2, "k2"), (3, 1024, 0, None)]
    config = json.loads(d["schedule"]["speculative_config"])
    assert config == {
        "method": "mtp",
        "num_speculative_tokens": 2,
        "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 1024, 0]],
    }
    best = {(c["concurrency"], c["best_k"]) for c in d["regime"]}
    assert best == {(1, 2), (2, 2), (4, 0), (8, 0)}
    assert _reasons(d).startswith("promote a per-batch-size schedule under policy default-schedule")
