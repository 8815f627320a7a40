"""Harness parity: an arm's serve_args may hold only its engine's speculative flags, each with its values."""

from __future__ import annotations

import pytest

from mtpverdict.collect.campaign import ArmPlan, depth_problems, parity_problems


def _arm(*args: str) -> ArmPlan:
    return ArmPlan("k2", "candidate", "ngram", 2, args, None, "default", (), None)


@pytest.mark.parametrize(
    "args",
    [
        # llama.cpp (common/arg.cpp of the vendored tree): a type, sizes, a switch, a two-value flag
        ("--spec-type", "ngram-simple", "--spec-draft-n-max", "2", "--spec-ngram-simple-size-n", "3"),
        ("--spec-default", "--spec-draft-n-max", "4"),
        ("-md", "/m/draft.gguf", "--spec-replace", "<a>", "<b>", "--spec-draft-n-min", "1"),
        # vLLM: the config, a dotted key, and the per-request acceptance report
        ("--speculative-config", '{"method":"ngram"}', "--per-request-spec-decode-metrics", "detailed"),
        ("--speculative-config.num_speculative_tokens=3",),
    ],
)
def test_speculative_flags_keep_parity(args: tuple[str, ...]) -> None:
    assert parity_problems((_arm(*args),)) == []


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--spec-default", "--max-num-seqs", "8"), "--max-num-seqs"),  # a switch takes no value
        (("--spec-replace", "<a>", "<b>", "--ctx-size", "4096"), "--ctx-size"),  # two values, then a leak
        (("--speculative-config", "{}", "--dtype", "half"), "--dtype"),
    ],
)
def test_anything_else_breaks_parity_naming_the_flag(args: tuple[str, ...], named: str) -> None:
    (problem,) = parity_problems((_arm(*args),))
    assert f"'{named}' is not a speculative flag" in problem


@pytest.mark.parametrize(
    "args",
    [
        ("--spec-type", "draft-simple", "-md", "/m/draft.gguf", "--spec-draft-n-max", "4"),
        ("--speculative-config", '{"method":"ngram","num_speculative_tokens":3}'),
    ],
)
def test_serve_args_asking_for_another_depth_than_the_arm_declares_are_refused(args: tuple[str, ...]) -> None:
    """The arm says k = 2; its server would run another depth (caught before any boot, not after it)."""
    (problem,) = depth_problems((_arm(*args),))
    assert problem.startswith("arm k2: its serve_args ask for depth ") and "declares k = 2" in problem


@pytest.mark.parametrize(
    "args",
    [
        ("--spec-type", "draft-simple", "-md", "/m/draft.gguf", "--spec-draft-n-max", "2"),
        ("--speculative-config", '{"method":"ngram","num_speculative_tokens":2}'),
        ("--speculative-config", '{"method":"ngram","num_speculative_tokens":{k}}'),  # unknown until run
        (),
    ],
)
def test_serve_args_at_the_declared_depth_or_unknown_pass(args: tuple[str, ...]) -> None:
    assert depth_problems((_arm(*args),)) == []


def test_every_shipped_campaign_declares_the_depth_its_arms_serve() -> None:
    from pathlib import Path

    from mtpverdict.collect.campaign import load_campaign_file

    root = Path(__file__).resolve().parents[2]
    campaigns = sorted(root.glob("collectors/*/*campaign*.toml"))
    assert len(campaigns) >= 3
    for path in campaigns:
        assert depth_problems(load_campaign_file(path).arms) == [], path
