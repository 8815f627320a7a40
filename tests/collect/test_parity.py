"""Harness parity: an arm's serve_args may hold only its engine's speculative flags, each with its values."""

from __future__ import annotations

import pytest

from mtpverdict.collect.campaign import ArmPlan, parity_problems


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
