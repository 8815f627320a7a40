"""The summary `decide` prints: the verdict first and short, tables within the terminal's width, colour
only on a terminal. The layout of every bundled fixture is pinned in tests/golden/terminal/."""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from mtpverdict.cli._common import color_wanted, terminal_width

from ..conftest import FIXTURES, GOLDEN, run_cli

TERMINAL = GOLDEN / "terminal"
FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/campaign.json"))
CASES = [(name, "default") for name in FIXTURE_NAMES] + [("thor-qwen36-35b-a3b", "thor-c21")]
MAX_LINES = 25
CLAUSE = re.compile(r"; |: |, then")
ARMS_ONLY = re.compile(r"[\w.-]+(, [\w.-]+)*")


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # the fixtures named as a user in the checkout names them, the decision written beside
    shutil.copytree(FIXTURES, tmp_path / "fixtures")  # a copy: each decide records its look there
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _decide(fixture: str, policy: str, columns: int, *extra: str) -> str:
    args = ["decide", f"fixtures/{fixture}", "--rules", policy, "--out", "decision.json", *extra]
    done = run_cli(*args, env={"COLUMNS": str(columns), "NO_COLOR": ""})
    assert done.returncode == 0, done.output
    return done.output


def _verdict_block(text: str) -> list[str]:
    """The lines before the first blank line: the verdict, the causes, the next step, the footer."""
    lines = text.splitlines()
    return lines[: lines.index("")] if "" in lines else lines


def _command(text: str) -> str:
    """The next step's command as a shell reads it: its lines joined where they end in a backslash."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  mtpverdict "))
    parts = [lines[start]]
    while parts[-1].endswith(" \\"):
        parts.append(lines[start + len(parts)])
    return " ".join(p.removesuffix(" \\").strip() for p in parts)


@pytest.mark.parametrize(("fixture", "policy"), CASES, ids=[f"{f}@{p}" for f, p in CASES])
def test_the_verdict_comes_first_and_short(
    fixture: str, policy: str, checkout: Path, regen_golden: bool
) -> None:
    text = _decide(fixture, policy, 120)
    golden = TERMINAL / f"{fixture}@{policy}.txt"
    if regen_golden:
        golden.write_text(text)
    lines = text.splitlines()
    assert any(line.startswith("DECISION: ") for line in lines[:3]), lines[:3]
    assert len(lines) <= MAX_LINES, f"{len(lines)} lines"
    assert all(len(line) <= 120 for line in lines), max(lines, key=len)
    clauses = [
        c.strip()
        for line in _verdict_block(text)
        for c in CLAUSE.split(line)
        if len(c.strip()) > 12 and not ARMS_ONLY.fullmatch(c.strip())  # two reasons may name the same arms
    ]
    repeated = {c for c in clauses if clauses.count(c) > 1}
    assert not repeated, repeated
    assert "decision JSON written to decision.json" in text and "exit 0" in text
    assert golden.exists(), f"no golden file {golden.name}: run pytest --regen-golden on purpose"
    assert text == golden.read_text(), f"{golden.name} changed; review, then pytest --regen-golden"


@pytest.mark.parametrize("fixture", ["arc-b70-qwen36", "thor-qwen36-35b-a3b", "synthetic-null"])
def test_narrow_terminals_and_verbose_stay_within_the_width(fixture: str, checkout: Path) -> None:
    for columns, extra in ((80, ()), (120, ("--verbose",)), (80, ("--verbose",))):
        text = _decide(fixture, "default", columns, *extra)
        long = [line for line in text.splitlines() if len(line) > columns]
        assert not long, long
        assert any(line.startswith("DECISION: ") for line in text.splitlines()[:3])


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_the_next_step_command_fits_the_width_and_runs_as_one_command(columns: int, checkout: Path) -> None:
    # a long results path: the command is continued with backslashes, each line within the width
    # collected with --until-resolved and looks left, so the next step resumes it in place
    deep = checkout / "a-results-directory-named-at-some-length"
    shutil.copytree(FIXTURES / "synthetic-null", deep / "null")
    campaign = json.loads((deep / "null" / "campaign.json").read_text())
    campaign["sequential_looks"] = 3
    (deep / "null" / "campaign.json").write_text(json.dumps(campaign))
    args = ["decide", "a-results-directory-named-at-some-length/null", "--out", "decision.json"]
    text = run_cli(*args, env={"COLUMNS": str(columns), "NO_COLOR": ""}).output
    assert all(len(line) <= columns for line in text.splitlines()), text
    command = shlex.split(_command(text))
    assert command[:5] == [
        "mtpverdict",
        "collect",
        "CAMPAIGN.toml",
        "--out",
        "a-results-directory-named-at-some-length/null",
    ]
    assert command[5:] == ["--resume", "--until-resolved", "--rules", "default"]


def test_verbose_adds_the_runs_the_map_and_every_reason(checkout: Path) -> None:
    short = _decide("synthetic-crossover", "default", 120)
    full = _decide("synthetic-crossover", "default", 120, "--verbose")
    assert full.startswith(short.split("\n\n")[0])  # the same verdict first
    assert "regime map (" in full and "reasons:" in full and "regime map (" not in short
    assert "median [min-max]" in full and "median [min-max]" not in short


def test_no_colour_off_a_terminal(checkout: Path) -> None:
    text = _decide("synthetic-clean-win", "default", 120)
    assert "\x1b" not in text


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert color_wanted(_Tty()) and not color_wanted(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color_wanted(_Tty())


def test_the_width_is_columns_or_120(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "97")
    assert terminal_width() == 97
    monkeypatch.setenv("COLUMNS", "10")
    assert terminal_width() == 40  # narrower than a table can be cut to


@pytest.mark.parametrize("columns", [120, 160, 200])
def test_the_regime_map_cuts_no_cell_to_stay_side_by_side(columns: int, checkout: Path) -> None:
    # thirteen depths do not fit side by side at any of these widths: one depth per row, nothing cut
    text = _decide("arc-b70-qwen36", "default", columns, "--verbose")
    regime = text.split("regime map (", 1)[1].split("\n\n", 1)[0]
    table = [line for line in regime.splitlines() if not line.startswith("...")][2:]
    assert all(len(line) <= columns for line in table)
    assert not [line for line in table if "..." in line], table


def test_the_footer_says_where_the_json_went_whole(checkout: Path) -> None:
    out = Path("decisions-kept-for-the-release-review") / "synthetic-clean-win-decision.json"
    (checkout / out.parent).mkdir()
    args = ["decide", "fixtures/synthetic-clean-win", "--out", str(out)]
    text = run_cli(*args, env={"COLUMNS": "80", "NO_COLOR": ""}).output
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert str(out) in " ".join(line.strip() for line in text.split("\n\n")[0].splitlines()), text
