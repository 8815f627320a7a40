"""A campaign's engine: [server] engine, else the engine its [scope] names, never a silent default."""

from __future__ import annotations

import pytest

from mtpverdict.collect.campaign import parse_campaign
from mtpverdict.engines.names import DEFAULT_ENGINE, ENGINES, Engine
from mtpverdict.errors import CampaignError

from .conftest import small_campaign

PORT = 8000  # parsed only: nothing is served


def _text(scope: str | None, server: str | None) -> str:
    top = "" if scope is None else f'[scope]\nengine = "{scope}"'
    extra = "" if server is None else f'engine = "{server}"'
    return small_campaign(PORT, top_extra=top, server_extra=extra)


@pytest.mark.parametrize("engine", [e for e in ENGINES if e != DEFAULT_ENGINE])
def test_the_scopes_engine_serves_when_server_names_none(engine: Engine) -> None:
    plan = parse_campaign(_text(engine.value, None), "c.toml")
    assert plan.server.engine == engine
    assert dict(plan.scope)["engine"] == engine.value


def test_server_engine_given_is_kept_and_none_given_is_the_default() -> None:
    assert parse_campaign(_text(None, "llamacpp"), "c.toml").server.engine == Engine.LLAMACPP
    assert parse_campaign(_text(None, None), "c.toml").server.engine == DEFAULT_ENGINE
    assert parse_campaign(_text("tgi", "vllm"), "c.toml").server.engine == Engine.VLLM


def test_a_scope_engine_collect_does_not_read_without_a_server_engine_is_refused() -> None:
    with pytest.raises(CampaignError) as caught:
        parse_campaign(_text("tgi", None), "c.toml")
    (problem,) = caught.value.problems
    assert (problem.source, problem.key) == ("c.toml", "scope.engine")
    assert "'tgi' is no engine collect reads" in problem.message and "set server.engine" in problem.message
    assert all(e.value in problem.message for e in ENGINES)
