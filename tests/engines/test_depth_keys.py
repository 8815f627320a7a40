"""vLLM's depth keys and config flag are defined once, in engines/spec.py, and every layer above uses
that definition."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import msgspec

import mtpverdict
from mtpverdict.collect.campaign import ArmPlan
from mtpverdict.collect.schedule_arm import derived_config
from mtpverdict.engines import registry
from mtpverdict.engines.interface import Absent
from mtpverdict.engines.names import SCHEDULE_ENGINE
from mtpverdict.engines.spec import CONFIG_FLAG, DEPTH_KEY, DEPTH_KEYS, SCHEDULE_KEY, DepthRange, depth_free
from mtpverdict.formats.decision import ScheduleRange, load_decision

from ..conftest import ROOT

SRC = Path(mtpverdict.__file__).parent  # the package under test
ENGINES = SRC / "engines"
GOLDEN = ROOT / "tests" / "golden" / "synthetic-crossover@default-schedule.json"


def _prose(tree: ast.AST) -> set[int]:
    """The ids of the string nodes of a tree that are prose, which may name a key: module, class and
    function docstrings, and a schema's `description=` text (each part of one built in pieces)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        if isinstance(node, ast.keyword) and node.arg == "description":
            found.update(id(part) for part in ast.walk(node.value) if isinstance(part, ast.Constant))
    return found


def key_spellings(root: Path, key: str = DEPTH_KEY) -> list[str]:
    """`file:line` of every string in code (not prose) under `root` that spells `key`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = _prose(tree)
        out += [
            f"{path.relative_to(root.parent)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in prose
            and key in node.value
        ]
    return out


def definitions(root: Path, name: str) -> list[str]:
    """`file:line` of every assignment to the module-level name `name` under `root`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                out.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return out


def test_the_keys_are_vllms() -> None:
    assert DEPTH_KEYS == (DEPTH_KEY, SCHEDULE_KEY)
    assert SCHEDULE_KEY.startswith(DEPTH_KEY)  # so spelling DEPTH_KEY finds both


def test_depth_keys_are_defined_once() -> None:
    assert definitions(SRC, "DEPTH_KEYS") == ["mtpverdict/engines/spec.py:" + _line("DEPTH_KEYS = ")]


def test_no_layer_above_the_engines_spells_a_depth_key() -> None:
    spelled = [where for where in key_spellings(SRC) if not where.startswith("mtpverdict/engines/")]
    assert spelled == [], "import DEPTH_KEY / SCHEDULE_KEY from mtpverdict.engines.spec"


def test_no_layer_above_the_engines_spells_the_config_flag() -> None:
    spelled = [
        where for where in key_spellings(SRC, CONFIG_FLAG) if not where.startswith("mtpverdict/engines/")
    ]
    assert spelled == [], "import CONFIG_FLAG from mtpverdict.engines.spec"


def test_the_config_flag_is_defined_once() -> None:
    assert definitions(SRC, "CONFIG_FLAG") == ["mtpverdict/engines/spec.py:" + _line("CONFIG_FLAG = ")]


def test_the_scan_sees_the_config_flag_in_code_not_in_prose(tmp_path: Path) -> None:
    package = tmp_path / "mtpverdict"
    package.mkdir()
    (package / "flag.py").write_text(
        '"""A module naming --speculative-config in its docstring."""\n'
        'FIELD = Meta(description="JSON for --speculative-config")\n'
        'SAID = f"serve with --speculative-config {3}"\n'
        'ARGV = ["--speculative-config", "{}"]\n',
        encoding="utf-8",
    )
    assert key_spellings(package, CONFIG_FLAG) == ["mtpverdict/flag.py:3", "mtpverdict/flag.py:4"]


def test_the_scan_sees_a_spelling_and_a_second_definition(tmp_path: Path) -> None:
    package = tmp_path / "mtpverdict"
    package.mkdir()
    (package / "twin.py").write_text(
        '"""A module naming num_speculative_tokens in its docstring only."""\n'
        'DEPTH_KEYS = ("num_speculative_tokens", "num_speculative_tokens_per_batch_size")\n'
        'WHY = f"set num_speculative_tokens to {3}"\n',
        encoding="utf-8",
    )
    assert definitions(package, "DEPTH_KEYS") == ["mtpverdict/twin.py:2"]
    assert key_spellings(package) == ["mtpverdict/twin.py:2"] * 2 + ["mtpverdict/twin.py:3"]


def _line(prefix: str) -> str:
    lines = (ENGINES / "spec.py").read_text(encoding="utf-8").splitlines()
    return str(next(i for i, line in enumerate(lines, start=1) if line.startswith(prefix)))


def test_depth_free_keeps_every_other_setting() -> None:
    settings = {"method": "mtp", DEPTH_KEY: 3, SCHEDULE_KEY: [[1, 2, 3]], "model": "draft"}
    assert depth_free(settings) == {"method": "mtp", "model": "draft"}


def test_the_schedule_arm_serves_what_the_engine_compiles() -> None:
    """schedule-arm's derived config is the engine's own compiled schedule over the arm's settings."""
    config = '{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":4,"prompt_lookup_min":2}'
    arm = ArmPlan(
        "ngram_k2", "candidate", "ngram", 2, ("--speculative-config", config), None, "default", (), None
    )
    ranges = (
        ScheduleRange(1, 4, 3, "ngram_k3", (1,), ("k3 better",)),
        ScheduleRange(5, 1024, 1, "ngram_k1", (8,), ("k1 kept",)),
    )
    golden = load_decision(GOLDEN).schedule
    assert golden is not None
    schedule = msgspec.structs.replace(golden, method="ngram", ranges=ranges)
    derived, why = derived_config(arm, schedule)
    compiler = registry.schedule_compiler(SCHEDULE_ENGINE)
    assert not isinstance(compiler, Absent)
    table = [DepthRange(1, 4, 3), DepthRange(5, 1024, 1)]
    expected = compiler(depth_free(json.loads(config)), 3, table)
    assert why == ""
    assert json.dumps(derived, sort_keys=True, separators=(",", ":")) == expected
    assert derived is not None and derived[SCHEDULE_KEY] == [[1, 4, 3], [5, 1024, 1]]


def test_the_schedule_arm_refuses_an_engine_that_runs_no_schedule() -> None:
    serve = ("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "3")
    arm = ArmPlan("ngram_k3", "candidate", "ngram", 3, serve, None, "default", (), None)
    golden = load_decision(GOLDEN).schedule
    assert golden is not None
    ranges = (ScheduleRange(1, 1024, 3, "ngram_k3", (1,), ("k3 better",)),)
    derived, why = derived_config(arm, msgspec.structs.replace(golden, method="ngram", ranges=ranges))
    assert derived is None
    assert why == "arm ngram_k3's serve_args run sglang: only vLLM 0.32 runs a per-batch-size schedule"
