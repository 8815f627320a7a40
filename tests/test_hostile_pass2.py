"""Hostile inputs of a second adversarial pass over parse, schedule-arm, merge and collect's redaction.

Each test names what it defends: a JSON document of many responses parsed in linear time, a schedule
whose depths no arm of the campaign measured, `--out` a symbolic link, and secrets a server prints
escaped, encoded or cut short (collect/redact.py).
"""

from __future__ import annotations

import time

import msgspec
import pytest

from mtpverdict.collect.schedule_arm import schedule_arm
from mtpverdict.errors import InputError
from mtpverdict.formats.decision import ScheduleRange
from mtpverdict.parse import parse_text

from .collect.test_schedule_arm import CAMPAIGN, _decision

RESPONSES = 60_000  # quadratic line counting took minutes on this many; linear takes about a second


def test_a_json_document_of_many_responses_is_parsed_in_linear_time() -> None:
    text = (
        "[\n"
        + ",\n".join('{"timings":{"draft_n":2,"draft_n_accepted":1}}' for _ in range(RESPONSES))
        + "\n]\n"
    )
    start = time.process_time()
    result = parse_text(text)
    assert time.process_time() - start < 15.0  # generous: a busy 2-core machine; the old code took > 60 s
    assert len(result.acceptance) == RESPONSES
    assert [r.line for r in result.acceptance[:3]] == [2, 3, 4] and result.acceptance[
        -1
    ].line == RESPONSES + 1


def _schedule_config(top: int, later: int) -> str:
    return (
        f'{{"method":"ngram","num_speculative_tokens":{top},"num_speculative_tokens_per_batch_size":'
        f'[[1,1,{top}],[2,1024,{later}]],"prompt_lookup_max":4,"prompt_lookup_min":2}}'
    )


@pytest.mark.parametrize(
    ("first", "second", "words"),
    [
        ((7, "ngram_k3"), (1, "ngram_k1"), "k=7, but their arm ngram_k3 runs ngram at k=3"),
        ((3, "ngram_k3"), (2, "ngram_k1"), "k=2, but their arm ngram_k1 runs ngram at k=1"),
        ((3, "ngram_k3"), (2, None), "k=2, but name no arm of this campaign that measured it (None)"),
        ((3, "ngram_k3"), (1, "ghost_k1"), "name no arm of this campaign that measured it (ghost_k1)"),
    ],
)
def test_a_schedule_at_a_depth_no_arm_measured_is_refused(
    first: tuple[int, str | None], second: tuple[int, str | None], words: str
) -> None:
    decision = _decision(config=_schedule_config(first[0], second[0]))
    assert decision.schedule is not None
    ranges = (
        ScheduleRange(1, 1, first[0], first[1], (1,), ("edited",)),
        ScheduleRange(2, 1024, second[0], second[1], (4,), ("edited",)),
    )
    edited = msgspec.structs.replace(
        decision, schedule=msgspec.structs.replace(decision.schedule, ranges=ranges)
    )
    with pytest.raises(InputError) as caught:
        schedule_arm(CAMPAIGN.read_text(), "c.toml", edited, "d.json", origin="d.json sha")
    problems = caught.value.problems
    assert len(problems) == 1 and problems[0].key == "schedule.ranges"
    assert words in problems[0].message
