"""Looks are counted: each decision on a results directory is recorded with the alpha it spent, and
alpha already spent is never spent again (stats/looks.py, formats/looks.py, decide/looks.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from mtpverdict.decide import WHAT_IF_REASON, decide_directory
from mtpverdict.errors import ResultsError
from mtpverdict.formats.decision import DecisionKind
from mtpverdict.formats.looks import LOOKS_FILE, Look, append_look, append_resume, read_looks
from mtpverdict.stats.looks import look_alpha

from .conftest import FIXTURES, run_cli

ALPHA = 0.05


def test_bonferroni_over_the_planned_looks() -> None:
    assert look_alpha(ALPHA, 1, []) == ALPHA
    assert [look_alpha(ALPHA, 4, [ALPHA / 4] * k) for k in range(4)] == pytest.approx([ALPHA / 4] * 4)
    assert look_alpha(ALPHA, 4, [ALPHA / 4] * 4) == 0.0  # beyond the plan: nothing left


def test_raising_the_planned_looks_splits_only_what_is_left() -> None:
    """Before: a resume raising boots from 3 to 10 decided every later look at alpha / 10, ignoring
    the 2 x alpha / 3 already spent."""
    spent = [ALPHA / 3, ALPHA / 3]
    assert look_alpha(ALPHA, 10, spent) == pytest.approx((ALPHA / 3) / 8)
    assert look_alpha(ALPHA, 1, [ALPHA]) == 0.0  # a fixed design's one look spent it all


def test_any_sequence_of_looks_spends_at_most_alpha() -> None:
    rng = np.random.default_rng(5)
    for _ in range(500):
        spent: list[float] = []
        planned = int(rng.integers(1, 5))
        for _ in range(int(rng.integers(1, 30))):
            planned = max(planned, len(spent) + 1) + int(rng.integers(0, 3) == 0) * int(rng.integers(0, 5))
            spent.append(look_alpha(ALPHA, planned, spent))
        assert sum(spent) <= ALPHA * (1 + 1e-12)


def _copy(tmp_path: Path, name: str = "synthetic-clean-win") -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURES / name, out)
    (out / "decision.json").unlink(missing_ok=True)
    return out


def test_decide_records_its_look_once_per_data_and_a_second_look_after_a_resume_cannot_promote(
    tmp_path: Path,
) -> None:
    results = _copy(tmp_path)
    assert run_cli("decide", results, "-q").returncode == 0
    log = read_looks(results)
    assert [(x.look, x.alpha, x.planned) for x in log.looks] == [(1, ALPHA, 1)]
    assert run_cli("decide", results, "-q").returncode == 0  # the same data: the same look
    assert len(read_looks(results).looks) == 1
    # boots raised and the campaign resumed (collect records the resume), one more record collected
    boot = json.loads(
        next(line for line in (results / "records.jsonl").read_text().splitlines() if '"boot"' in line)
    )
    append_resume(results, 15)
    extra = {**boot, "boot": 99, "order": 99}
    with (results / "records.jsonl").open("a") as fh:
        fh.write(json.dumps(extra) + "\n")
    run = decide_directory(results, "default")
    assert run.decision.decision is DecisionKind.INCONCLUSIVE  # before: promote, at full alpha again
    assert any("alpha is spent" in r for r in run.decision.reasons)
    assert run.look is not None and run.look.look == 2 and run.look.alpha == 0.0


def _one_more_boot(results: Path) -> None:
    """collect raised boots and resumed (it records the resume), and one more boot record came in."""
    lines = (results / "records.jsonl").read_text().splitlines()
    boots = [json.loads(line) for line in lines if '"kind":"boot"' in line.replace(" ", "")]
    append_resume(results, len(boots))
    with (results / "records.jsonl").open("a") as fh:
        fh.write(json.dumps({**boots[0], "boot": 99, "order": 99}) + "\n")


def test_a_decision_written_elsewhere_is_counted_when_collect_resumes(tmp_path: Path) -> None:
    """Before: a decision through the API (or decide --out elsewhere) recorded no look, so the
    decision after the resume it led to spent the whole alpha again and promoted (provisional)."""
    results = _copy(tmp_path)
    first = decide_directory(results, "default")  # the API records nothing
    assert first.decision.decision is DecisionKind.PROMOTE and not read_looks(results).looks
    _one_more_boot(results)
    run = decide_directory(results, "default")
    assert run.look is not None and run.look.look == 2 and run.look.alpha == 0.0
    assert run.decision.decision is DecisionKind.INCONCLUSIVE
    assert any("counted as the look it followed" in r for r in run.decision.reasons)


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(f.relative_to(directory)): f.read_bytes() for f in sorted(directory.rglob("*")) if f.is_file()
    }


def test_a_decision_written_elsewhere_is_a_look_recorded_in_the_results_directory(tmp_path: Path) -> None:
    """Before: decide --out elsewhere recorded no look, so a campaign decided under one policy, then
    under another, each written elsewhere, spent a fresh alpha every time."""
    win = _copy(tmp_path)
    first = run_cli("decide", win, "--out", tmp_path / "a.json", "-q")
    assert first.stdout.strip() == "promote k2" and not (win / "decision.json").exists()
    assert [x.alpha for x in read_looks(win).looks] == [ALPHA]
    again = run_cli("decide", win, "--out", tmp_path / "b.json", "-q")  # the same records and policy
    assert again.stdout.strip() == "promote k2" and len(read_looks(win).looks) == 1
    other = run_cli("decide", win, "--rules", "strict-ci", "--out", tmp_path / "c.json", "-q")
    assert other.stdout.strip() == "inconclusive", other.output  # one more look: nothing left to spend
    assert [x.alpha for x in read_looks(win).looks] == [ALPHA, 0.0]


def test_a_what_if_reads_as_a_first_look_and_leaves_the_results_directory_as_it_was(tmp_path: Path) -> None:
    win = _copy(tmp_path)
    bare = _copy(tmp_path, "synthetic-null")
    shutil.rmtree(bare / "raw")  # a directory without raw/ gets none
    assert run_cli("decide", win, "-q").returncode == 0  # look 1 spends alpha
    for directory in (win, bare):
        before = sorted(directory.rglob("*"))
        content = _files(directory)
        ran = run_cli("decide", directory, "--rules", "strict-ci", "--what-if", "--out", tmp_path / "w.json")
        assert ran.returncode == 0, ran.output
        assert sorted(directory.rglob("*")) == before and _files(directory) == content
    reasons = json.loads((tmp_path / "w.json").read_text())["reasons"]
    assert reasons[-1] == WHAT_IF_REASON
    quiet = run_cli("decide", win, "--rules", "strict-ci", "--what-if", "-q")  # writes nothing
    assert quiet.stdout.strip() == "what-if promote k2"  # read as a first look, at the full alpha
    kept = run_cli("decide", win, "--what-if", "--out", win / "decision.json", "-q")
    assert kept.returncode == 2 and "a what-if records no look" in kept.stderr
    verified = run_cli("verify", tmp_path / "w.json", bare)
    assert verified.returncode == 1 and "NOT A DECISION" in verified.stdout, verified.output


def test_a_look_that_cannot_be_recorded_writes_no_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mtpverdict.formats import looks

    def read_only(directory: object, obj: object) -> None:
        raise PermissionError(13, "Permission denied")

    win = _copy(tmp_path)
    monkeypatch.setattr(looks, "_append", read_only)
    ran = run_cli("decide", win, "--out", tmp_path / "d.json")
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.output
    assert f"{win / LOOKS_FILE}: cannot record this look: Permission denied" in ran.stderr
    assert "--what-if" in ran.stderr and not (tmp_path / "d.json").exists()
    assert run_cli("decide", win, "--what-if", "--out", tmp_path / "d.json").returncode == 0


def test_a_decision_is_kept_where_its_path_is_written_and_never_over_the_directorys_own_files(
    tmp_path: Path,
) -> None:
    """Found in review: a symlink at --out was followed (the decision written where it points, inside
    the directory), and --out RESULTS/raw/looks.jsonl replaced the looks file with the decision."""
    results = _copy(tmp_path)
    link = tmp_path / "link.json"
    link.symlink_to(results / "decision.json")
    assert run_cli("decide", results, "--out", link, "-q").returncode == 0
    assert len(read_looks(results).looks) == 1 and not (results / "decision.json").exists()
    outside = tmp_path / "outside.json"
    (results / "decision.json").symlink_to(outside)
    assert run_cli("decide", results, "-q").returncode == 0  # written in the directory: its look
    assert len(read_looks(results).looks) == 1 and not outside.exists()
    for own in ("raw/looks.jsonl", "records.jsonl", "campaign.json", "raw/x.json"):
        kept = (results / own).read_bytes() if (results / own).exists() else None
        ran = run_cli("decide", results, "--out", results / own, "-q")
        assert ran.returncode == 2 and "results directory's own" in ran.stderr, (own, ran.output)
        assert ((results / own).read_bytes() if (results / own).exists() else None) == kept


def test_an_unrecorded_look_of_an_adaptive_campaign_spends_what_a_recorded_one_would(tmp_path: Path) -> None:
    results = _copy(tmp_path)
    campaign = json.loads((results / "campaign.json").read_text())
    campaign["sequential_looks"] = 5
    (results / "campaign.json").write_text(json.dumps(campaign))
    append_look(results, Look(1, 5, "earlier-1", ALPHA / 3, 3))  # look 1 of 3 planned
    append_resume(results, 10)  # look 2 on 10 boot records written elsewhere, then boots raised to 5
    run = decide_directory(results, "default")
    # look 2 spent (2 alpha / 3) / 2 = alpha / 3; look 3 of 5 splits the alpha / 3 left over 3 looks
    assert run.look is not None and run.look.look == 3
    assert run.look.alpha == pytest.approx(ALPHA / 9)  # before: alpha / 6, look 2 never counted


def test_an_edited_look_is_seen_and_the_decision_is_provisional(tmp_path: Path) -> None:
    """Before: rewriting a look's alpha to 0 refunded it without a word."""
    results = _copy(tmp_path)
    campaign = json.loads((results / "campaign.json").read_text())
    campaign["sequential_looks"] = 3
    (results / "campaign.json").write_text(json.dumps(campaign))
    append_look(results, Look(1, 5, "earlier-1", ALPHA / 3, 3))
    append_look(results, Look(2, 10, "earlier-2", ALPHA / 3, 3))
    path = results / LOOKS_FILE
    lines = path.read_text().splitlines()
    path.write_text(lines[0].replace(f"{ALPHA / 3}", "0.0") + "\n" + lines[1] + "\n")
    run = decide_directory(results, "default")
    assert run.decision.provisional
    assert any(f"{LOOKS_FILE} line 1 does not follow" in r for r in run.decision.reasons)
    path.write_text(lines[1] + "\n")  # the first look removed
    assert "line 1 does not follow" in read_looks(results).tampered
    assert decide_directory(results, "default").decision.provisional


