"""Compose services that ran other code, another model or unseen settings while the gate said exit 0:
what decides which program and model run beyond the argv (PATH, HOME, the working directory, a
relative program path, python -m's module path, a pycache prefix, a user site directory, a tmpfs,
another service's volumes, an env file absent here, where the model is downloaded from). Each is a
case under tests/data/gate/ resolved with the real Compose, and is refused with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtpverdict.compose import ComposeOptions, Resolver, read_compose
from mtpverdict.gate import GateEvidence, evaluate
from mtpverdict.serveconfig import read_bounded

from .conftest import CASES

TELL = "cannot tell what runs: "
REVIEW = {
    "path-variable": TELL + "environment variable PATH changes which code the server runs",
    "home-variable": TELL + "environment variable HOME changes which code the server runs",
    "pycache-prefix-variable": TELL + "environment variable PYTHONPYCACHEPREFIX changes which code",
    "pycache-prefix-option": TELL + "python3 option -X pycache_prefix=/models/pyc loads code",
    "working-dir": TELL + "services.seat.working_dir /models",
    "python-m-mount": TELL + "python3 -m puts the working directory first on its module path",
    "relative-program": TELL + "'./vllm' is a relative path",
    "user-site-mount": TELL + "services.seat.volumes mounts /root/.local over a user's site directory",
    "tmpfs-program": TELL + "services.seat.tmpfs mounts /usr/local/lib over /usr",
    "volumes-from": TELL + "services.seat.volumes_from mounts the volumes of helper",
    "env-file-absent": TELL + "services.seat.env_file /etc/seat/vllm.env is not here",
    "model-source-variable": "stale evidence, environment HF_ENDPOINT",
    "ca-variable": "stale evidence, environment REQUESTS_CA_BUNDLE",  # another huggingface.co's weights
    # compiled kernels and generated code vLLM, PyTorch and Triton load from their caches
    "compile-cache-mount": TELL + "services.seat.volumes mounts /root/.cache/vllm over a compiled-code cache",
    "inductor-cache-variable": TELL + "environment variable TORCHINDUCTOR_CACHE_DIR changes which code",
    "openssl-conf": TELL + "environment variable OPENSSL_CONF changes which code the server runs",
    # .env lines Compose's dotenv reader takes as COMPOSE_FILE: Compose deploys deploy.yaml (k=3)
    "env-export-tab": "env-export-tab/.env sets COMPOSE_FILE",
    "env-colon": "env-colon/.env sets COMPOSE_FILE",
}


@pytest.mark.parametrize("case", sorted(REVIEW))
def test_refused(case: str, resolver: Resolver, seat: GateEvidence) -> None:
    path = CASES / case / "compose.yaml"
    config = read_compose(str(path), read_bounded(path), "seat", ComposeOptions(), resolver)
    found = evaluate(seat, None, config)
    assert not found.supported, found.reasons
    assert any(REVIEW[case] in r for r in found.reasons), found.reasons


@pytest.mark.parametrize("case", ["env-export-tab", "env-colon"])
def test_compose_settings_in_env_are_read_without_a_resolver(case: str, seat: GateEvidence) -> None:
    path = CASES / case / "compose.yaml"
    config = read_compose(str(path), read_bounded(path), "seat", ComposeOptions(), None)
    assert any("sets COMPOSE_FILE" in r for r in config.refusals), config.refusals


def test_python_m_with_safe_path_and_a_model_mount_passes(
    tmp_path: Path, resolver: Resolver, seat: GateEvidence
) -> None:
    """-P keeps the working directory off the module path: a model mount beside it is fine."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  seat:\n    image: vllm/vllm-openai:v0.32.0\n"
        "    entrypoint: [python3, -P, -m, vllm.entrypoints.openai.api_server]\n"
        "    command: [--model, synthetic, --speculative-config, "
        '\'{"method":"mtp","num_speculative_tokens":2}\']\n'
        "    volumes: ['./hf:/root/.cache/huggingface']\n"
    )
    found = evaluate(
        seat, None, read_compose(str(path), read_bounded(path), "seat", ComposeOptions(), resolver)
    )
    assert found.supported, found.reasons


# read directly (no resolver): a Windows volume source's own colon, a string command with a backslash
# (Compose's splitter drops it before any character: "synth\etic" is synthetic), and python -m in a
# string entrypoint beside a mount
PLAIN = {
    "plain-windows-volume": TELL
    + "services.seat.volumes mounts /usr/local/lib/python3.12/dist-packages/vllm",
    "plain-backslash": TELL + "services.seat.command is a string with a backslash",
    "plain-string-python-m": TELL + "python3 -m puts the working directory first on its module path",
}


@pytest.mark.parametrize("case", sorted(PLAIN))
def test_refused_read_directly(case: str, seat: GateEvidence) -> None:
    path = CASES / case / "compose.yaml"
    found = evaluate(seat, None, read_compose(str(path), read_bounded(path), "seat", ComposeOptions(), None))
    assert not found.supported, found.reasons
    assert any(PLAIN[case] in r for r in found.reasons), found.reasons


def test_a_remote_include_is_bad_input_before_compose_fetches_it(resolver: Resolver) -> None:
    """Compose would pull an OCI artifact (a mutable tag) past the file checks; the gate reads only
    local files, and answers without the network."""
    from mtpverdict.errors import InputError

    path = CASES / "remote-include" / "compose.yaml"
    with pytest.raises(InputError, match="is a remote resource"):
        read_compose(str(path), read_bounded(path), "seat", ComposeOptions(), resolver)
