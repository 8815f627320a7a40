"""Generated prompts measure what they claim: about the asked length, deterministic, not repetitive."""

from __future__ import annotations

from collections import Counter

import pytest

from mtpverdict.collect.campaign import generated_prompt


@pytest.mark.parametrize("tokens", [64, 1000, 8000])
def test_a_generated_prompt_does_not_repeat_itself(tokens: int) -> None:
    text = generated_prompt(tokens)
    words = [w.strip(".").lower() for w in text.split()]
    assert len(words) == tokens and text == generated_prompt(tokens)
    trigrams = Counter(zip(words, words[1:], words[2:], strict=False))
    repeated = sum(n - 1 for n in trigrams.values() if n > 1)
    # the old prompt repeated one 30-word sentence: every 3-gram after the first 30 words recurred
    assert repeated <= max(1, tokens // 1000)
    assert len(set(words)) >= min(tokens, 740) // 2


def test_prompts_of_different_lengths_differ() -> None:
    assert generated_prompt(100) != generated_prompt(101)[: len(generated_prompt(100))]