def test_a_removed_looks_file_is_seen_from_the_decision_kept_in_the_directory(tmp_path: Path) -> None:
    """Before: deleting raw/looks.jsonl after a look and a resume gave the next look the whole alpha."""
    results = _copy(tmp_path)
    assert run_cli("decide", results, "-q").returncode == 0  # look 1, kept in the directory
    (results / LOOKS_FILE).unlink()
    with (results / "records.jsonl").open("a") as fh:  # more data, its resume record gone with the file
        first = next(x for x in (results / "records.jsonl").read_text().splitlines() if '"boot"' in x)
        fh.write(json.dumps({**json.loads(first), "boot": 99, "order": 99}) + "\n")
    decision = decide_directory(results, "default").decision
    assert decision.provisional
    assert any("decision.json) was taken on other records" in r for r in decision.reasons)


def test_the_looks_file_is_a_hash_chain(tmp_path: Path) -> None:
    results = _copy(tmp_path)
    append_look(results, Look(1, 5, "a", ALPHA / 2, 2))
    append_look(results, Look(1, 5, "a", ALPHA / 2, 2))  # the same records: the same look, once
    append_resume(results, 5)
    log = read_looks(results)
    assert len(log.looks) == 1 and log.resumes == (5,) and not log.tampered
    lines = (results / LOOKS_FILE).read_text().splitlines()
    (results / LOOKS_FILE).write_text("\n".join(reversed(lines)) + "\n")
    assert "line 1 does not follow" in read_looks(results).tampered


