"""A JSON --proposed is the speculative config of the engine the proposal runs on, read by its part."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mtpverdict.engines import registry
from mtpverdict.engines.names import DEFAULT_ENGINE, ENGINES, Engine
from mtpverdict.engines.spec import CONFIG_FLAG, DEPTH_KEY
from mtpverdict.errors import InputError
from mtpverdict.gate import parse_spec
from mtpverdict.gate.proposal import json_spec
from mtpverdict.gate.run import proposal_engine
from mtpverdict.serveconfig import FLAGS, ServeConfig

from ..conftest import FIXTURES, run_cli

WIN = FIXTURES / "synthetic-clean-win"  # promote k2 (mtp k=2); its scope names no engine collect reads
MTP2 = json.dumps({"method": "mtp", DEPTH_KEY: 2})
# the engines whose flag table takes no speculative config as JSON
NO_JSON = [e for e in ENGINES if FLAGS[CONFIG_FLAG].engine != e]


def _scoped(tmp_path: Path, engine: str) -> Path:
    """The fixture's results with their campaign's scope naming `engine`."""
    results = tmp_path / "results"
    shutil.copytree(WIN, results)
    campaign = json.loads((results / "campaign.json").read_text())
    campaign["scope"]["engine"] = engine
    (results / "campaign.json").write_text(json.dumps(campaign))
    return results


def test_the_json_is_read_through_the_engine_that_takes_it() -> None:
    spec = json_spec(MTP2, FLAGS[CONFIG_FLAG].engine)
    assert (spec.engine, spec.method, spec.k) == (FLAGS[CONFIG_FLAG].engine, "mtp", 2)
    assert parse_spec(MTP2).settings == spec  # by default, the default engine's JSON


@pytest.mark.parametrize("engine", NO_JSON)
def test_an_engine_without_a_json_config_refuses_it_by_name(engine: Engine) -> None:
    assert NO_JSON, "every engine takes a JSON config: the refusal is not exercised"
    with pytest.raises(InputError) as caught:
        parse_spec(MTP2, engine)
    (problem,) = caught.value.problems
    assert problem.source == "--proposed"
    assert problem.message.startswith(f"{registry.title(engine)} takes no speculative config as JSON")
    assert parse_spec("mtp:k=2", engine).k == 2  # the other forms name no engine's settings


def test_the_proposals_engine_is_the_serve_configs_then_the_campaigns() -> None:
    sglang = ServeConfig(
        ("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "3"), None, "c"
    )
    assert proposal_engine(sglang, "vllm") == Engine.SGLANG
    assert proposal_engine(None, "llamacpp") == Engine.LLAMACPP
    assert proposal_engine(None, "simulated") == DEFAULT_ENGINE
    assert proposal_engine(ServeConfig(("--model", "m"), None, "c"), None) == DEFAULT_ENGINE


@pytest.mark.parametrize("engine", NO_JSON)
def test_the_gate_refuses_json_for_evidence_of_an_engine_without_one(tmp_path: Path, engine: Engine) -> None:
    ran = run_cli("gate", _scoped(tmp_path, engine.value), "--proposed", MTP2)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert f"--proposed: {registry.title(engine)} takes no speculative config as JSON" in ran.stderr


def test_the_gate_reads_json_for_evidence_of_the_engine_that_takes_it(tmp_path: Path) -> None:
    ran = run_cli("gate", _scoped(tmp_path, FLAGS[CONFIG_FLAG].engine.value), "--proposed", MTP2)
    assert ran.returncode == 0 and "supported" in ran.stdout, ran.stdout + ran.stderr
