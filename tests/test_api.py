"""The public API: `mtpverdict.__all__` is the curated list, every name resolves, and importing is cheap."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import mtpverdict

from .conftest import FIXTURES

PUBLIC = [
    "Arm",
    "Campaign",
    "CampaignError",
    "CollectError",
    "Decision",
    "DecisionKind",
    "DecisionRun",
    "EngineTextError",
    "GateResult",
    "InputError",
    "MtpverdictError",
    "Policy",
    "PolicyError",
    "Problem",
    "Results",
    "ResultsError",
    "ResultsWriter",
    "UnknownArmError",
    "Verdict",
    "Verification",
    "Workload",
    "__version__",
    "decide",
    "decide_directory",
    "decide_results",
    "decision_json",
    "gate",
    "load_decision",
    "load_policy",
    "load_results",
    "settled_arms",
    "shipped_policies",
    "verify",
    "write_report",
]


def test_all_is_the_pinned_sorted_list() -> None:
    assert mtpverdict.__all__ == PUBLIC
    assert PUBLIC == sorted(PUBLIC, key=str)


def test_every_public_name_resolves() -> None:
    for name in mtpverdict.__all__:
        assert getattr(mtpverdict, name) is not None, name
    assert dir(mtpverdict) == sorted(PUBLIC)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        mtpverdict.not_a_name  # noqa: B018
    except AttributeError as exc:
        assert "not_a_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_importing_the_package_loads_no_numeric_stack() -> None:
    heavy = "('pandas', 'scipy', 'numpy', 'msgspec')"
    code = f"import sys, mtpverdict; print(sorted(m for m in {heavy} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_readme_example_runs() -> None:
    run = mtpverdict.decide_directory(FIXTURES / "synthetic-clean-win", rules="default")
    assert run.decision.decision == mtpverdict.DecisionKind.PROMOTE
    assert run.json_text.startswith("{")


def test_functions_named_like_their_module_stay_functions() -> None:
    # importing the submodules first bound mtpverdict.gate to the module: `from mtpverdict import gate`
    # then gave a module, and calling it raised TypeError
    code = (
        "import mtpverdict.gate, mtpverdict.verify, mtpverdict.decide.engine\n"
        "from mtpverdict import decide, gate, verify\n"
        "assert all(callable(f) for f in (decide, gate, verify)), (decide, gate, verify)\n"
        "from mtpverdict.gate import GateResult\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# an import path the docs once gave, kept working with a DeprecationWarning: old module -> (new module,
# the names it re-exports)
DEPRECATED_MODULES = {
    "mtpverdict.ray_shards": ("mtpverdict.collect.ray_shards", ("ShardRun", "run_shards")),
}


@pytest.mark.parametrize("old", sorted(DEPRECATED_MODULES))
def test_a_documented_old_import_path_still_works_and_names_the_new_one(old: str) -> None:
    new, names = DEPRECATED_MODULES[old]
    module, target = importlib.import_module(old), importlib.import_module(new)
    assert sorted(module.__all__) == sorted(names)
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"import {name} from {new}") as caught:
            assert getattr(module, name) is getattr(target, name)
        assert caught[0].filename == __file__  # the importer's line, which Python shows by default
    with pytest.raises(AttributeError):
        module.nothing_else  # noqa: B018
