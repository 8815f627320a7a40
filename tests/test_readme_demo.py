"""README's demo session is real output: the commands between its markers are run here and their
output must be what the README shows (`pytest tests/test_readme_demo.py --regen-golden` rewrites it)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtpverdict.cli import app

from .conftest import FIXTURES, ROOT

README = ROOT / "README.md"
BEGIN = "<!-- demo: begin (tests/test_readme_demo.py writes this block from real output) -->"
END = "<!-- demo: end -->"
COLUMNS = 120
SESSION = (
    "mtpverdict decide fixtures/thor-qwen36-35b-a3b --rules thor-c21 --out thor-c21.json",
    "mtpverdict decide fixtures/synthetic-crossover --out crossover.json",
    "mtpverdict simulate sim-win --arm off_A --arm k1:1:6% --arm k2:2:12% --arm off_B --boots 3 --seed 7",
    "mtpverdict decide sim-win --out sim-win.json",
)


def _session(tmp: Path) -> str:
    runner = CliRunner()  # not run_cli: the demo shows stdout and stderr interleaved, as a terminal does
    out = []
    for command in SESSION:
        args = shlex.split(command)[1:]
        done = runner.invoke(app, args, env={"COLUMNS": str(COLUMNS), "NO_COLOR": ""})
        assert done.exit_code == 0, (command, done.output)
        out.append(f"$ {command}\n{done.output}")
    return "```\n" + "\n".join(out) + "```"


def test_the_readme_demo_is_real_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, regen_golden: bool
) -> None:
    shutil.copytree(FIXTURES, tmp_path / "fixtures")  # a copy: each decide records its look there
    monkeypatch.chdir(tmp_path)
    block = _session(tmp_path)
    text = README.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "README's demo markers are missing"
    head, rest = text.split(BEGIN)
    shown, tail = rest.split(END)
    if regen_golden:
        README.write_text(f"{head}{BEGIN}\n{block}\n{END}{tail}")
        shown = f"\n{block}\n"
    assert shown == f"\n{block}\n", (
        "README's demo drifted: run pytest tests/test_readme_demo.py --regen-golden"
    )
