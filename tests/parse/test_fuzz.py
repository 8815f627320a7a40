"""Property tests: random text and mutated real lines never make the parsers raise unexpectedly."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtpverdict.errors import EngineTextError
from mtpverdict.parse import acceptance_delta, observed_k, parse_metrics, parse_text

from .support import ENGINE_CASES

REAL_LINES = sorted(
    {
        line
        for case in ENGINE_CASES.glob("*/*.txt")
        for line in case.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    }
)
METRIC_TEXTS = [case.read_text() for case in ENGINE_CASES.glob("*/metrics_*.txt")]
NOISE = st.sampled_from(
    [
        "\r",
        "\x1b[31m",
        "\x1b[0m",
        "\x00",
        "\ufffd",
        ",",
        "%",
        "nan",
        "1e308",
        "-1",
        "999999999999999999999",
        ", ",
        "(",
        ")",
        "{",
        "}",
        "=",
        '"',
        "\n",
        "\t",
        "Accepted:",
        "x",
        "1,000",
        "é",
    ]
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated_line(draw: st.DrawFn) -> str:
    line = draw(st.sampled_from(REAL_LINES))
    for _ in range(draw(st.integers(min_value=0, max_value=6))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "cut", "double"]))
        at = draw(st.integers(min_value=0, max_value=max(len(line) - 1, 0)))
        if op == "insert":
            line = line[:at] + draw(NOISE) + line[at:]
        elif op == "delete":
            line = line[:at] + line[at + draw(st.integers(1, 8)) :]
        elif op == "replace":
            line = line[:at] + draw(st.characters()) + line[at + 1 :]
        elif op == "cut":
            line = line[:at]
        else:
            line = line + line
    return line


def _check_result(text: str) -> None:
    result = parse_text(text)
    json.dumps(result.to_json(), allow_nan=False)
    for reading in result.acceptance:
        if reading.acceptance_rate is not None:
            assert 0.0 <= reading.acceptance_rate <= 1.0
        if reading.mean_acceptance_length is not None:
            assert reading.mean_acceptance_length >= 1.0
        for count in (reading.drafts, reading.draft_tokens, reading.accepted_tokens):
            assert count is None or count >= 0


@SETTINGS
@given(st.text())
def test_random_text_never_raises(text: str) -> None:
    _check_result(text)


@SETTINGS
@given(st.lists(mutated_line(), min_size=1, max_size=8))
def test_mutated_real_lines_never_raise(lines: list[str]) -> None:
    _check_result("\n".join(lines))


@SETTINGS
@given(st.binary(max_size=512))
def test_random_bytes_never_raise(data: bytes) -> None:
    _check_result(data.decode("utf-8", errors="replace"))


@SETTINGS
@given(st.sampled_from(METRIC_TEXTS), st.lists(st.tuples(st.integers(0, 4000), NOISE), max_size=6))
def test_mutated_expositions_parse_or_raise_engine_text_error(
    text: str, edits: list[tuple[int, str]]
) -> None:
    for at, noise in edits:
        text = text[:at] + noise + text[at:]
    try:
        snapshot = parse_metrics(text)
    except EngineTextError as exc:
        assert exc.problems
        return
    observed_k(snapshot)
    acceptance_delta(snapshot, snapshot)
    _check_result(text)


@SETTINGS
@given(st.text())
def test_random_text_as_exposition(text: str) -> None:
    try:
        parse_metrics(text)
    except EngineTextError:
        pass
