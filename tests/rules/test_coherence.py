"""coherence: graded cases pass at min_pass_rate; greedy outputs equal the control's (cases and workloads)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from mtpverdict.evidence.model import CoherenceCase, Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.coherence import KIND, WorkloadIdentity

from .conftest import (
    assert_on_missing,
    candidate,
    case,
    control,
    make_evidence,
    params,
    refused,
    workload,
)

K2 = candidate()
WORKLOADS = (workload("greedy", identical=True), workload("sampled"))
GRADED = (case("arith"), case("capital"), case("json", passed=False))  # 2 of 3 pass


def evidence(
    coherence: Mapping[str, tuple[CoherenceCase, ...]] | None = None,
    hashes: Mapping[tuple[str, str], frozenset[str]] | None = None,
) -> Evidence:
    return make_evidence(
        [control(), control("off_B"), K2],
        workloads=WORKLOADS,
        coherence={"k2": GRADED} if coherence is None else coherence,
        hashes=hashes,
    )


def test_graded_cases_at_the_pass_rate() -> None:
    finding = KIND.evaluate(evidence(), K2, params("coherence", "min_pass_rate = 0.6"))
    assert finding.status is RuleStatus.PASS
    assert finding.value == pytest.approx(2 / 3) and finding.threshold == 0.6
    assert (finding.graded, finding.passed, finding.failed_cases) == (3, 2, ())


def test_below_the_pass_rate_fails_naming_the_cases() -> None:
    finding = KIND.evaluate(evidence(), K2, params("coherence", "min_pass_rate = 0.7"))
    assert (finding.status, finding.failed_cases) == (RuleStatus.FAIL, ("json",))
    assert KIND.evaluate(evidence(), K2, params("coherence")).status is RuleStatus.FAIL  # default 1.0


def test_identity_probes_are_compared_not_graded() -> None:
    mine = (*GRADED, case("identity-1", passed=False, sha="a"))
    ev = evidence({"k2": mine, "off_A": (case("identity-1", sha="a"),)})
    finding = KIND.evaluate(ev, K2, params("coherence", "min_pass_rate = 0.6"))
    assert (finding.graded, finding.passed) == (3, 2)
    assert (finding.compared_cases, finding.differing_cases, finding.status) == (1, (), RuleStatus.PASS)


def test_a_case_whose_output_differs_from_the_controls_fails() -> None:
    ev = evidence(
        {
            "k2": (case("identity-1", sha="a"), case("identity-2", sha="x"), case("identity-3", sha="s")),
            "off_A": (case("identity-1", sha="a"), case("identity-2", sha="b")),
            "off_B": (case("identity-2", sha="b"),),
        }
    )
    finding = KIND.evaluate(ev, K2, params("coherence"))
    assert finding.status is RuleStatus.FAIL
    assert (finding.compared_cases, finding.differing_cases) == (
        2,
        ("identity-2",),
    )  # identity-3: no control case
    assert finding.value is None  # nothing graded: every case is an identity probe or ungraded


def test_a_control_that_varied_does_not_fail_the_arm() -> None:
    ev = evidence(
        {
            "k2": (case("identity-1", sha="a"),),
            "off_A": (case("identity-1", sha="a"),),
            "off_B": (case("identity-1", sha="b"),),
        }
    )
    assert KIND.evaluate(ev, K2, params("coherence")).status is not RuleStatus.FAIL


def test_expect_identical_workloads_are_byte_identical_to_the_control() -> None:
    same = {("k2", "greedy"): frozenset({"h"}), ("off_A", "greedy"): frozenset({"h"})}
    finding = KIND.evaluate(evidence({}, same), K2, params("coherence"))
    assert (finding.status, finding.workloads) == (RuleStatus.PASS, (WorkloadIdentity("greedy", True, 1),))
    other = {("k2", "greedy"): frozenset({"h", "i"}), ("off_B", "greedy"): frozenset({"h"})}
    finding = KIND.evaluate(evidence({}, other), K2, params("coherence"))
    assert (finding.status, finding.workloads) == (
        RuleStatus.FAIL,
        (WorkloadIdentity("greedy", False, 2, differing=1),),
    )


def test_workloads_without_expect_identical_are_not_compared() -> None:
    sampled = {("k2", "sampled"): frozenset({"h"}), ("off_A", "sampled"): frozenset({"z"})}
    finding = KIND.evaluate(evidence({}, sampled), K2, params("coherence"))
    assert (finding.status, finding.workloads) == (RuleStatus.MISSING, ())


def test_identical_outputs_false_only_grades() -> None:
    ev = evidence(
        {"k2": (*GRADED, case("identity-1", sha="x")), "off_A": (case("identity-1", sha="a"),)},
        {("k2", "greedy"): frozenset({"h"}), ("off_A", "greedy"): frozenset({"z"})},
    )
    finding = KIND.evaluate(ev, K2, params("coherence", "min_pass_rate = 0.5\nidentical_outputs = false"))
    assert finding.status is RuleStatus.PASS
    assert (finding.compared_cases, finding.differing_cases, finding.workloads) == (0, (), ())


def test_nothing_to_grade_or_compare_is_missing() -> None:
    finding = KIND.evaluate(evidence({}), K2, params("coherence", "min_pass_rate = 0.9"))
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.MISSING, None, 0.9)
    only_probes = evidence({"k2": (case("identity-1", sha="a"),)})  # with no control case to compare
    assert KIND.evaluate(only_probes, K2, params("coherence")).status is RuleStatus.MISSING
    assert_on_missing(evidence({}), K2, "coherence")


def test_control_arms_are_judged_against_their_family() -> None:
    assert KIND.reported_for_controls
    ev = evidence(
        {
            "off_A": (case("identity-1", sha="a"), case("json", passed=False)),
            "off_B": (case("identity-1", sha="a"),),
        }
    )
    finding = KIND.evaluate(ev, control(), params("coherence"))
    assert (finding.status, finding.failed_cases) == (RuleStatus.FAIL, ("json",))
    assert (finding.compared_cases, finding.differing_cases) == (1, ())


def test_out_of_range_keys_are_refused() -> None:
    assert refused("coherence", "min_pass_rate = 1.5", "rules[0].min_pass_rate", "fraction")
    assert refused("coherence", 'identical_outputs = "yes"', "rules[0].identical_outputs", "true or false")


def test_sentences() -> None:
    ev = evidence(
        {"k2": (*GRADED, case("identity-1", sha="x")), "off_A": (case("identity-1", sha="a"),)},
        {("k2", "greedy"): frozenset({"h", "i"}), ("off_A", "greedy"): frozenset({"h"})},
    )
    assert KIND.render(KIND.evaluate(ev, K2, params("coherence")), K2) == (
        "k2: 2/3 coherence checks passed (failed: json); greedy output differs from the control's on "
        "identity-1; output on greedy differs from the control (2 distinct outputs where greedy decoding "
        "must give one)"
    )
    ev = evidence(
        {"k2": (case("identity-1", sha="a"),), "off_A": (case("identity-1", sha="a"),)},
        {("k2", "greedy"): frozenset({"h"}), ("off_A", "greedy"): frozenset({"h"})},
    )
    assert KIND.render(KIND.evaluate(ev, K2, params("coherence")), K2) == (
        "k2: greedy output identical to the control's on 1 prompts; output on greedy byte-identical to "
        "the control"
    )
    missing = KIND.evaluate(evidence({}), K2, params("coherence"))
    assert KIND.render(missing, K2) == "k2: no coherence cases or output hashes recorded"
