"""The next step for streams set aside by arm names the server's clock of the campaign's engine only: a
decision on one engine's campaign does not change when another engine joins the registry."""

from __future__ import annotations

from typing import Any

import pytest

from mtpverdict.engines import registry
from mtpverdict.engines.names import ENGINES, Engine
from mtpverdict.sim import SimArm

from ..test_next_step import OFF, _bursts, _simulated


def _step(engine: str) -> str:
    """The next step of a campaign on `engine` whose candidate's streams were set aside by arm."""

    def edit(campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
        _bursts(campaign, records)
        campaign["scope"]["engine"] = engine

    step = _simulated((OFF[0], SimArm("k1", 1, 0.0), OFF[1]), edit=edit).next_step
    assert step is not None and step.startswith("streams were set aside by arm"), step
    return step


@pytest.mark.parametrize("engine", ENGINES)
def test_the_step_names_only_the_campaigns_engine(engine: Engine) -> None:
    """Before: every registered engine's clock ("vLLM >= 0.32: ...; llama.cpp reports its timings")."""
    step = _step(engine.value)
    assert registry.title(engine) in step
    assert not [other for other in ENGINES if other != engine and registry.title(other) in step]
    fields = registry.present(registry.get(engine).server_fields)
    if fields is not None and fields.clock_flag is not None:
        assert fields.clock_flag in step  # the flag that turns the engine's own clock on
    assert not [
        flag
        for other in ENGINES
        if other != engine and (theirs := registry.present(registry.get(other).server_fields))
        for flag in [theirs.clock_flag]
        if flag is not None and flag in step
    ]


def test_a_campaign_naming_no_known_engine_names_none() -> None:
    step = _step("simulated")
    assert not [engine for engine in ENGINES if registry.title(engine) in step]
    assert "[scope] engine names no engine whose per-request clock collect reads" in step