def test_an_until_resolved_campaign_spends_its_planned_looks(tmp_path: Path) -> None:
    results = _copy(tmp_path)
    campaign = json.loads((results / "campaign.json").read_text())
    campaign["sequential_looks"] = 3
    (results / "campaign.json").write_text(json.dumps(campaign))
    for k in (1, 2):
        append_look(results, Look(k, 5 * k, f"earlier-{k}", ALPHA / 3, 3))
    run = decide_directory(results, "default")
    assert run.look is not None and run.look.look == 3 and run.look.alpha == pytest.approx(ALPHA / 3)
    assert any("look 3 of 3 planned" in r for r in run.decision.reasons)
    if run.decision.decision is DecisionKind.INCONCLUSIVE:
        assert run.decision.next_step is not None and "NEW_RESULTS" in run.decision.next_step


def test_a_bad_looks_line_is_refused_with_file_and_line(tmp_path: Path) -> None:
    results = _copy(tmp_path)
    (results / LOOKS_FILE).write_text('{"kind": "look", "look": 1}\n')
    with pytest.raises(ResultsError) as caught:
        read_looks(results)
    assert f"{LOOKS_FILE}:1" in str(caught.value)


# ---- a new campaign that continues an earlier one carries the alpha its looks spent ---------------


def _continuing(tmp_path: Path, earlier: str, name: str = "synthetic-clean-win") -> Path:
    from mtpverdict.formats.looks import continuation

    later = _copy(tmp_path / "later", name)
    path = later / "campaign.json"
    obj = json.loads(path.read_text())
    obj["continues"] = continuation(earlier)
    path.write_text(json.dumps(obj, indent=1) + "\n")
    return later


