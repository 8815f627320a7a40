"""A new engine is one module plus one registry line: a copy of the checkout with a throwaway engine added
that way (engines/toy.py and the member `TOY = "toy"`; in code, nothing else) is read by parse and checked
by the registry's completeness test, which asks for its docs row and samples and nothing more; the CLI
reference, whose --engine help names it, is regenerated, and the check on a stale one catches it; the
parser's tests that read every engine (its cases, its reader) pass on the copy unedited."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mtpverdict.engines.names import ENGINE_CHOICES, Engine

from ..conftest import ROOT

# what the copy holds: every tree a new engine touches (code, docs, samples, of any file type), two files
# it leaves alone (its package metadata and the README), and the parser's tests that read every engine
# (run on the copy: none of them names the engines it expects)
COPIED = (
    "src/mtpverdict",
    "docs",
    "tests/data/engine",
    "tests/data/recorded",
    "pyproject.toml",
    "README.md",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/parse",
)
# the parser's tests run on the copy, with the toy registered (the slow ones left to the checkout's run)
COPY_TESTS = ("tests/parse/test_cases.py", "tests/parse/test_reader.py")
DOC_ROW_AFTER = "| engine | surface | what is read | checked against |\n|---|---|---|---|\n"
DOC_ROW = "| Toy | log | `toy accepted A of D draft tokens` | source: toy 1.0 |\n"
SAMPLE = "tests/data/engine/toy/log_accepted"
SAMPLE_TEXT = "[toy] start\n[toy] toy accepted 3 of 4 draft tokens\n"
# its expected parse, written by hand (tests/parse/test_cases.py reads every tests/data/engine/ case so)
SAMPLE_EXPECTED = {
    "engine": "toy",
    "engine_version": None,
    "acceptance": [
        {
            "source": "log",
            "scoped": "window",
            "kind": "log_window",
            "drafts": None,
            "draft_tokens": 4,
            "accepted_tokens": 3,
            "acceptance_rate": None,
            "mean_acceptance_length": None,
            "per_position_rate": None,
            "accepted_per_position": None,
            "line": None,  # the toy's parser gives its readings no line
        }
    ],
    "kv_capacity": [],
    "warnings": [],
}
# its /metrics sample: the completeness test wants every family its metric_names part gives in one
METRICS_SAMPLE = "tests/data/engine/toy/metrics_counters"
METRICS_TEXT = "toy:drafted_total 8\ntoy:kept_total 5\n"
METRICS_EXPECTED = {
    **SAMPLE_EXPECTED,
    "acceptance": [
        {
            "source": "metrics",
            "scoped": "window",
            "kind": "counter_total",
            "drafts": None,
            "draft_tokens": 8,
            "accepted_tokens": 5,
            "acceptance_rate": None,
            "mean_acceptance_length": None,
            "per_position_rate": None,
            "accepted_per_position": None,
            "line": None,
        }
    ],
}
TOY_LINE = '    TOY = "toy"\n'

TOY_MODULE = '''"""Toy: a throwaway engine whose log prints `toy accepted A of D draft tokens`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

from mtpverdict.engines import sglang
from mtpverdict.engines.interface import MetricNames, ResponseJson, SpecNamespace
from mtpverdict.engines.names import Engine
from mtpverdict.engines.spec import FlagGroup
from mtpverdict.parse.model import AcceptanceReading, Found
from mtpverdict.parse.response_json import line_object

LINE_RE = re.compile(r"toy accepted (\\d+) of (\\d+) draft tokens")


class _LogLines:
    def find(self, text: str, line: int) -> list[Found]:
        found = LINE_RE.search(text)
        if found is None:
            return []
        reading = AcceptanceReading(
            "log", "window", "log_window", accepted_tokens=int(found[1]), draft_tokens=int(found[2])
        )
        return [Found(start=found.start(), message=found[0], acceptance=reading)]

    def evidence(self, text: str) -> bool:
        return text.startswith("[toy]")


class _Responses:
    """Each response's `toy_stats`: {"kept": A, "drafted": D}."""

    def find(self, text: str, line: int) -> list[Found]:
        held = line_object(text, '"toy_stats"')
        if held is None:
            return []
        return [Found(start=held[0], message=held[1], acceptance=r) for r, _ in self.readings(held[2], line)]

    def readings(self, obj: Any, line: int | None) -> Iterator[tuple[AcceptanceReading, tuple[str, ...]]]:
        stats = obj.get("toy_stats") if isinstance(obj, dict) else None
        if isinstance(stats, dict):
            kept, drafted = stats.get("kept"), stats.get("drafted")
            reading = AcceptanceReading(
                "response", "run", "response", accepted_tokens=kept, draft_tokens=drafted, line=line
            )
            yield reading, ()

    def version(self, text: str) -> str | None:
        return None


