"""Bounded: every pattern the gate, serveconfig, engines.spec, compose and servecommand modules hold is
linear in its input (100 KB of adversarial text each, CPU time, generous for a loaded machine), and the
gate answers a serve config of its size limit at once."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtpverdict.compose import COMPOSE_MAX_BYTES
from mtpverdict.errors import InputError
from mtpverdict.gate import GateEvidence, evaluate
from mtpverdict.serveconfig import MAX_BYTES, read_serve_config, shell_split

SIZE = 100_000  # characters of adversarial text per input
PATTERN_SECONDS = 0.5  # CPU seconds per pattern and input; a linear pattern takes milliseconds
GATE_SECONDS = 2.0  # CPU seconds (the gate's and its Compose's) for a compose file of its size limit
SHRINK = 8  # the serve config beside the full one, 1/SHRINK of its size
LINEAR = 3.0  # how far above SHRINK the full one's CPU time may be against the small one's
CEILING = 30.0  # CPU seconds no serve config of the size limit may take on any machine


def _modules() -> Iterator[ModuleType]:
    for name in (
        "mtpverdict.serveconfig",
        "mtpverdict.compose",
        "mtpverdict.servecommand",
        "mtpverdict._shell",
        "mtpverdict.engines.spec",
    ):
        yield importlib.import_module(name)
    package = importlib.import_module("mtpverdict.gate")  # the attribute mtpverdict.gate is the function
    yield package
    for info in pkgutil.iter_modules(package.__path__, "mtpverdict.gate."):
        yield importlib.import_module(info.name)


PATTERNS = sorted(
    {(m.__name__, n): v for m in _modules() for n, v in vars(m).items() if isinstance(v, re.Pattern)}.items()
)


def _adversarial(pattern: re.Pattern[str]) -> Iterator[str]:
    """Long runs of the pattern's own characters and of common classes, each also ending in a
    character that makes a match fail at the very end (where backtracking pays)."""
    own = sorted({c for c in pattern.pattern if c.isprintable() and c not in "\\()[]{}*+?|^$"})
    pieces = ["a", "0", "1.", "v0.", "$", "$$", "_", "-", " ", "k=", "a:", "0.1", "x" * 7 + "_", "".join(own)]
    pieces += own
    for piece in pieces:
        body = piece * (SIZE // max(len(piece), 1))
        yield body
        yield body + "!"
        yield body + "\n!"


def test_the_modules_hold_patterns() -> None:
    # the walk finds them, so a move into another module cannot make the test vacuous
    assert {n for (_, n), _ in PATTERNS} >= {"_HUMAN", "_DECIMAL", "_OUTPUT_VALUE"}, PATTERNS


@pytest.mark.parametrize(("where", "pattern"), PATTERNS, ids=[f"{m}.{n}" for (m, n), _ in PATTERNS])
def test_every_module_pattern_is_linear(where: tuple[str, str], pattern: re.Pattern[str]) -> None:
    for text in _adversarial(pattern):
        start = time.process_time()
        pattern.search(text)
        pattern.match(text)
        pattern.fullmatch(text)
        pattern.findall(text)
        spent = time.process_time() - start
        assert spent < PATTERN_SECONDS, (where, text[:40], len(text), spent)


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@pytest.mark.parametrize(
    "body",
    [
        lambda n: json.dumps(["vllm", "serve", "m", *(["-" * 30 + "a"] * (n // 36))]),
        lambda n: "vllm serve m " + "--a b " * (n // 7),
        lambda n: "vllm serve m '" + "$" * (n - 20) + "'",
        lambda n: "nice " + "-n 1 " * (n // 6),
    ],
    ids=["json-argv", "shell-flags", "quoted-dollars", "wrapper-options"],
)
def test_the_gate_answers_a_serve_config_of_its_size_limit_at_once(
    body: object, tmp_path: Path, seat: GateEvidence
) -> None:
    """Linear, measured against a serve config 1/SHRINK as big beside it (a ratio, not a wall-clock
    margin a loaded machine beats): quadratic work would take SHRINK times longer again."""
    assert callable(body)
    spent = []
    for size in ((MAX_BYTES - 100) // SHRINK, MAX_BYTES - 100):
        path = tmp_path / f"serve-{size}.argv"
        path.write_text(str(body(size)))
        assert path.stat().st_size <= MAX_BYTES
        start = _cpu()
        evaluate(seat, None, read_serve_config(path))
        spent.append(_cpu() - start)
    small, full = spent
    assert full < CEILING and full <= SHRINK * LINEAR * max(small, 0.01), spent


def test_the_gate_answers_a_compose_file_of_its_size_limit_at_once(
    tmp_path: Path, seat: GateEvidence, resolver: object
) -> None:
    flags = ", ".join(["--max-num-seqs"] * ((COMPOSE_MAX_BYTES - 400) // 16))
    path = tmp_path / "compose.yaml"
    path.write_text(f"services:\n  seat:\n    image: vllm/vllm-openai:v0.32.0\n    command: [m, {flags}]\n")
    assert path.stat().st_size <= COMPOSE_MAX_BYTES
    start = _cpu()
    result = evaluate(seat, None, read_serve_config(path))
    assert _cpu() - start < GATE_SECONDS and not result.supported
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(path.read_text().replace("[m,", "[m, " + "x" * COMPOSE_MAX_BYTES + ","))
    with pytest.raises(InputError, match=f"at most {COMPOSE_MAX_BYTES} bytes"):
        read_serve_config(bigger)


@settings(max_examples=400)
@given(st.text(alphabet="ab \t\\\"'", max_size=24))
def test_the_linear_splitter_splits_as_shlex_does(line: str) -> None:
    """On lines without $ and newlines (which the gate refuses or cannot hold) the two agree."""
    try:
        expected: list[str] | None = shlex.split(line)
    except ValueError:
        expected = None
    try:
        found: list[str] | None = shell_split(line)
    except ValueError:
        found = None
    assert found == expected