def test_a_campaign_continuing_one_whose_alpha_is_spent_cannot_promote(tmp_path: Path) -> None:
    """Before: following "collect a new campaign" restarted alpha in the new results directory, so a
    campaign that was inconclusive could be collected again and again until one promoted."""
    earlier = _copy(tmp_path, "synthetic-null")
    assert run_cli("decide", earlier, "-q").returncode == 0  # inconclusive: its one look spent alpha
    later = _continuing(tmp_path, str(earlier))
    run = decide_directory(later, "default")
    assert run.decision.decision is DecisionKind.INCONCLUSIVE  # alone it promotes k2
    assert run.look is not None and run.look.alpha == 0.0
    assert any("synthetic-null spent 0.05" in r and "cannot promote" in r for r in run.decision.reasons)


def test_a_continued_campaign_that_spent_part_of_alpha_leaves_the_rest(tmp_path: Path) -> None:
    earlier = _copy(tmp_path, "synthetic-null")
    path = earlier / "campaign.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "sequential_looks": 4}, indent=1))
    assert run_cli("decide", earlier, "-q").returncode == 0  # look 1 of 4: alpha / 4
    later = _continuing(tmp_path, str(earlier))
    assert json.loads((later / "campaign.json").read_text())["continues"]["spent_alpha"] == ALPHA / 4
    run = decide_directory(later, "default")
    assert run.look is not None and run.look.alpha == pytest.approx(ALPHA * 3 / 4)
    assert run.decision.decision is DecisionKind.PROMOTE
    assert any("continues synthetic-null, whose looks spent alpha 0.0125" in r for r in run.decision.reasons)
    # the API, with no directory to record looks in, counts it too
    from mtpverdict.decide import decide
    from mtpverdict.formats.results_io import load_results
    from mtpverdict.rules import load_policy

    api = decide(load_results(later), load_policy("default"))
    assert any("whose looks spent alpha 0.0125" in r for r in api.reasons)


