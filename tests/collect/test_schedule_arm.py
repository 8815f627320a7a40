"""schedule-arm: the campaign again, with an arm serving exactly the schedule a decision derived."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from mtpverdict.collect.campaign import parse_campaign
from mtpverdict.collect.schedule_arm import kept_args, schedule_arm
from mtpverdict.errors import InputError
from mtpverdict.formats.decision import Decision, ScheduleRange, decision_json, load_decision
from mtpverdict.serveconfig import ServeSpec, extract_spec

from ..conftest import ROOT, run_cli

CAMPAIGN = ROOT / "collectors" / "vllm-cpu" / "schedule-campaign.toml"
GOLDEN = ROOT / "tests" / "golden" / "synthetic-crossover@default-schedule.json"
CONFIG = (
    '{"method":"ngram","num_speculative_tokens":3,"num_speculative_tokens_per_batch_size":[[1,1,3],'
    '[2,1024,1]],"prompt_lookup_max":4,"prompt_lookup_min":2}'
)


def _decision(campaign_id: str = "vllm-cpu-schedule", config: str | None = CONFIG) -> Decision:
    """A decision in schedule mode on schedule-campaign.toml: k3 at batch size 1, k1 from 2."""
    golden = load_decision(GOLDEN)
    assert golden.schedule is not None
    ranges = (
        ScheduleRange(1, 1, 3, "ngram_k3", (1,), ("k3 better",)),
        ScheduleRange(2, 1024, 1, "ngram_k1", (4,), ("k1 kept",)),
    )
    schedule = msgspec.structs.replace(
        golden.schedule, method="ngram", ranges=ranges, speculative_config=config, note=None
    )
    if config is None:
        schedule = msgspec.structs.replace(schedule, note="no range speculates: serve without it")
    campaign = msgspec.structs.replace(golden.campaign, id=campaign_id)
    return msgspec.structs.replace(golden, schedule=schedule, campaign=campaign)


def _made(text: str | None = None, decision: Decision | None = None, **kw: str) -> tuple[str, list[str]]:
    made = schedule_arm(
        text or CAMPAIGN.read_text(), "c.toml", decision or _decision(), "d.json", origin="d.json sha", **kw
    )
    return made.text, list(made.dropped)


def test_the_arm_serves_the_decisions_json_before_the_closing_control() -> None:
    text, dropped = _made()
    plan = parse_campaign(text, "new.toml")
    assert [a.name for a in plan.arms] == ["off_A", "ngram_k1", "ngram_k3", "ngram_schedule", "off_B"]
    assert dropped == ["ngram_sched"]  # the hand-written schedule arm ran another schedule
    arm = plan.arms[3]
    assert (arm.role, arm.method, arm.k) == ("candidate", "ngram", 3)
    assert arm.serve_args == ("--speculative-config", CONFIG, "--per-request-spec-decode-metrics", "detailed")
    assert dict(arm.labels) == {"confirms": "d.json sha"}
    spec = extract_spec(arm.serve_args)
    assert isinstance(spec, ServeSpec)
    assert [(r.first_batch, r.k) for r in spec.schedule] == [(1, 3), (2, 1)]
    assert plan.id == "vllm-cpu-schedule-confirm"
    assert plan.arms[:3] == parse_campaign(CAMPAIGN.read_text(), "c.toml").arms[:3]  # untouched


def test_the_files_comments_and_layout_survive() -> None:
    text, _ = _made()
    old = CAMPAIGN.read_text()
    assert text.splitlines()[:5] == old.splitlines()[:5]  # the header comment
    assert "# num_speculative_tokens: the schedule's largest depth" not in text  # went with its arm
    assert f"serve_args = [\"--speculative-config\", '{CONFIG}'" in text  # a literal string, as written
    assert '\n\n[[arms]]\nname = "off_B"' in text


def test_a_confirmation_campaign_keeps_its_id_and_can_be_made_again() -> None:
    first, _ = _made()
    again, dropped = _made(first, _decision("vllm-cpu-schedule-confirm"), name="second")
    assert dropped == ["ngram_schedule"]
    plan = parse_campaign(again, "again.toml")
    assert plan.id == "vllm-cpu-schedule-confirm" and "second" in [a.name for a in plan.arms]
    assert plan.notes is not None and plan.notes.endswith("second serves the schedule of d.json sha.")
    assert "ngram_schedule serves" not in plan.notes and plan.notes.startswith("A 3.3M-parameter model")


@pytest.mark.parametrize(
    ("decision", "key", "words"),
    [
        (msgspec.structs.replace(_decision(), schedule=None), "schedule", 'mode = "schedule"'),
        (_decision(config=None), "schedule.speculative_config", "no range speculates"),
        (_decision("another"), "campaign.id", "made on campaign 'another'"),
    ],
)
def test_a_decision_without_a_schedule_for_this_campaign_is_refused(
    decision: Decision, key: str, words: str
) -> None:
    with pytest.raises(InputError) as exc:
        _made(decision=decision)
    (problem,) = exc.value.problems
    assert problem.source == "d.json" and problem.key == key and words in problem.message


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (('engine = "vllm"', 'engine = "llamacpp"'), "server.engine", "only vLLM 0.32"),
        (('name = "ngram_k3"', 'name = "ngram_k4"'), "arms", "ngram_k3 is not in this campaign"),
    ],
)
def test_a_campaign_that_cannot_serve_the_schedule_is_refused(
    edit: tuple[str, str], key: str, words: str
) -> None:
    with pytest.raises(InputError) as exc:
        _made(CAMPAIGN.read_text().replace(*edit))
    (problem,) = exc.value.problems
    assert problem.source == "c.toml" and problem.key == key and words in problem.message


def test_a_name_already_taken_is_refused() -> None:
    with pytest.raises(InputError, match="already has an arm named ngram_k1"):
        _made(name="ngram_k1")


def test_only_speculative_flags_are_replaced() -> None:
    args = (
        "--speculative-config.method",
        "ngram",
        "--per-request-spec-decode-metrics=detailed",
        "--speculative-config={}",
        "--per-request-spec-decode-metrics",
        "basic",
    )
    assert kept_args(args) == [
        "--per-request-spec-decode-metrics=detailed",
        "--per-request-spec-decode-metrics",
        "basic",
    ]


def test_the_command_writes_a_new_file_and_refuses_to_overwrite(tmp_path: Path) -> None:
    decision = tmp_path / "d.json"
    decision.write_text(decision_json(_decision()))
    out = tmp_path / "confirm.toml"
    done = run_cli("schedule-arm", CAMPAIGN, decision, "--out", out)
    assert done.returncode == 0, done.output
    assert "arm ngram_schedule (settings of ngram_k3)" in done.output
    assert "left out ngram_sched: it ran another schedule" in done.output
    arm = parse_campaign(out.read_text(), str(out)).arms[3]
    assert arm.name == "ngram_schedule" and dict(arm.labels)["confirms"].startswith("d.json sha256 ")
    again = run_cli("schedule-arm", CAMPAIGN, decision, "--out", out)
    assert again.returncode == 2 and again.output.count("Error:") == 1 and "already exists" in again.output


def test_a_broken_decision_file_is_one_error_naming_its_line(tmp_path: Path) -> None:
    decision = tmp_path / "d.json"
    decision.write_text('{\n  "format": "mtpverdict.decision/2",\n  "decision": ,\n}\n')
    done = run_cli("schedule-arm", CAMPAIGN, decision, "--out", tmp_path / "c.toml")
    assert done.returncode == 2 and done.output.count("Error:") == 1, done.output
    assert f"{decision}:3" in done.output and "Traceback" not in done.output
    assert not (tmp_path / "c.toml").exists()


def test_the_config_recorded_in_the_campaign_follows_the_schedule() -> None:
    text = CAMPAIGN.read_text().replace(
        'name = "ngram_k3"\nrole = "candidate"',
        'name = "ngram_k3"\nrole = "candidate"\nconfig = { method = "ngram", num_speculative_tokens = 3 }',
    )
    made, _ = _made(text)
    arm = parse_campaign(made, "new.toml").arms[3]
    assert arm.config == json.loads(CONFIG)


INLINE = """campaign_version = 1
id = "tiny"
title = "arms written as one inline array"
concurrency = [1, 4]
reps = 1
arms = [
  { name = "off_A", role = "control" },
  { name = "k2", role = "candidate", method = "ngram", k = 2, serve_args = ["--speculative-config", K2] },
  { name = "off_B", role = "control" },
]

