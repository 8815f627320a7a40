"""identity: greedy outputs equal the control's per workload; a control that varied establishes nothing."""

from __future__ import annotations

from collections.abc import Mapping

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.identity import KIND, WorkloadIdentity

from .conftest import assert_on_missing, candidate, control, make_evidence, params, refused, workload

K2 = candidate()
WORKLOADS = (workload("w1"), workload("w2"))

Outputs = Mapping[tuple[str, str], frozenset[str]]


def outputs(**per_arm_workload: str) -> Outputs:
    """k2_w1="a b" -> {("k2", "w1"): {"a", "b"}}: the workload follows the last underscore."""
    out: dict[tuple[str, str], frozenset[str]] = {}
    for key, hashes in per_arm_workload.items():
        arm, wl = key.rsplit("_", 1)
        out[(arm, wl)] = frozenset(hashes.split())
    return out


def evidence(hashes: Outputs, distinct: Mapping[tuple[str, str], int] | None = None) -> Evidence:
    return make_evidence(
        [control(), control("off_B"), K2], workloads=WORKLOADS, hashes=hashes, distinct_outputs=distinct
    )


def states(hashes: Outputs, body: str = "") -> tuple[RuleStatus, list[tuple[str, str]]]:
    finding = KIND.evaluate(evidence(hashes), K2, params("identity", body))
    assert (finding.value, finding.threshold) == (None, None)  # states, not numbers
    return finding.status, [(w.workload, w.state) for w in finding.workloads]


def test_identical_on_every_workload_passes() -> None:
    status, found = states(outputs(k2_w1="a", off_A_w1="a", k2_w2="b", off_A_w2="b", off_B_w2="b"))
    assert (status, found) == (RuleStatus.PASS, [("w1", "identical"), ("w2", "identical")])


def test_a_different_output_fails() -> None:
    status, found = states(outputs(k2_w1="a", off_A_w1="a", k2_w2="x", off_A_w2="b"))
    assert (status, found) == (RuleStatus.FAIL, [("w1", "identical"), ("w2", "differs")])
    assert states(outputs(k2_w1="a b", off_A_w1="a"))[1] == [("w1", "differs")]  # the arm itself varied


def test_a_control_that_varied_leaves_identity_not_established() -> None:
    finding = KIND.evaluate(evidence(outputs(k2_w1="a", off_A_w1="a", off_B_w1="b")), K2, params("identity"))
    assert finding.status is RuleStatus.INCONCLUSIVE
    assert finding.workloads == (WorkloadIdentity("w1", "unstable_control", 2),)
    identical_then_unstable = outputs(k2_w1="a", off_A_w1="a", k2_w2="b", off_A_w2="b c")
    assert states(identical_then_unstable)[0] is RuleStatus.INCONCLUSIVE


def test_a_difference_outranks_an_unstable_control_in_either_order() -> None:
    assert states(outputs(k2_w1="x", off_A_w1="a", off_A_w2="b c"))[0] is RuleStatus.FAIL
    assert states(outputs(off_A_w1="a b", k2_w2="x", off_A_w2="b"))[0] is RuleStatus.FAIL


def test_a_control_imported_with_several_outputs_is_unstable() -> None:
    ev = evidence(outputs(k2_w1="a"), distinct={("off_A", "w1"): 3, ("off_B", "w1"): 1})
    finding = KIND.evaluate(ev, K2, params("identity"))
    assert (finding.status, finding.workloads) == (
        RuleStatus.INCONCLUSIVE,
        (WorkloadIdentity("w1", "unstable_control", 3),),
    )
    one_output = evidence(outputs(k2_w1="a"), distinct={("off_A", "w1"): 1})
    assert (
        KIND.evaluate(one_output, K2, params("identity")).status is RuleStatus.MISSING
    )  # no hash to compare


def test_workloads_narrow_the_comparison() -> None:
    hashes = outputs(k2_w1="a", off_A_w1="a", k2_w2="x", off_A_w2="b")
    assert states(hashes, 'workloads = ["w1"]') == (RuleStatus.PASS, [("w1", "identical")])
    assert states(hashes, 'workloads = ["w9"]') == (RuleStatus.MISSING, [])


def test_only_the_arms_family_controls_count() -> None:
    other = candidate("k2b", family="b")
    ev = make_evidence(
        [control(), control("off_b", family="b"), other],
        hashes=outputs(k2b_short="a", off_A_short="a", off_b_short="z"),
    )
    finding = KIND.evaluate(ev, other, params("identity"))
    assert [(w.workload, w.state) for w in finding.workloads] == [("short", "differs")]


def test_no_outputs_on_either_side_is_missing() -> None:
    assert states(outputs(k2_w1="a")) == (RuleStatus.MISSING, [])  # no control output
    assert states(outputs(off_A_w1="a")) == (RuleStatus.MISSING, [])  # no arm output
    assert_on_missing(evidence(outputs()), K2, "identity")


def test_workloads_must_be_a_list() -> None:
    assert refused("identity", 'workloads = "w1"', "rules[0].workloads", "must be a list of strings")
    assert refused("identity", 'workload = "w1"', "rules[0].workload", "unknown key")


def test_sentences() -> None:
    hashes = outputs(k2_w1="a", off_A_w1="a", k2_w2="x", off_A_w2="b c")
    assert KIND.render(KIND.evaluate(evidence(hashes), K2, params("identity")), K2) == (
        "k2: identical to the control on w1; identity on w2 not established: the control itself gave 2 "
        "distinct outputs"
    )
    hashes = outputs(k2_w1="x", off_A_w1="a")
    assert KIND.render(KIND.evaluate(evidence(hashes), K2, params("identity")), K2) == (
        "k2: differs from the control on w1"
    )
    empty = KIND.evaluate(evidence(outputs()), K2, params("identity"))
    assert KIND.render(empty, K2) == "k2: no output hashes to compare"