def test_a_continued_campaign_whose_looks_are_not_available_is_provisional(tmp_path: Path) -> None:
    later = _continuing(tmp_path, "an-earlier-campaign")
    cont = json.loads((later / "campaign.json").read_text())["continues"]
    assert cont["spent_alpha"] is None and "not available" in cont["unavailable"]
    run = decide_directory(later, "default")
    assert run.decision.provisional
    assert any(
        r.startswith(
            "provisional: this campaign continues an-earlier-campaign, whose looks are not available"
        )
        for r in run.decision.reasons
    )
    unlooked = _copy(tmp_path / "unlooked", "synthetic-null")  # a directory never decided here
    cont = json.loads((_continuing(tmp_path / "b", str(unlooked)) / "campaign.json").read_text())["continues"]
    assert cont["spent_alpha"] is None and "no recorded look" in cont["unavailable"]


def test_collect_takes_the_campaign_it_continues() -> None:
    ran = run_cli("collect", "--help")
    assert "--continues" in ran.output


def test_a_look_under_another_policy_on_the_same_records_is_a_new_look(tmp_path: Path) -> None:
    """Before: looks were keyed on the records alone, so deciding the same records again under a
    more lenient policy was 'the same look' and spent the full alpha a second time (promoting on
    whichever policy promotes is a look per policy)."""
    results = _copy(tmp_path)
    assert run_cli("decide", results, "-q").returncode == 0
    lenient = tmp_path / "lenient.toml"
    shipped = Path(__file__).resolve().parents[1] / "rules" / "default.toml"
    lenient.write_text(shipped.read_text() + "\n# edited\n")
    run = decide_directory(results, lenient)
    assert run.look is not None and run.look.look == 2 and run.look.alpha == 0.0
    assert run.decision.decision is not DecisionKind.PROMOTE
    again = decide_directory(results, "default")  # the first look's records, policy and history
    assert again.look is None


def test_looks_recorded_before_policy_and_history_digests_load_and_count_as_other_looks(
    tmp_path: Path,
) -> None:
    results = _copy(tmp_path)
    (results / "raw").mkdir(exist_ok=True)
    records = decide_directory(results, "default").results.records_sha256
    old = {"kind": "look", "look": 1, "boot_records": 15, "records_sha256": records}
    old |= {"alpha": ALPHA, "planned": 1}
    (results / LOOKS_FILE).write_text(json.dumps(old) + "\n")
    log = read_looks(results)
    assert [(x.records_sha256, x.policy_sha256, x.history_sha256) for x in log.looks] == [(records, "", "")]
    run = decide_directory(results, "default")
    assert run.look is not None and run.look.look == 2 and run.look.alpha == 0.0


def _spent(tmp_path: Path, name: str) -> Path:
    """A copy of a fixture whose one planned look was already taken on other records."""
    results = _copy(tmp_path, name)
    append_look(results, Look(1, 5, "earlier", ALPHA, 1))
    return results


def test_a_spent_look_keeps_a_slower_campaign_off(tmp_path: Path) -> None:
    """Before: a look with its alpha spent tested everything at 1e-9 and was inconclusive whatever it
    saw, so arms slower than off were never kept off; what only keeps arms off runs at the policy's
    alpha at every look."""
    run = decide_directory(_spent(tmp_path, "synthetic-crossover"), "default")
    assert run.look is not None and run.look.alpha == 0.0
    assert run.decision.decision is DecisionKind.KEEP_MTP_DISABLED
    assert {a.name: a.verdict.value for a in run.decision.arms if a.name.startswith("k")} == {
        "k1": "rejected",
        "k2": "rejected",
        "k3": "rejected",
    }