[server]
mode = "launch"
command = ["serve", "{spec}"]

[[workloads]]
id = "w"
prompt = "x"
max_tokens = 8
""".replace("K2", '\'{"method":"ngram","num_speculative_tokens":2}\'')


def test_arms_written_inline_get_an_inline_arm() -> None:
    config = json.dumps(
        {
            "method": "ngram",
            "num_speculative_tokens": 2,
            "num_speculative_tokens_per_batch_size": [[1, 1, 2], [2, 1024, 0]],
        },
        separators=(",", ":"),
    )
    decision = _decision("tiny", config)
    assert decision.schedule is not None
    ranges = (
        ScheduleRange(1, 1, 2, "k2", (1,), ("k2 better",)),
        ScheduleRange(2, 1024, 0, None, (4,), ("off",)),
    )
    decision = msgspec.structs.replace(
        decision, schedule=msgspec.structs.replace(decision.schedule, ranges=ranges)
    )
    text, dropped = _made(INLINE, decision)
    assert dropped == []
    plan = parse_campaign(text, "new.toml")
    assert [a.name for a in plan.arms] == ["off_A", "k2", "ngram_schedule", "off_B"]
    assert plan.arms[2].serve_args == ("--speculative-config", config) and plan.arms[2].k == 2
    assert plan.notes == "ngram_schedule serves the schedule of d.json sha."
    assert '{name = "ngram_schedule"' in text  # inline, as the file writes its arms


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ('{"method":"ngram","num_speculative_tokens":3}', "with num_speculative_tokens_per_batch_size"),
        (CONFIG.replace("[2,1024,1]", "[2,1024,2]"), "does not match schedule.ranges"),
        (CONFIG.replace('"num_speculative_tokens":3', '"num_speculative_tokens":4'), "does not match"),
        ("not json", "is not a vLLM speculative config"),
    ],
)
def test_a_config_that_is_not_the_ranges_is_refused(config: str, words: str) -> None:
    """A decision file edited by hand is checked before its JSON is served: one error, no traceback."""
    with pytest.raises(InputError) as exc:
        _made(decision=_decision(config=config))
    (problem,) = exc.value.problems
    assert problem.key == "schedule.speculative_config" and words in problem.message


def test_an_empty_or_armless_schedule_is_refused() -> None:
    decision = _decision()
    assert decision.schedule is not None
    empty = msgspec.structs.replace(decision.schedule, ranges=())
    armless = msgspec.structs.replace(
        decision.schedule,
        ranges=tuple(msgspec.structs.replace(r, arm=None) for r in decision.schedule.ranges),
    )
    for schedule in (empty, armless):
        with pytest.raises(InputError) as exc:
            _made(decision=msgspec.structs.replace(decision, schedule=schedule))
        assert exc.value.problems[0].key == "schedule.speculative_config"


def test_an_external_server_cannot_be_given_a_schedule() -> None:
    text = CAMPAIGN.read_text().replace('mode = "launch"', 'mode = "external"')
    text = re.sub(r'(?m)^(role = "\w+")$', r'\1\nbase_url = "http://127.0.0.1:1"', text)
    parse_campaign(text, "external.toml")  # a valid campaign: only the schedule cannot be served
    with pytest.raises(InputError) as exc:
        _made(text)
    (problem,) = exc.value.problems
    assert problem.key == "server.mode" and 'mode = "launch"' in problem.message


def test_the_short_and_joined_spellings_are_replaced_and_labels_not_copied() -> None:
    text = CAMPAIGN.read_text().replace(
        'serve_args = ["--speculative-config", \'{"method":"ngram","num_speculative_tokens":3,',
        'labels = { note = "k3" }\nserve_args = ["-sc", \'{"method":"ngram","num_speculative_tokens":3,',
    )
    assert "-sc" in text
    made, _ = _made(text)
    arm = parse_campaign(made, "new.toml").arms[3]
    assert arm.serve_args[:2] == ("--speculative-config", CONFIG) and "-sc" not in arm.serve_args
    assert dict(arm.labels) == {"confirms": "d.json sha"}


# --- a hostile decision --------------------------------------------------------------------------------

DEPTHS = '"num_speculative_tokens":3,"num_speculative_tokens_per_batch_size":[[1,1,3],[2,1024,1]]'


@pytest.mark.parametrize(
    ("config", "expect"),
    [
        (  # another method and an attacker's draft model, at the schedule's depths
            '{"method":"draft_model","model":"attacker/evil-draft",' + DEPTHS + "}",
            (
                'method = "draft_model", but arm ngram_k3 runs "ngram"',
                '"attacker/evil-draft" is not a setting',
            ),
        ),
        (  # a key the copied arm does not set
            '{"method":"ngram",'
            + DEPTHS
            + ',"prompt_lookup_max":4,"prompt_lookup_min":2,"disable_logprobs":1}',
            ("disable_logprobs = 1 is not a setting of arm ngram_k3",),
        ),
        (  # placeholders collect would fill in
            '{"method":"ngram",' + DEPTHS + ',"prompt_lookup_max":"{port}","prompt_lookup_min":"{results}"}',
            ('prompt_lookup_max = "{port}", but arm ngram_k3 runs 4',),
        ),
        ('{"method":"ngram",' + DEPTHS + ',"prompt_lookup_max":4}', ("prompt_lookup_min is missing",)),
    ],
)
def test_a_decision_serving_other_settings_than_its_arm_is_refused(
    config: str, expect: tuple[str, ...]
) -> None:
    with pytest.raises(InputError) as caught:
        _made(decision=_decision(config=config))
    problem = caught.value.problems[0]
    assert problem.key == "schedule.speculative_config" and problem.source == "d.json"
    for fragment in expect:
        assert fragment in problem.message, problem.message


def test_the_arm_serves_json_derived_from_its_own_settings(tmp_path: Path) -> None:
    spaced = CONFIG.replace(",", ",\n ")  # raw newlines between the tokens: the same config
    decision = tmp_path / "d.json"
    decision.write_text(decision_json(_decision(config=spaced)))
    out = tmp_path / "confirm.toml"
    done = run_cli("schedule-arm", CAMPAIGN, decision, "--out", out)
    assert done.returncode == 0, done.output
    arm = parse_campaign(out.read_text(), str(out)).arms[3]
    assert arm.serve_args[:2] == ("--speculative-config", CONFIG)  # derived, canonical, one line


def test_a_placeholder_of_the_arm_matches_the_value_collect_filled_in() -> None:
    text = CAMPAIGN.read_text().replace(
        '"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max"',
        '"method":"ngram","num_speculative_tokens":3,"x":"{models}/a/{arm}.json","prompt_lookup_max"',
        1,
    )
    filled = CONFIG.replace('"prompt_lookup_max"', '"x":"/srv/models/a/ngram_k3.json","prompt_lookup_max"')
    made = schedule_arm(text, "c.toml", _decision(config=filled), "d.json", origin="d.json sha")
    assert '"x":"{models}/a/{arm}.json"' in made.config  # served as the campaign writes it
    wrong = filled.replace("/a/", "/b/")
    with pytest.raises(InputError, match='x = "/srv/models/b/ngram_k3.json", but arm ngram_k3 runs'):
        schedule_arm(text, "c.toml", _decision(config=wrong), "d.json", origin="d.json sha")


def test_100_kb_of_notes_are_read_in_linear_time() -> None:
    import time

    notes = "v" * 50_000 + " " + "a serves the schedule of a" * 2000  # ~100 KB: a word, notes never ended
    old = next(line for line in CAMPAIGN.read_text().splitlines() if line.startswith("notes = "))
    text = CAMPAIGN.read_text().replace(old, f'notes = "{notes}"', 1)  # no full stop anywhere
    start = time.process_time()
    made, _ = _made(text)
    assert time.process_time() - start < 2.0  # 31 s before: the notes pattern backtracked
    assert parse_campaign(made, "n.toml").notes.startswith(notes)  # type: ignore[union-attr]
