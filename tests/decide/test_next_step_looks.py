"""A next step keeps the looks counted: it runs on the results directory it was decided on, resuming it
or continuing it (`collect --continues`), so following it by hand never starts a fresh alpha budget."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from mtpverdict.decide import decide_directory
from mtpverdict.formats.decision import DecisionKind, fill_paths
from mtpverdict.formats.looks import continuation

from ..conftest import FIXTURES, run_cli
from ..test_next_step import CASES

# the next steps that measure the same arms again in a new results directory
MEASURED_AGAIN = (
    "the controls drifted",
    "a blind harness",
    "streams set aside by arm",
    "boots would settle it",
)
# a new question, not this one asked again: no candidate was tested, or every one was void
NEW_QUESTION = ("no candidate", "every candidate void")


def _argv(step: str) -> list[str]:
    """The command a next step ends with, as collect would be given it."""
    return shlex.split(step[step.index("mtpverdict ") :])


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.mark.parametrize("case", MEASURED_AGAIN)
def test_a_next_step_into_a_new_directory_continues_this_one(case: str, tmp_path: Path) -> None:
    """Before: `collect CAMPAIGN.toml --out NEW_RESULTS` with no `--continues`, a fresh alpha budget."""
    build, _ = CASES[case]
    step = build(tmp_path).next_step
    assert step is not None
    argv = _argv(step)
    assert _option(argv, "--out") == "NEW_RESULTS"
    assert _option(argv, "--continues") == "RESULTS"
    assert "--resume" not in argv


@pytest.mark.parametrize("case", NEW_QUESTION)
def test_a_next_step_for_other_arms_is_a_new_campaign(case: str, tmp_path: Path) -> None:
    build, _ = CASES[case]
    step = build(tmp_path).next_step
    assert step is not None and "--continues" not in _argv(step)


def _decided(tmp_path: Path, name: str, looks: int = 0) -> tuple[Path, str]:
    """A fixture copied, decided on its directory (the look recorded) and its next step's paths filled."""
    results = tmp_path / name
    shutil.copytree(FIXTURES / name, results)
    if looks:
        path = results / "campaign.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "sequential_looks": looks}, indent=1))
    assert run_cli("decide", results, "-q").returncode == 0  # inconclusive, its look recorded
    run = decide_directory(results, "default")
    assert run.look is None  # the recorded look saw these records
    assert run.decision.decision is DecisionKind.INCONCLUSIVE and run.decision.next_step is not None
    return results, fill_paths(run.decision.next_step, str(results), None)


def test_following_a_spent_campaigns_next_step_counts_its_look(tmp_path: Path) -> None:
    """The fixed campaign's one look spent alpha: the campaign its next step collects continues it, so
    it cannot promote what the earlier look could not (alone, the later records promote k2)."""
    results, step = _decided(tmp_path, "synthetic-null")
    assert "no campaign that continues it can promote an arm" in step
    argv = _argv(step)
    assert _option(argv, "--continues") == str(results) and "--until-resolved" in argv
    later = tmp_path / "later"
    shutil.copytree(FIXTURES / "synthetic-clean-win", later)
    assert decide_directory(later, "default").decision.decision is DecisionKind.PROMOTE
    path = later / "campaign.json"
    path.write_text(
        json.dumps(
            {**json.loads(path.read_text()), "continues": continuation(_option(argv, "--continues") or "")}
        )
    )
    run = decide_directory(later, "default")
    assert run.look is not None and run.look.alpha == 0.0
    assert run.decision.decision is DecisionKind.INCONCLUSIVE


def test_an_adaptive_campaign_with_looks_left_is_resumed_in_place(tmp_path: Path) -> None:
    results, step = _decided(tmp_path, "synthetic-null", looks=4)
    argv = _argv(step)
    assert _option(argv, "--out") == str(results) and "--resume" in argv and "--until-resolved" in argv
    assert "--continues" not in argv


def test_collect_takes_every_option_a_next_step_names(tmp_path: Path) -> None:
    helped = run_cli("collect", "--help").output
    for case in (*MEASURED_AGAIN, *NEW_QUESTION):
        step = CASES[case][0](tmp_path).next_step or ""
        for word in _argv(step):
            assert not word.startswith("--") or word in helped, (case, word)


def test_a_continuation_with_no_alpha_left_is_not_resumed_as_if_it_could_promote(tmp_path: Path) -> None:
    """Before: a campaign under --until-resolved that continues a spent one was told to resume with
    more boots (it had looks left), though no look on it can promote."""
    earlier, _ = _decided(tmp_path, "synthetic-null")  # a fixed campaign: its one look spent alpha
    later = tmp_path / "later"
    shutil.copytree(FIXTURES / "synthetic-null", later)
    path = later / "campaign.json"
    obj = {**json.loads(path.read_text()), "sequential_looks": 4, "continues": continuation(str(earlier))}
    path.write_text(json.dumps(obj))
    run = decide_directory(later, "default")
    assert run.look is not None and run.look.alpha == 0.0 and run.look.planned == 4
    step = run.decision.next_step or ""
    assert "--resume" not in _argv(step)
    assert "no campaign that continues it can promote an arm" in step


def _planned(tmp_path: Path, name: str, looks: int) -> Path:
    results = tmp_path / name
    shutil.copytree(FIXTURES / name, results)
    path = results / "campaign.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "sequential_looks": looks}, indent=1))
    return results


def test_a_resume_step_keeps_the_looks_the_campaign_was_planned_with(tmp_path: Path) -> None:
    """The step said `set boots = 17` on a campaign planned for 20 looks, which collect refuses (fewer
    looks than planned)."""
    step = decide_directory(_planned(tmp_path, "synthetic-null", 20), "default").decision.next_step
    assert step is not None and "--resume --until-resolved" in step
    boots = int(step.split("set boots = ")[1].split()[0])
    assert boots >= 20


def test_no_arm_is_settled_while_a_control_fails(tmp_path: Path) -> None:
    """A blind harness (every arm "eligible" on a harness that cannot tell off from off) settled every
    candidate, so collect --until-resolved stopped booting them on a failing control."""
    from mtpverdict.decide import settled_arms
    from mtpverdict.rules.registry import load_policy

    results = _planned(tmp_path, "synthetic-blind", 10)
    run = decide_directory(results, "default")
    assert {a.name for a in run.decision.arms if str(a.verdict) == "eligible"} == {"k1", "k2", "k3"}
    assert settled_arms(results, load_policy("default")) == {}


def test_a_void_head_stays_settled_while_a_control_fails(tmp_path: Path) -> None:
    """Before: a failing drift check (fake-server timings under load) unsettled every arm, so a head
    that accepts nothing was booted again each round; void is read from acceptance counts, not from
    the timings a failing control puts in doubt."""
    from mtpverdict.decide import settled_arms
    from mtpverdict.rules.registry import load_policy

    results = _planned(tmp_path, "synthetic-void-arm", 10)
    rules = tmp_path / "tight.toml"
    shipped = (Path(__file__).resolve().parents[2] / "rules" / "default.toml").read_text()
    rules.write_text(shipped.replace("max_drift = 0.05", "max_drift = 0.0001"))
    run = decide_directory(results, rules)
    assert any(c.name == "drift" and c.status.value == "fail" for c in run.decision.controls)
    assert settled_arms(results, load_policy(rules)) == {"k2": "void"}  # k1, k3 are booted again