def test_a_spent_look_still_finds_a_void_head_and_promotes_nothing(tmp_path: Path) -> None:
    run = decide_directory(_spent(tmp_path, "synthetic-void-arm"), "default")
    assert run.look is not None and run.look.alpha == 0.0
    verdicts = {a.name: a.verdict.value for a in run.decision.arms}
    assert verdicts["k2"] == "void"
    assert run.decision.decision is DecisionKind.INCONCLUSIVE  # k1 and k3 win at alpha, not after it
    assert verdicts["k1"] == verdicts["k3"] == "inconclusive"


def _drifting_controls(tmp_path: Path, per_position: float, looks: int) -> Path:
    """synthetic-null with every control boot's decode time stretched by per_position x its order (a
    slope through the campaign the candidates do not share), planned for `looks` looks."""
    results = _copy(tmp_path, "synthetic-null")
    rows = [json.loads(line) for line in (results / "records.jsonl").read_text().splitlines()]
    order = {(r["arm"], r["boot"]): r["order"] for r in rows if r["kind"] == "boot"}
    for r in rows:
        if r["kind"] == "request" and r["arm"].startswith("off_") and r["t_end"] is not None:
            stretch = 1 + per_position * order[(r["arm"], r["boot"])]
            r["t_end"] = round(r["t_first"] + (r["t_end"] - r["t_first"]) * stretch, 6)
    (results / "records.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    path = results / "campaign.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "sequential_looks": looks}, indent=1))
    return results


def test_the_drift_check_runs_at_the_policys_alpha_at_every_look(tmp_path: Path) -> None:
    """Before: the controls' drift check ran at the look's share of alpha (0.005 at look 1 of 10), so a
    slope significant at the policy's alpha (p 0.022 against 0.05 / 2 shapes) passed at early looks;
    a failing check only holds a decision back, so it keeps the policy's alpha."""
    rules = tmp_path / "wide.toml"
    shipped = (Path(__file__).resolve().parents[1] / "rules" / "default.toml").read_text()
    rules.write_text(shipped.replace("max_drift = 0.05", "max_drift = 0.5"))  # significance alone
    run = decide_directory(_drifting_controls(tmp_path, 0.01, 10), rules)
    assert run.look is not None and run.look.look == 1 and run.look.alpha == pytest.approx(ALPHA / 10)
    drift = next(c for c in run.decision.controls if c.name == "drift")
    assert drift.status.value == "fail", drift.detail
    assert "p=0.022" in drift.detail


def _planned_boots(results: Path, planned: int) -> None:
    path = results / "campaign.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "planned_boots": planned}, indent=1))


def test_a_fixed_campaign_decided_before_its_planned_boots_is_an_interim_look(tmp_path: Path) -> None:
    """Before: deciding a fixed campaign while it was still collecting (3 of 4 planned boots per arm)
    was its one look, at the whole alpha, so the decision on the complete data could promote nothing.
    An interim look spends no alpha and promotes nothing; the complete campaign keeps its look."""
    results = _copy(tmp_path)
    _planned_boots(results, 4)  # collect planned 4 boots per arm; 3 are in
    assert run_cli("decide", results, "-q").returncode == 0
    interim = read_looks(results).looks
    assert [(x.look, x.alpha) for x in interim] == [(1, 0.0)]
    run = decide_directory(results, "default")
    assert run.decision.decision is DecisionKind.INCONCLUSIVE  # complete, it promotes k2
    assert any(
        "interim: the campaign is not complete (off_A 3 of 4, k1 3 of 4" in r for r in run.decision.reasons
    )
    assert (
        run.decision.next_step is not None and "finish the campaign's planned boots" in run.decision.next_step
    )
    _planned_boots(results, 3)  # the campaign file's boots lowered to what was collected, resumed
    complete = decide_directory(results, "default")
    assert complete.look is not None and complete.look.alpha == ALPHA and complete.look.look == 2
    assert complete.decision.decision is DecisionKind.PROMOTE
    assert run_cli("decide", results, "-q").returncode == 0  # recorded, once
    assert [(x.look, x.alpha) for x in read_looks(results).looks] == [(1, 0.0), (2, ALPHA)]
    assert decide_directory(results, "default").look is None  # the complete look again


