"""coherence and identity on a dataset workload: its several prompts are compared prompt by prompt."""

from __future__ import annotations

from typing import Any

import numpy as np

from mtpverdict.evidence.gather import gather
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules import load_policy
from mtpverdict.rules.kinds.coherence import KIND as COHERENCE
from mtpverdict.rules.kinds.identity import KIND as IDENTITY
from mtpverdict.sim import Scenario, SimArm, simulate_campaign

from .conftest import candidate, params

PROMPTS = 3  # prompts the dataset workload sends, each its own greedy output


def _records(output: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A dataset workload (un-nonced, expect_identical) whose requests walk three prompts; output(arm,
    boot, index) is each request's output hash."""
    scenario = Scenario(
        name="dataset-identity",
        arms=(SimArm("off_A"), SimArm("k1", 1, 0.2), SimArm("off_B")),
        boots_per_arm=2,
        reps=3,
        concurrency=(1,),
        workloads=("mixed.chat",),
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(3))
    for w in campaign["workloads"]:
        w.update(category="chat", dataset_sha256="0" * 64, dataset_seed=7, expect_identical=True)
    out = []
    for r in records:
        if r["kind"] == "request":
            index = (r["rep"] + r["stream"]) % PROMPTS
            r = {**r, "prompt_index": index, "category": "chat", "nonce": None}
            r["output_sha256"] = output(r["arm"], r["boot"], index)
        out.append(r)
    return campaign, out


def _findings(output: Any) -> tuple[Any, Any]:
    campaign, records = _records(output)
    evidence = gather(results_from_records(campaign, records), load_policy("default"))
    arm = next(a for a in evidence.campaign.arms if a.name == "k1")
    coherence = COHERENCE.evaluate(evidence, arm, params("coherence"))
    identity = IDENTITY.evaluate(evidence, arm, params("identity"))
    return coherence, identity


def _digest(text: str) -> str:
    return text.encode().hex().ljust(64, "0")[:64]


def test_one_output_per_prompt_the_same_on_every_arm_passes() -> None:
    coherence, identity = _findings(lambda arm, boot, index: _digest(f"p{index}"))
    assert coherence.status is RuleStatus.PASS
    (w,) = coherence.workloads
    assert (w.identical, w.distinct, w.prompts, w.differing) == (True, 1, PROMPTS, 0)
    assert identity.status is RuleStatus.PASS
    assert [x.state for x in identity.workloads] == ["identical"]
    assert "3 prompts byte-identical" in COHERENCE.render(coherence, candidate("k1"))


def test_the_arm_differing_on_one_prompt_fails_both() -> None:
    coherence, identity = _findings(
        lambda arm, boot, index: _digest("other" if arm == "k1" and index == 2 else f"p{index}")
    )
    assert coherence.status is RuleStatus.FAIL
    (w,) = coherence.workloads
    assert (w.identical, w.distinct, w.prompts, w.differing) == (False, 2, PROMPTS, 1)
    assert identity.status is RuleStatus.FAIL
    assert [x.state for x in identity.workloads] == ["differs"]


def test_a_control_varying_on_one_prompt_leaves_identity_unsettled() -> None:
    coherence, identity = _findings(
        lambda arm, boot, index: _digest(f"b{boot}" if arm == "off_B" and index == 1 else f"p{index}")
    )
    assert identity.status is RuleStatus.INCONCLUSIVE
    assert [(x.state, x.control_distinct) for x in identity.workloads] == [("unstable_control", 3)]
    assert coherence.status is RuleStatus.FAIL  # coherence asks one output per prompt of everyone
