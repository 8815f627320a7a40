"""The decision: evidence from results, rules applied per arm, a verdict with stated reasons."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from mtpverdict.decide.engine import decide
from mtpverdict.decide.looks import anchored, plan_look
from mtpverdict.errors import InputError, Problem, ResultsError
from mtpverdict.evidence.gather import history_from, seat_differences
from mtpverdict.evidence.model import NoiseHistory
from mtpverdict.formats.decision import ControlStatus, Decision, decision_json, load_decision
from mtpverdict.formats.looks import Look, LookLog, append_look, held_looks, history_digest, read_looks
from mtpverdict.formats.policy import Policy
from mtpverdict.formats.results_io import Results, load_results
from mtpverdict.formats.what_if import WHAT_IF_REASON, is_what_if
from mtpverdict.rules.registry import load_policy

__all__ = [
    "WHAT_IF_REASON",
    "DecisionRun",
    "decide",
    "decide_directory",
    "decide_results",
    "decide_with",
    "load_histories",
    "settled_arms",
]


@dataclass(frozen=True, slots=True)
class DecisionRun:
    """A decision with the policy and results it came from, and its canonical JSON text.

    `look` is the look to record in the results directory (formats/looks.py) when no recorded look saw
    these records; None when one did.
    """

    decision: Decision
    policy: Policy
    results: Results
    look: Look | None = None

    @property
    def json_text(self) -> str:
        return decision_json(self.decision)

    @property
    def is_what_if(self) -> bool:
        """Read as a first look and no look recorded (decide --what-if)."""
        return is_what_if(self.decision)

    def as_what_if(self) -> DecisionRun:
        """The same reading marked as a what-if: no look to record, its last reason saying so."""
        marked = msgspec.structs.replace(self.decision, reasons=(*self.decision.reasons, WHAT_IF_REASON))
        return dataclasses.replace(self, decision=marked, look=None)


def decide_results(
    results: Results,
    policy: Policy,
    noise_history: Sequence[str | os.PathLike[str]] = (),
    *,
    any_seat: bool = False,
    what_if: bool = False,
) -> DecisionRun:
    """Decide on loaded results with a loaded policy (and archived A/A campaigns of the same seat:
    load_histories).

    what_if reads the campaign as its first look, whatever looks are recorded, and marks the decision
    as a what-if (DecisionRun.as_what_if): a reading under a policy, never a look.
    """
    histories = load_histories(results, policy, noise_history, any_seat=any_seat)
    return decide_with(results, policy, histories, what_if=what_if)


def load_histories(
    results: Results, policy: Policy, noise_history: Sequence[str | os.PathLike[str]], *, any_seat: bool
) -> list[NoiseHistory]:
    """The --noise-history archives, read. An archive whose seat differs (engine, version, device,
    model, the controls' non-speculative serve arguments) is refused with what differs (ResultsError
    naming its campaign.json), unless any_seat: then it is used and the decision says how it differs."""
    histories: list[NoiseHistory] = []
    for path in noise_history:
        archived = load_results(path)
        differs = seat_differences(results, archived)
        if differs and not any_seat:
            raise ResultsError(
                [
                    Problem(
                        str(Path(path) / "campaign.json"),
                        "--noise-history is not this campaign's seat: it differs in "
                        + "; ".join(differs)
                        + ". Archive A/A boots of this seat, or pass --noise-history-any-seat to use it "
                        "anyway (the decision then says so)",
                    )
                ]
            )
        found = history_from(archived, policy.include_cold, Path(path).name)
        histories.append(dataclasses.replace(found, differs=tuple(differs)))
    return histories


def decide_with(
    results: Results, policy: Policy, histories: Sequence[NoiseHistory], *, what_if: bool = False
) -> DecisionRun:
    """Decide with the histories read (load_histories), as the next look on the directory's recorded
    looks, or as a what-if."""
    log = LookLog() if what_if else directory_looks(results)
    planned = plan_look(
        results,
        policy.alpha,
        log,
        policy_sha256=policy.sha256,
        history_sha256=history_digest([h.sha256 for h in histories]),
    )
    run = DecisionRun(
        decision=decide(results, policy, histories, log),
        policy=policy,
        results=results,
        look=planned.look if planned.new else None,
    )
    return run.as_what_if() if what_if else run


def directory_looks(results: Results) -> LookLog:
    """The looks recorded in the results directory, checked against the decision kept there.

    Empty for results that are not a directory. A decision.json that cannot be read anchors nothing.
    """
    root = Path(results.path)
    if not root.is_dir():
        return LookLog()
    kept = ""
    if (root / "decision.json").is_file():
        try:
            kept = load_decision(root / "decision.json").inputs.records_sha256
        except InputError:
            kept = ""
    return anchored(read_looks(root), results, kept)


def decide_directory(
    results: str | os.PathLike[str],
    rules: str | os.PathLike[str] | None = None,
    noise_history: Sequence[str | os.PathLike[str]] = (),
    *,
    any_seat: bool = False,
) -> DecisionRun:
    """Load a results directory and a policy (a shipped name or a path), and decide."""
    policy = load_policy(rules)
    return decide_results(load_results(results), policy, noise_history, any_seat=any_seat)


SETTLED_VERDICTS = ("eligible", "rejected", "void")  # verdicts no further boot of the arm would change
# failing controls under which no verdict is settled: the controls drifted, or their positions or
# the harness make every comparison doubtful
UNSETTLING = ("drift", "positions", "blind", "harness", "duplicates")


def settled_arms(results_dir: str | os.PathLike[str], policy: Policy) -> dict[str, str]:
    """Candidates whose verdict is already eligible, rejected or void (collect --until-resolved).

    Each call is a look: it spends the alpha stats/looks.py allows after the looks recorded in the
    directory, and records itself there (formats/looks.py), so the false-promotion rate over every
    look stays at the policy's alpha. A directory that cannot be read yet, or holds no measurement,
    settles nothing (and is no look).
    """
    from mtpverdict.errors import InputError

    try:
        results = load_results(results_dir)
    except InputError:
        return {}
    if results.requests.empty and results.summaries.empty:
        return {}
    with held_looks(results_dir):  # planned and recorded with no handover in between
        run = decide_results(results, policy)
        if run.look is not None:  # append_look keeps one look per records
            append_look(results_dir, run.look)
    decision = run.decision
    # while the comparisons are not to be trusted no verdict they make is settled; a void head is
    # read from its acceptance counts, not from timings, and stays settled
    doubtful = any(c.status is ControlStatus.FAIL and c.name in UNSETTLING for c in decision.controls)
    settled = ("void",) if doubtful else SETTLED_VERDICTS
    return {a.name: str(a.verdict) for a in decision.arms if not a.is_control and a.verdict in settled}
