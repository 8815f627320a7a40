"""The confirmation arm: a campaign arm that ran a schedule itself, judged against the derived schedule.

A schedule derived from fixed depths assumes each depth behaves the same when the engine switches depth
with the batch size. An arm served with the schedule (vLLM's num_speculative_tokens_per_batch_size in
its --speculative-config; its boots' per-position counters show the largest depth) tests that. At each
measured concurrency it must:
- run the depth the derived schedule runs there (its ranges read as vLLM reads them);
- be better than off beyond the floor at every selected workload where the schedule speculates (the
  family procedure's per-cell outcome, Holm across every arm and cell), and not worse than off where it
  does not;
- not be worse than the fixed depth the schedule chose there (the family procedure with that depth in
  the controls' place, intersection-union over the workloads, at unadjusted alpha: a stricter test of
  "not worse" than a corrected one).
Under a policy `reference` a range claims a gain over the reference, not over off: where the schedule
keeps the reference the arm must not be worse than off or than the reference; where a depth (or off)
beat the reference there the arm must be better than the reference, and not worse than off or that depth.
`[selection] confirm = true` promotes a schedule only when such an arm confirms it.
"""

from __future__ import annotations

from collections.abc import Sequence

from mtpverdict._text import pct
from mtpverdict.decide.regime import Choice, interval, served_spec, versus
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.results import Arm
from mtpverdict.stats.procedure import Outcome

Cell = tuple[str, int]


def served_depth(evidence: Evidence, arm: Arm, batch: int) -> int | None:
    """The depth an arm's served schedule runs at a batch size (gaps and the tail carry on, as in vLLM)."""
    spec = served_spec(evidence, arm)
    if spec is None or not spec.schedule:
        return None
    found = [r.k for r in spec.schedule if r.first_batch <= batch]
    return found[-1] if found else None


def _versus(
    evidence: Evidence, base: Arm, arm: Arm, group: Sequence[Cell], metric: str, better: bool
) -> tuple[bool, str]:
    """The arm against `base` over the group (at unadjusted alpha): whether it is better (`better`) or
    not worse, and the words saying so."""
    found = versus(evidence, base, [arm], group, metric, evidence.policy.alpha)
    if not found:
        return False, f"not compared with {base.name}"
    _, estimate, outcome = found[0]
    ok = outcome is Outcome.BETTER if better else outcome is not Outcome.WORSE
    return ok, f"vs {base.name} {outcome} ({pct(estimate)})"


def _at(
    evidence: Evidence, arm: Arm, group: Sequence[Cell], pick: Choice, metric: str, reference: Arm | None
) -> tuple[bool, str]:
    """Whether the arm confirms the schedule at one measured concurrency, and the numbers saying so
    (`reference`: the policy's, against which the ranges were chosen)."""
    conc = group[0][1]
    runs = served_depth(evidence, arm, conc)
    if runs != pick.k:
        return False, f"c={conc}: {arm.name} runs k={runs}, the schedule k={pick.k}"
    comps = [evidence.comparison(arm.name, w, c, metric) for w, c in group]
    if any(c is None for c in comps):
        return False, f"c={conc}: {arm.name} not compared with off"
    shown = [c for c in comps if c is not None]
    outcomes = {str(c.cell_outcome) for c in shown}
    text = (
        f"c={conc}: {arm.name} vs off {', '.join(sorted(outcomes))} ({', '.join(interval(c) for c in shown)})"
    )
    if pick.k > 0 and reference is None:
        ok = all(c.cell_outcome is Outcome.BETTER for c in shown)
    else:
        ok = not any(c.cell_outcome is Outcome.WORSE for c in shown)
    checks: list[tuple[Arm, bool]] = []
    if reference is not None and pick.resolved and pick.arm is not reference:
        checks.append((reference, True))  # the range claims a gain over the reference
    if pick.k > 0 and pick.arm is not None:
        checks.append((pick.arm, False))
    for base, better in checks:
        good, words = _versus(evidence, base, arm, group, metric, better)
        ok, text = ok and good, f"{text}; {words}"
    return ok, text


def confirm(
    evidence: Evidence,
    arms: Sequence[Arm],
    groups: Sequence[tuple[Cell, ...]],
    picks: Sequence[Choice],
    reference: Arm | None = None,
) -> tuple[bool | None, tuple[str, ...]]:
    """(confirmed by some arm, or None when no arm ran a schedule; the lines saying how). `reference`:
    the policy's reference arm, when the schedule's ranges were chosen against it."""
    if not arms:
        return None, ()
    metric = str(evidence.policy.selection.metric)
    lines = []
    confirmed = False
    for arm in arms:
        found = [_at(evidence, arm, g, p, metric, reference) for g, p in zip(groups, picks, strict=True)]
        ok = all(f[0] for f in found)
        confirmed = confirmed or ok
        verdict = "confirms the schedule" if ok else "does not confirm the schedule"
        lines.append(f"confirmation arm {arm.name} {verdict}: " + "; ".join(f[1] for f in found))
    return confirmed, tuple(lines)
