"""The CLI: every command has help and is documented; bad input is one line and exit 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mtpverdict.cli import app

from .conftest import DATA, FIXTURES, ROOT, Ran, copy_fixture, run_cli


def _commands() -> list[str]:
    """The top-level commands and groups, walked on the command tree (not scraped from help text)."""
    from mtpverdict.cli._help import walk

    return [path.split()[1] for path, _, _ in walk(app) if len(path.split()) == 2]


def test_every_command_has_help_and_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = _commands()
    assert {"collect", "validate", "decide", "rules", "parse", "import"} <= set(commands)
    for name in commands:
        result = run_cli(name, "--help")
        assert result.returncode == 0 and "Usage" in result.output
        assert f"mtpverdict {name}" in readme, f"{name} is not documented in README.md"


def test_readme_opens_with_the_two_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    block = readme[readme.index("```sh") + 1 : readme.index("```sh") + 3]
    ci = (ROOT / ".ci" / "run").read_text()
    assert " fixtures/" in block[0] and "mtpverdict decide " in block[0] and "pytest" in block[1]
    for line in block:
        assert line in ci, f"README command not run verbatim by .ci/run: {line}"


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0 and result.output.startswith("mtpverdict ")


def _run(*args: str) -> Ran:
    return run_cli(*args)


def test_validate_and_decide_exit_codes(tmp_path: Path) -> None:
    ok = _run("validate", str(FIXTURES / "thor-qwen36-35b-a3b"))
    assert ok.returncode == 0 and "valid" in ok.stdout and "k7" in ok.stdout
    out = tmp_path / "d.json"
    thor = str(copy_fixture("thor-qwen36-35b-a3b", tmp_path))
    decided = _run("decide", thor, "--out", str(out))
    assert decided.returncode == 0 and json.loads(out.read_text())["decision"] == "inconclusive"
    strict = _run("decide", thor, "--out", str(out), "--strict", "-q")  # the same look again
    assert strict.returncode == 3 and strict.stdout.strip() == "inconclusive"
    win = str(copy_fixture("synthetic-clean-win", tmp_path))
    promote = _run("decide", win, "--out", str(out), "--strict", "-q")
    assert promote.returncode == 0 and promote.stdout.strip() == "promote k2"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["validate", "nowhere"], "not a directory"),
        (["decide", "nowhere"], "not a directory"),
        (
            [
                "decide",
                str(FIXTURES / "thor-qwen36-35b-a3b"),
                "--rules",
                str(DATA / "invalid/rules/unknown_kind.toml"),
            ],
            "unknown rule kind",
        ),
        (
            ["decide", str(FIXTURES / "thor-qwen36-35b-a3b"), "--rules", "no-such-policy"],
            "no such shipped policy",
        ),
        (["rules", "check", str(DATA / "invalid/rules/not_toml.toml")], "not valid TOML"),
        (["collect", "nowhere.toml", "--out", "x"], "not found"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(args: list[str], fragment: str) -> None:
    done = _run(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("Error: ") and fragment in done.stderr


def test_malformed_results_list_each_problem_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "campaign.json").write_text((DATA / "invalid" / "campaign.json").read_text())
    (tmp_path / "records.jsonl").write_text("[]\n" * 25)
    done = _run("validate", str(tmp_path))
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 21 and lines[-1] == "Error: ... and 5 more"
    assert lines[0] == f'Error: {tmp_path / "records.jsonl"}:1: must be a JSON object with a "kind"'
    assert not (tmp_path / "decision.json").exists()


def test_the_pure_core_imports_neither_httpx_nor_typer() -> None:
    code = (
        "import sys; import mtpverdict.decide, mtpverdict.formats.results_io, mtpverdict.stats.compare, "
        "mtpverdict.rules, mtpverdict.evidence.gather, mtpverdict.sim; "
        "print(sorted(m for m in ('httpx', 'typer') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_module_opens_with_a_one_line_docstring() -> None:
    for path in sorted((ROOT / "src" / "mtpverdict").rglob("*.py")):
        text = path.read_text()
        assert text.startswith('"""'), path
        first = text.splitlines()[0]
        assert first.endswith('"""') or len(first) > 10, path