def test_decide_holds_the_looks_file_while_it_plans_and_records_its_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before (found in review): a continuation handing over between decide planning its look and
    recording it left a look spending alpha after the handover. decide holds the lock across both."""
    import fcntl
    import importlib

    decide_module = importlib.import_module("mtpverdict.decide")
    results = _copy(tmp_path)
    (results / "raw").mkdir(exist_ok=True)
    held: list[bool] = []
    real = decide_module.decide_with

    def checking(*args: object, **kwargs: object) -> object:
        with (results / LOOKS_FILE).open("a") as other:
            try:
                fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.append(False)
            except BlockingIOError:
                held.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(decide_module, "decide_with", checking)
    assert run_cli("decide", results, "-q").returncode == 0
    assert held == [True] and len(read_looks(results).looks) == 1


def test_a_refused_decision_leaves_the_results_directory_as_it_was(tmp_path: Path) -> None:
    """Before: the lock opened raw/looks.jsonl before the inputs were read, so a decision refused for
    a foreign --noise-history left an empty looks file behind."""
    win = _copy(tmp_path)
    foreign = _copy(tmp_path / "other", "synthetic-null")
    campaign = json.loads((foreign / "campaign.json").read_text())
    campaign["scope"]["device"] = "another card"
    (foreign / "campaign.json").write_text(json.dumps(campaign))
    content = _files(win)
    ran = run_cli("decide", win, "--noise-history", foreign)
    assert ran.returncode == 2 and "not this campaign's seat" in ran.stderr, ran.output
    assert _files(win) == content and not (win / LOOKS_FILE).exists()


def test_a_laxer_alpha_after_a_look_adds_nothing(tmp_path: Path) -> None:
    """Found in review: after an inconclusive look at alpha 0.05, a policy with alpha 0.25 spent 0.20
    more and promoted (look 2 budgeted against its own alpha): the looks now share the smallest alpha
    their policies had, recorded with each look."""
    sim, lax = _sim(tmp_path), _lax(tmp_path)
    what_if = run_cli("decide", sim, "--rules", lax, "--what-if", "-q")
    assert what_if.stdout.strip() == "what-if promote k1", what_if.output  # as a first look it would
    assert run_cli("decide", sim, "--out", tmp_path / "a.json", "-q").stdout.strip() == "inconclusive"
    again = run_cli("decide", sim, "--rules", lax, "--out", tmp_path / "b.json")
    assert "DECISION: inconclusive" in again.stdout, again.output
    reasons = json.loads((tmp_path / "b.json").read_text())["reasons"]
    assert any(r.startswith("the looks share alpha 0.05, the smallest") for r in reasons), reasons
    looks = read_looks(sim).looks
    assert [(x.alpha, x.policy_alpha) for x in looks] == [(ALPHA, ALPHA), (0.0, 0.25)]


def test_a_linked_raw_a_bad_out_and_a_strict_what_if_are_refused_before_any_look(tmp_path: Path) -> None:
    """Found in review: with raw/ a symlink, --out RESULTS/raw/looks.jsonl replaced the looks file
    (the own-files guard compared unresolved paths); --out onto a directory recorded the look, then
    failed; --what-if --strict exited 0 on a what-if promotion where the decision is inconclusive."""
    win = _copy(tmp_path)
    elsewhere = tmp_path / "big-disk"
    (win / "raw").rename(elsewhere)
    (win / "raw").symlink_to(elsewhere, target_is_directory=True)
    assert run_cli("decide", win, "--out", tmp_path / "a.json", "-q").returncode == 0
    kept = (elsewhere / "looks.jsonl").read_bytes()
    for extra in ((), ("--what-if",)):
        ran = run_cli("decide", win, "--out", win / "raw" / "looks.jsonl", "-q", *extra)
        assert ran.returncode == 2 and "results directory's own raw/" in ran.stderr, ran.output
    assert (elsewhere / "looks.jsonl").read_bytes() == kept
    fresh = _copy(tmp_path / "fresh")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # the write would replace the node (as root, --out /dev/null the system's)
    (tmp_path / "store").mkdir()
    (fresh / "records.jsonl").rename(tmp_path / "store" / "r.jsonl")
    (fresh / "records.jsonl").symlink_to(tmp_path / "store" / "r.jsonl")
    for out, said in (
        (tmp_path, "is not a regular file"),
        (fifo, "is not a regular file"),
        (tmp_path / "no-such-folder" / "d.json", "no such directory"),
        (fresh / "records.jsonl", "results directory's own records.jsonl"),  # a link, found in review
    ):
        ran = run_cli("decide", fresh, "--out", out, "-q")
        assert ran.returncode == 2 and said in ran.stderr, ran.output
    assert not (fresh / LOOKS_FILE).exists() and fifo.is_fifo()
    strict = run_cli("decide", fresh, "--what-if", "--strict", "-q")
    assert strict.returncode == 2 and "a what-if is none" in strict.stderr


def test_a_what_if_is_no_decision_to_report_or_to_watch_a_seat_by(tmp_path: Path) -> None:
    """Found in review: `report --decision` headlined a what-if as the decision, and `alerts` wrote
    rules from it."""
    win = _copy(tmp_path)
    assert run_cli("decide", win, "--what-if", "--out", tmp_path / "w.json", "-q").returncode == 0
    for args in (
        ("report", win, "--decision", tmp_path / "w.json", "--out", tmp_path / "report"),
        ("alerts", tmp_path / "w.json", "--engine", "vllm", "--out", tmp_path / "alerts.yaml"),
    ):
        ran = run_cli(*args)
        assert ran.returncode == 2 and "a what-if (decide --what-if) is no decision" in ran.stderr, ran.output
    assert not (tmp_path / "report").exists() and not (tmp_path / "alerts.yaml").exists()


def _lax(tmp_path: Path) -> Path:
    """The default policy at alpha 0.25 and a 1% margin: laxer on both counts."""
    lax = tmp_path / "lax.toml"
    text = (FIXTURES.parent / "rules" / "default.toml").read_text()
    lax.write_text(
        text.replace('name = "default"', 'name = "lax"')
        .replace("alpha = 0.05 ", "alpha = 0.25 ", 1)
        .replace("equivalence_margin = 0.03 ", "equivalence_margin = 0.01 ", 1)
    )
    return lax


def _sim(tmp_path: Path) -> Path:
    """A simulated campaign whose k1 (+3%) is inconclusive at alpha 0.05 and promoted at 0.25."""
    sim = tmp_path / "sim"
    arms = ("--arm", "off_A", "--arm", "k1:1:3%", "--arm", "off_B")
    assert run_cli("simulate", sim, *arms, "--boots", "3", "--seed", "1").returncode == 0
    return sim


def test_a_look_without_its_policys_alpha_under_another_policy_makes_the_decision_provisional(
    tmp_path: Path,
) -> None:
    """Found in review: a looks file written before looks carried policy_alpha capped nothing, so a
    laxer alpha after such a look promoted as if nothing bounded it."""
    sim = _sim(tmp_path)
    records = decide_directory(sim, "default").results
    append_look(sim, Look(1, len(records.boots), records.records_sha256, ALPHA, 1, "an-older-policy"))
    run = decide_directory(sim, str(_lax(tmp_path)))
    assert run.decision.provisional
    assert any("without policy_alpha" in r for r in run.decision.reasons), run.decision.reasons


def test_a_decision_still_verifies_after_a_stricter_policy_is_decided(tmp_path: Path) -> None:
    """Found in review: re-deciding the first look said "the looks share alpha 0.05" once a later
    look under 0.05 was recorded, so the first decision no longer verified."""
    sim = _sim(tmp_path)
    lax = _lax(tmp_path)
    first = run_cli("decide", sim, "--rules", lax, "--out", tmp_path / "o1.json", "-q")
    assert first.stdout.strip() == "promote k1", first.output
    assert run_cli("decide", sim, "--out", tmp_path / "o2.json", "-q").returncode == 0
    verified = run_cli("verify", tmp_path / "o1.json", sim, "--rules", lax)
    assert verified.returncode == 0, verified.output
