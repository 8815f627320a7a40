"""The pieces the verdict is written with: effects in words, lists within a width, tables that fit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mtpverdict.report.verdict import fit_table, gain_text, listed


def test_effects_fold_beyond_a_factor_of_two() -> None:
    assert gain_text(1.152) == "+15.2%"
    assert gain_text(0.924) == "-7.6%"
    assert gain_text(0.266) == "3.8x slower"  # was "0.266x" beside "inconclusive"
    assert gain_text(2.5) == "2.5x faster"


def test_a_list_keeps_within_its_room() -> None:
    names = [f"replay_arm_{i}" for i in range(9)]
    text = listed(names, 50)
    assert len(text) <= 50 and text.endswith("more")
    assert listed(["k1", "k3"], 50) == "k1, k3"


words = st.text(alphabet="abcdefghij +-%[],.", min_size=0, max_size=60)


@given(
    rows=st.lists(st.lists(words, min_size=4, max_size=4), min_size=1, max_size=6),
    width=st.integers(min_value=60, max_value=140),
)
def test_a_table_fits_its_width(rows: list[list[str]], width: int) -> None:
    text = fit_table(["arm", "effect", "outcome", "verdict"], rows, width, drop=(2,))
    assert max(len(line) for line in text.splitlines()) <= width


def test_cut_names_stay_told_apart() -> None:
    # twelve arms named alike but for their ends: cut at the end they would all read the same
    names = [f"very_long_speculative_arm_name_number_{i}" for i in range(1, 13)]
    rows = [[name, "+2.3% at chat c=8", "unresolved", "inconclusive"] for name in names]
    text = fit_table(["arm", "effect", "outcome", "verdict"], rows, 60)
    shown = [line.split("  ")[0] for line in text.splitlines()[2:]]
    assert all(len(line) <= 60 for line in text.splitlines())
    assert len(set(shown)) == len(names), shown
    assert shown[10].endswith("_11") and shown[0].startswith("very_")
