"""Footguns refused: each mistake a new user makes gets one clear error with its hint, never a silent
wrong answer."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from mtpverdict import UnknownArmError, load_decision

from .conftest import DATA, FIXTURES, GOLDEN, ROOT, copy_fixture, run_cli


def test_decision_arm_names_the_arms_that_exist() -> None:
    decision = load_decision(GOLDEN / "synthetic-void-arm@default.json")
    assert decision.arm("k3").name == "k3"
    with pytest.raises(UnknownArmError) as raised:
        decision.arm("k9")
    message = str(raised.value)
    assert "k9" in message and "off_A, k1, k2, k3, off_B" in message
    assert isinstance(raised.value, KeyError)  # callers that caught KeyError still do


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--effect", "5", "--boot-sd", "2%"], "--effect 5: a bare number is a fraction (5 means +500%)"),
        (["--effect", "5%", "--boot-sd", "2"], "--boot-sd 2: a bare number is a fraction (2 means 200%)"),
        (["--effect", "5%", "--boot-sd", "2%", "--run-sd", "1"], "--run-sd 1: a bare number"),
    ],
)
def test_plan_refuses_a_bare_number_of_one_or_more(args: list[str], fragment: str) -> None:
    done = run_cli("plan", *args)
    assert done.returncode == 2, done.output
    assert fragment in done.stderr and "write 5% or 0.05" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1


def test_plan_takes_a_fraction_or_a_percentage() -> None:
    for effect, sd in (("0.05", "0.02"), ("5%", "2%"), ("+5%", "0.5%")):
        done = run_cli("plan", "--effect", effect, "--boot-sd", sd)
        assert done.returncode == 0, done.stderr


def _warn_only(tmp: Path, empty: bool = False) -> Path:
    text = (ROOT / "rules" / "default.toml").read_text().replace('name = "default"', 'name = "lenient"')
    text = text.split("[[rules]]")[0] if empty else text.replace('severity = "veto"', 'severity = "warn"')
    path = tmp / "lenient.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("empty", [False, True], ids=["warnings-only", "no-rules"])
def test_rules_check_warns_of_a_policy_that_cannot_veto(tmp_path: Path, empty: bool) -> None:
    policy = _warn_only(tmp_path, empty)
    done = run_cli("rules", "check", policy)
    assert done.returncode == 0, done.output
    assert 'cannot veto a promotion: no rule has severity = "veto"' in done.output
    shipped = run_cli("rules", "check", "default")
    assert shipped.returncode == 0 and "cannot veto" not in shipped.output


@pytest.mark.parametrize("empty", [False, True], ids=["warnings-only", "no-rules"])
def test_decide_strict_refuses_a_policy_that_cannot_veto(tmp_path: Path, empty: bool) -> None:
    policy = _warn_only(tmp_path, empty)
    null = str(copy_fixture("synthetic-null", tmp_path))  # no depth is faster than off
    loose = run_cli("decide", null, "--rules", policy, "--out", tmp_path / "d.json")
    assert loose.returncode == 0 and "cannot veto a promotion" in loose.stderr
    out = tmp_path / "strict.json"
    strict = run_cli("decide", null, "--rules", policy, "--out", out, "--strict")
    assert strict.returncode == 2, strict.output
    assert strict.stderr.startswith(f"Error: {policy}: cannot veto a promotion") and not out.exists()


def test_a_refused_resume_draws_no_progress_bar(tmp_path: Path) -> None:
    from .collect.conftest import campaign_text

    results = tmp_path / "results"
    shutil.copytree(FIXTURES / "synthetic-null", results)  # another campaign's results
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(campaign_text(9))
    done = run_cli("collect", campaign, "--out", results, "--resume")
    assert done.returncode == 2
    assert "differs from the campaign being written" in done.stderr
    assert done.stdout == "", done.stdout  # was a "boots 0/None" bar


def test_deciding_on_vllm_bench_files_says_to_import_them(tmp_path: Path) -> None:
    folder = tmp_path / "bench"
    folder.mkdir()
    shutil.copy(DATA / "vllm_bench" / "k3_detailed.json", folder)
    done = run_cli("decide", folder)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "campaign.json: not found" in done.stderr
    assert f"mtpverdict import vllm-bench {folder}/*.json --arm NAME --out RESULTS" in done.stderr


def test_a_campaign_file_given_as_the_policy_is_one_error(tmp_path: Path) -> None:
    campaign = ROOT / "collectors" / "vllm-cpu" / "campaign.toml"
    done = run_cli("decide", FIXTURES / "synthetic-null", "--rules", campaign)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr  # was 17 unknown-key lines
    assert "a campaign file (campaign_version), not a policy" in done.stderr
    assert "rules/default.toml" in done.stderr and "mtpverdict collect" in done.stderr


def test_a_crossover_points_to_a_schedule_reading_that_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the hint said `decide RESULTS --rules default-schedule`, which after the first look is
    one more look at the alpha that look spent, so it could promote nothing (inconclusive)."""
    monkeypatch.chdir(tmp_path)
    crossover = copy_fixture("synthetic-crossover", tmp_path).relative_to(tmp_path)
    out = tmp_path / "d.json"
    done = run_cli("decide", crossover, "--out", out, env={"COLUMNS": "120"})
    assert done.returncode == 0
    reasons = json.loads(out.read_text())["reasons"]
    assert any(
        "the best depth depends on load" in r
        and r.endswith("mtpverdict decide RESULTS --rules default-schedule --what-if")
        for r in reasons
    ), reasons
    hint = f"  mtpverdict decide {crossover} --rules default-schedule --what-if"
    assert hint in done.stdout.splitlines()
    reading = run_cli(*hint.split()[1:], "--out", tmp_path / "what-if.json")
    assert reading.returncode == 0
    assert 'serve: vLLM --speculative-config \'{"method":"mtp"' in reading.stdout
    assert "what-if: read as the campaign's first look" in reading.stdout
    looks = (crossover / "raw" / "looks.jsonl").read_text().splitlines()
    assert len(looks) == 1  # the reading took no look
    schedule = run_cli("decide", crossover, "--rules", "default-schedule", "--out", out, "-q")
    assert schedule.stdout.strip() == "inconclusive"  # a decision is one more look: alpha spent
    assert json.loads((tmp_path / "what-if.json").read_text())["schedule"]["speculative_config"] is not None


