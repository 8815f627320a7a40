"""collect/launch.resolve_deployment refuses a compose service whose arms would not be what they say:
speculation outside the command line, environment the campaign adds over the service's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.collect import load_campaign_file
from mtpverdict.collect.campaign import CampaignPlan
from mtpverdict.collect.launch import resolve_deployment
from mtpverdict.collect.preflight import preflight
from mtpverdict.compose import Resolver
from mtpverdict.compose.derive import base_sha256
from mtpverdict.compose.docker import docker_run_argv
from mtpverdict.errors import InputError

LLAMA = "services:\n  seat:\n    image: ghcr.io/ggml-org/llama.cpp:server\n    entrypoint: [llama-server]\n"


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


def test_a_secret_the_compose_service_sets_is_redacted_from_campaign_json(
    tmp_path: Path, resolver: Resolver
) -> None:
    """A token named in server.secrets that the service's env_file sets must not reach campaign.json
    (deployment.service_json.environment) nor a boot's docker argv; the hash stays the unredacted one."""
    (tmp_path / "seat.env").write_text("HF_TOKEN=hf_0123456789abcdef\n")
    plan = _plan(
        tmp_path,
        LLAMA + "    command: [-m, /m.gguf]\n    env_file: [seat.env]\n",
        'secrets = ["HF_TOKEN"]\nlaunch = "docker"',
    )
    checked = preflight(
        plan, tmp_path / "out", variables={}, resume=False, allow_argv_mismatch=False, until_resolved=False
    )
    assert "hf_0123456789abcdef" not in json.dumps(checked.campaign)
    assert "hf_0123456789abcdef" in checked.secrets  # what every boot's records and raw files are redacted by
    assert checked.plan is not None
    deployment = checked.plan.server.deployment
    assert deployment is not None
    assert deployment.base_sha256 == base_sha256(deployment.service_json)  # of the unredacted service


@pytest.mark.parametrize(
    ("server_extra", "devices", "key"),
    [
        ("[server.env]\nVLLM_ATTENTION_BACKEND = 'FLASHINFER'", "", "server.env.VLLM_ATTENTION_BACKEND"),
        ("[server.env]\nSEAT_MODE = 'other'", "", "server.env.SEAT_MODE"),
        ("", '[[devices]]\nname = "g0"\nenv = { SEAT_MODE = "other" }', "devices[0].env.SEAT_MODE"),
    ],
)
def test_environment_a_campaign_adds_over_the_service_is_refused_naming_the_key(
    tmp_path: Path, resolver: Resolver, server_extra: str, devices: str, key: str
) -> None:
    """The gate hashes the service; a variable the campaign adds or overrides ran in every boot but is
    in neither the deployment nor its hash, so the gate would call different deployments identical."""
    compose = LLAMA + "    command: [-m, /m.gguf]\n    environment:\n      SEAT_MODE: deployed\n"
    said = _refused(_plan(tmp_path, compose, server_extra, devices))
    assert key in said, said


def test_a_device_may_select_its_accelerator(tmp_path: Path, resolver: Resolver) -> None:
    devices = '[[devices]]\nname = "g0"\nenv = { CUDA_VISIBLE_DEVICES = "0" }'
    plan = resolve_deployment(_plan(tmp_path, LLAMA + "    command: [-m, /m.gguf]\n", "", devices))
    assert plan.server.deployment is not None


def test_what_docker_run_cannot_start_is_refused_before_anything_is_written(
    tmp_path: Path, resolver: Resolver, cli: Callable[..., Any]
) -> None:
    """A key the docker builder refuses (a second service it depends on) used to fail each boot after
    campaign.json and its start file were written; it is bad input (exit 2) before that."""
    compose = LLAMA + "    command: [-m, /m.gguf]\n    depends_on: [db]\n  db:\n    image: postgres:16\n"
    plan = _plan(tmp_path, compose, 'service = "seat"\nlaunch = "docker"')
    assert "services.depends_on" in _refused(plan)
    out = tmp_path / "out"
    ran = cli("collect", tmp_path / "campaign.toml", "--out", out)
    assert ran.returncode == 2, (ran.stdout, ran.stderr)
    assert "services.depends_on" in ran.stderr
    assert not out.exists() or not any(out.iterdir())


def test_expose_is_carried_not_refused(tmp_path: Path, resolver: Resolver) -> None:
    compose = LLAMA + "    command: [-m, /m.gguf]\n    expose: ['8080']\n"
    plan = resolve_deployment(_plan(tmp_path, compose, 'launch = "docker"'))
    assert plan.server.deployment is not None
    argv = docker_run_argv(plan.server.deployment.service_json, ["llama-server", "-m", "/m.gguf"], name="n")
    assert "--expose=8080" in argv


def _campaign_with(where: Path, server: str) -> CampaignPlan:
    (where / "compose.yaml").write_text(LLAMA + "    command: [-m, /m.gguf]\n")
    (where / "campaign.toml").write_text(
        'campaign_version = 1\nid = "c"\ntitle = "t"\nconcurrency = [1]\nreps = 1\n[server]\n'
        f'mode = "launch"\n{server}\n[[arms]]\nname = "off"\nrole = "control"\n'
        '[[workloads]]\nid = "w"\nprompt = "p"\nmax_tokens = 4\n'
    )
    return load_campaign_file(where / "campaign.toml")


@pytest.mark.parametrize(
    ("server", "key", "says"),
    [
        ('compose = ""', "server.compose", "an empty path is not a compose file"),
        ('compose = "missing.yaml"', "server.compose", "missing.yaml is not a compose file"),
        ('compose = "compose.yaml"\nenv_file = "nope.env"', "server.env_file", "nope.env is not a file"),
        ('compose = "compose.yaml"\nproject_dir = "nodir"', "server.project_dir", "nodir is not a directory"),
        ('compose = "compose.yaml"\nservice = "other"', "server.service", "no service 'other'"),
    ],
)
def test_a_compose_setting_that_names_nothing_is_refused_naming_its_key(
    tmp_path: Path, resolver: Resolver, server: str, key: str, says: str
) -> None:
    """A missing env_file or project_dir was ignored by Compose (the service resolved without it); an
    empty compose path said only that a directory is not a file; Compose's own errors named no key."""
    with pytest.raises(InputError) as caught:
        resolve_deployment(_campaign_with(tmp_path, server))
    (problem,) = caught.value.problems
    assert problem.key == key and says in problem.message, problem
    assert problem.source == str(tmp_path / "campaign.toml")