ENGINE = dataclasses.replace(
    sglang.ENGINE,
    name=Engine("toy"),
    title="Toy",
    flags=(FlagGroup("--toy-depth"),),
    spec_namespace=SpecNamespace(("--toy-",)),
    image_words=("toy-server",),
    config_variables=("TOY_",),
    metric_prefix="toy:",
    metric_names=MetricNames(draft_tokens="toy:drafted", accepted_tokens="toy:kept"),
    log_lines=_LogLines(),
    responses=_Responses(),
    response_json=ResponseJson(re.compile(r'"toy_stats"\\s*:'), "Toy toy_stats"),
)
'''

PROBE = """
import json
import sys
from pathlib import Path
from mtpverdict.cli import app
from mtpverdict.cli._help import reference_markdown
from mtpverdict.engines import registry
from mtpverdict.engines.names import ENGINE_CHOICES
from mtpverdict.parse import parse_file, parse_metrics, parse_text
from mtpverdict.serveconfig import scan_speculation
from tests.engines.test_registry import DATA, DOC, registry_problems
from tests.test_docs import reference_stale

copy = Path(sys.argv[1])
reference = copy / "docs" / "cli-reference.md"
help_text = reference_markdown(app)
stale = reference_stale(reference, help_text)
reference.write_text(help_text)  # as pytest tests/test_docs.py --regen-docs writes it
print(json.dumps({
    "registered": [str(e) for e in registry.ENGINES],
    "choices": list(ENGINE_CHOICES),
    "problems": registry_problems(registry.ENGINES, DOC.read_text(), DATA),
    "whole": registry_problems(
        registry.ENGINES, (copy / "docs" / "engine-formats.md").read_text(), copy / "tests" / "data"
    ),
    "stale": stale,
    "regenerated": reference_stale(reference, help_text),
    "samples": [parse_file(copy / (name + ".txt")).to_json() for name in sys.argv[2:]],
    "log": parse_text("[toy] start\\n[toy] toy accepted 3 of 4 draft tokens\\n").to_json(),
    "chosen": parse_text("toy accepted 1 of 2 draft tokens", "toy").to_json()["engine"],
    "metrics": parse_text("toy:drafted_total 8\\ntoy:kept_total 5\\n").to_json(),
    "vllm_names": parse_metrics("toy:spec_decode_num_draft_tokens_total 8\\n").draft_tokens,
    "response": parse_text('{"toy_stats": {"kept": 2, "drafted": 3}}').to_json(),
    "no_stats": parse_text('{"content": "x"}', "toy").to_json()["warnings"],
    "misspelt": scan_speculation(["toy-server", "--toy-dpeth", "3"])[1],
    "known": [f.flag for f in scan_speculation(["toy-server", "--toy-depth", "3"])[0]],
}))
"""


def _copy(into: Path) -> None:
    """The COPIED trees and files of the checkout, under `into` (bytecode left out)."""
    for name in COPIED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, into / name)


def _add_toy(copy: Path) -> None:
    """A new engine as its author adds it: engines/toy.py and the one line, the docs row, a log sample
    and a /metrics sample."""
    package = copy / "src" / "mtpverdict"
    (package / "engines" / "toy.py").write_text(TOY_MODULE)
    _insert_after(package / "engines" / "names.py", _last_member(), TOY_LINE)
    _insert_after(copy / "docs" / "engine-formats.md", DOC_ROW_AFTER, DOC_ROW)
    (copy / SAMPLE).parent.mkdir()
    for name, text, expected in (
        (SAMPLE, SAMPLE_TEXT, SAMPLE_EXPECTED),
        (METRICS_SAMPLE, METRICS_TEXT, METRICS_EXPECTED),
    ):
        (copy / f"{name}.txt").write_text(text)
        (copy / f"{name}.expected.json").write_text(json.dumps(expected, indent=2) + "\n")


def _last_member() -> str:
    """The line of the checkout's last Engine member, after which a new engine's line goes (last)."""
    last = list(Engine)[-1]
    return f'    {last.name} = "{last.value}"\n'


def _options(reference: str) -> list[str]:
    """A CLI reference's lines with each option's help on one line: a line indented under an option's
    line (its help, wrapped) is joined to it, so a longer engine list that re-wraps reads as one change."""
    lines: list[str] = []
    for line in reference.splitlines():
        if lines and lines[-1].startswith("  -") and line.startswith("   ") and line.strip()[:1] != "-":
            lines[-1] = f"{lines[-1]} {line.strip()}"
        else:
            lines.append(line)
    return [" ".join(line.split()) if line.startswith("  -") else line for line in lines]


def _insert_after(path: Path, anchor: str, line: str) -> None:
    text = path.read_text()
    assert text.count(anchor) == 1, f"{path.name}: {anchor!r}"
    path.write_text(text.replace(anchor, anchor + line))


def _files(root: Path) -> set[str]:
    """Every file of the COPIED trees under `root`, of any type, relative to it (bytecode left out)."""
    found = set()
    for name in COPIED:
        top = root / name
        paths = top.rglob("*") if top.is_dir() else [top] if top.is_file() else []
        found |= {
            p.relative_to(root).as_posix() for p in paths if p.is_file() and "__pycache__" not in p.parts
        }
    return found


def _changed(copy: Path, original: Path = ROOT) -> list[str]:
    """The files of the copy that differ from the checkout's (added, edited or removed), of any type."""
    mine, theirs = _files(copy), _files(original)
    return sorted(
        name
        for name in mine | theirs
        if name not in mine
        or name not in theirs
        or (copy / name).read_bytes() != (original / name).read_bytes()
    )


def test_changed_sees_every_file_type(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    for root in (before, after):
        (root / "docs").mkdir(parents=True)
        (root / "docs" / "a.md").write_text("a\n")
        (root / "pyproject.toml").write_text("[project]\n")
        (root / "docs" / "gone.md").write_text("gone\n")
    (after / "docs" / "a.md").write_text("a, edited\n")
    (after / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (after / "docs" / "gone.md").unlink()
    (after / "docs" / "new.json").write_text("{}\n")
    (after / "docs" / "__pycache__").mkdir()
    (after / "docs" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert _changed(after, before) == ["docs/a.md", "docs/gone.md", "docs/new.json", "pyproject.toml"]


def test_a_new_engine_is_one_module_and_one_line(tmp_path: Path) -> None:
    copy = tmp_path / "checkout"
    _copy(copy)
    assert _changed(copy) == []
    _add_toy(copy)
    src = copy / "src"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), str(ROOT)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, str(copy), SAMPLE, METRICS_SAMPLE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    # in code, the module and the line; beside them, its docs row, its sample and the regenerated reference
    assert _changed(copy) == [
        "docs/cli-reference.md",
        "docs/engine-formats.md",
        "src/mtpverdict/engines/names.py",
        "src/mtpverdict/engines/toy.py",
        f"{SAMPLE}.expected.json",
        f"{SAMPLE}.txt",
        f"{METRICS_SAMPLE}.expected.json",
        f"{METRICS_SAMPLE}.txt",
    ]
    assert seen["stale"] == "docs/cli-reference.md is stale: pytest tests/test_docs.py --regen-docs"
    assert seen["regenerated"] is None
    # its one change: the option lines naming the engines, each help read whole whatever its wrapping
    added = [
        line[2:]
        for line in difflib.ndiff(
            _options((ROOT / "docs" / "cli-reference.md").read_text()),
            _options((copy / "docs" / "cli-reference.md").read_text()),
        )
        if line.startswith("+ ")
    ]
    assert added and all("toy" in line for line in added), added
    assert any(line.strip().startswith("--engine") for line in added)
    assert seen["whole"] == []
    # the parser's tests, run on the copy, pass with the toy registered: their engines come from the
    # registry, their expected warnings from the engines' parts
    assert _run_copy_tests(copy, env) == ""
    assert seen["samples"] == [SAMPLE_EXPECTED, METRICS_EXPECTED]
    # the checkout's engines, whichever they are, then the toy
    assert seen["registered"] == [*(e.value for e in Engine), "toy"]
    assert seen["choices"] == [*ENGINE_CHOICES, "toy"]
    # the completeness test against the checkout's docs and samples: the new engine whole in code, what
    # it still asks for is no source file
    assert seen["problems"] == [
        "toy: no row for Toy in docs/engine-formats.md's surfaces table",
        "toy: no cases in tests/data/engine/toy/",
    ]
    assert seen["log"]["engine"] == "toy"
    assert [(r["accepted_tokens"], r["draft_tokens"]) for r in seen["log"]["acceptance"]] == [(3, 4)]
    assert seen["chosen"] == "toy" and seen["metrics"]["engine"] == "toy"
    # its counters are read through its own metric_names part, not another engine's names
    assert [(r["draft_tokens"], r["accepted_tokens"]) for r in seen["metrics"]["acceptance"]] == [(8, 5)]
    assert seen["vllm_names"] is None
    # a JSON document of its saved responses is read through its response_json part
    assert seen["response"]["engine"] == "toy"
    assert [(r["accepted_tokens"], r["draft_tokens"]) for r in seen["response"]["acceptance"]] == [(2, 3)]
    assert seen["no_stats"][0].startswith("a JSON document without Toy toy_stats (no drafting")
    # its speculative flags are read by its table; one its spec_namespace holds but the table does not
    # know (a misspelling) is refused, not dropped
    assert seen["known"] == ["--toy-depth"]
    assert len(seen["misspelt"]) == 1 and seen["misspelt"][0].startswith("--toy-dpeth: ")


def _run_copy_tests(copy: Path, env: dict[str, str]) -> str:
    """COPY_TESTS run by pytest in the copy (its own tests, samples and package): "" when they pass,
    else the failed tests' lines of pytest's summary (its whole report when it has none)."""
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *COPY_TESTS],
        cwd=copy,
        env={**env, "PYTHONPATH": str(copy / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if ran.returncode == 0:
        return ""
    failed = [line for line in ran.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return "\n".join(failed) or ran.stdout + ran.stderr