def test_the_schedule_policy_is_the_default_policy_in_schedule_mode() -> None:
    default = (ROOT / "rules" / "default.toml").read_text().splitlines()
    schedule = (ROOT / "rules" / "default-schedule.toml").read_text().splitlines()
    changed = {i for i, (a, b) in enumerate(zip(default, schedule, strict=True)) if a != b}
    assert {schedule[i].split(" =")[0] for i in changed if not schedule[i].startswith("#")} == {
        "name",
        "description",
        "mode",
    }


def test_a_confirmation_arm_under_a_single_depth_policy_points_to_a_reading(tmp_path: Path) -> None:
    """Found in review: the hint said to set schedule mode in the policy and decide again under
    `--rules default`: one more look at the alpha the first spent (and the shipped policy cannot be
    edited). It is a what-if reading that runs."""
    sim = tmp_path / "cf"
    arms = ("off_A", "k1:1:-20%", "k3:3:-20%", "sched:3:15%", "off_B")
    args = [x for arm in arms for x in ("--arm", arm)]
    assert run_cli("simulate", sim, *args, "--boots", "3", "--seed", "1").returncode == 0
    campaign = json.loads((sim / "campaign.json").read_text())
    sched = next(a for a in campaign["arms"] if a["name"] == "sched")
    ranges = {"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 1024, 0]]}
    sched["serve_argv"][-1] = json.dumps(json.loads(sched["serve_argv"][-1]) | ranges)
    (sim / "campaign.json").write_text(json.dumps(campaign))
    out = tmp_path / "d.json"
    assert run_cli("decide", sim, "--out", out, "-q").returncode == 0
    step = json.loads(out.read_text())["next_step"]
    assert step.startswith("read the schedule its confirmation arm confirms (a what-if"), step
    command = step.rsplit(": ", 1)[1].replace("RESULTS", str(sim))
    assert command.endswith("--rules default-schedule --what-if"), command
    reading = run_cli(*shlex.split(command)[1:], "-q")
    assert reading.returncode == 0 and reading.stdout.startswith("what-if "), reading.output
