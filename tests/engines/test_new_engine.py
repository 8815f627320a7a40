"""A new engine is one module plus one registry line: a copy of the package with a throwaway engine added
that way (engines/toy.py and the member `TOY = "toy"`, nothing else) is read by parse and checked by the
registry's completeness test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT

SRC = ROOT / "src" / "mtpverdict"
MEMBER_AFTER = '    LLAMACPP = "llamacpp"\n'
TOY_LINE = '    TOY = "toy"\n'

TOY_MODULE = '''"""Toy: a throwaway engine whose log prints `toy accepted A of D draft tokens`."""

from __future__ import annotations

import dataclasses
import re

from mtpverdict.engines import sglang
from mtpverdict.engines.interface import Absent, MetricNames
from mtpverdict.engines.names import Engine
from mtpverdict.engines.spec import FlagGroup
from mtpverdict.parse.model import AcceptanceReading, Found

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


ENGINE = dataclasses.replace(
    sglang.ENGINE,
    name=Engine("toy"),
    title="Toy",
    flags=(FlagGroup("--toy-draft-depth"),),
    image_words=("toy-server",),
    config_variables=("TOY_",),
    metric_prefix="toy:",
    metric_names=MetricNames(draft_tokens="toy:drafted", accepted_tokens="toy:kept"),
    log_lines=_LogLines(),
    response_json=Absent("the toy server answers no JSON"),
)
'''

PROBE = """
import json
from mtpverdict.engines import registry
from mtpverdict.engines.names import ENGINE_CHOICES, Engine
from mtpverdict.parse import parse_metrics, parse_text
from tests.engines.test_registry import DATA, DOC, registry_problems

toy = Engine("toy")
print(json.dumps({
    "registered": [str(e) for e in registry.ENGINES],
    "choices": list(ENGINE_CHOICES),
    "problems": registry_problems(registry.ENGINES, DOC.read_text(), DATA),
    "log": parse_text("[toy] start\\n[toy] toy accepted 3 of 4 draft tokens\\n").to_json(),
    "chosen": parse_text("toy accepted 1 of 2 draft tokens", "toy").to_json()["engine"],
    "metrics": parse_text("toy:drafted_total 8\\ntoy:kept_total 5\\n").to_json(),
    "vllm_names": parse_metrics("toy:spec_decode_num_draft_tokens_total 8\\n").draft_tokens,
}))
"""


def _copy_with_toy(into: Path) -> Path:
    """The package copied under `into`, plus engines/toy.py and the one line; returns the src folder."""
    package = into / "src" / "mtpverdict"
    shutil.copytree(SRC, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "engines" / "toy.py").write_text(TOY_MODULE)
    names = package / "engines" / "names.py"
    text = names.read_text()
    assert text.count(MEMBER_AFTER) == 1
    names.write_text(text.replace(MEMBER_AFTER, MEMBER_AFTER + TOY_LINE))
    return into / "src"


def _changed(copy: Path) -> list[str]:
    """The files of the copy that differ from the package (added or edited), relative to it."""
    changed = []
    for path in sorted((copy / "mtpverdict").rglob("*.py")):
        original = SRC / path.relative_to(copy / "mtpverdict")
        if not original.is_file() or original.read_bytes() != path.read_bytes():
            changed.append(path.relative_to(copy).as_posix())
    return changed


def test_a_new_engine_is_one_module_and_one_line(tmp_path: Path) -> None:
    src = _copy_with_toy(tmp_path)
    assert _changed(src) == ["mtpverdict/engines/names.py", "mtpverdict/engines/toy.py"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT)])}
    ran = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["registered"] == ["vllm", "sglang", "llamacpp", "toy"]
    assert seen["choices"] == ["auto", "vllm", "sglang", "llamacpp", "toy"]
    # the completeness test sees the new engine whole in code; what it still asks for is no source file
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
