"""Compose services written to make the gate exit 0 wrongly, beyond the classes of test_attacks: each
is refused (resolved with the real Compose), and the plain service beside them passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtpverdict.compose import ComposeOptions, Resolver, read_compose
from mtpverdict.gate import GateEvidence, evaluate
from mtpverdict.serveconfig import read_bounded

from .conftest import IMAGE, K2

K3 = K2.replace("2", "3")
COMMAND = f"[--model, synthetic, --speculative-config, '{K2}']"


def _service(extra: str = "", command: str = COMMAND, image: str = IMAGE) -> str:
    return f"services:\n  seat:\n    image: {image}\n    command: {command}\n{extra}"


CASES = {
    "a digest the evidence did not record": (
        _service(image=f"{IMAGE}@sha256:{'a' * 64}"),
        "stale evidence, image digest",
    ),
    "LD_PRELOAD": (
        _service("    environment: {LD_PRELOAD: /models/evil.so}\n"),
        "environment variable LD_PRELOAD changes which code the server runs",
    ),
    "PYTHONPATH": (
        _service("    environment: [PYTHONPATH=/models/patch]\n"),
        "environment variable PYTHONPATH changes which code the server runs",
    ),
    "a volume over the program": (
        _service("    volumes: ['./evil:/usr/local/bin/vllm']\n"),
        "mounts /usr/local/bin/vllm over /usr",
    ),
    "a volume over a package": (
        _service("    volumes: ['./v:/root/.local/lib/python3.12/site-packages/vllm']\n"),
        "over a Python package directory",
    ),
    "a volume over the entrypoint's path": (
        _service("    entrypoint: [/srv/vllm, serve]\n    volumes: ['./evil.sh:/srv/vllm']\n"),
        "mounts /srv/vllm over /srv/vllm",
    ),
    "no replicas": (_service("    deploy: {replicas: 0}\n"), "service seat does not start"),
    "scale 0": (_service("    scale: 0\n"), "service seat does not start"),
    "a post_start hook": (
        _service("    post_start: [{command: [sh, -c, 'kill 1']}]\n"),
        "post_start runs commands in the container",
    ),
    "another platform": (_service("    platform: linux/arm64\n"), "platform linux/arm64 selects a build"),
    "a speculative switch before a model": (
        _service(command=f"[--model, synthetic, --spec-default, /models/evil, --speculative-config, '{K2}']"),
        "cannot be read",
    ),
    "an abbreviation vLLM expands": (
        _service(command=f"[--model, synthetic, --speculative-config, '{K2}', --specu, '{K3}']"),
        "stale evidence, --specu",
    ),
    "a host that is no literal": (
        _service(command=f"[--model, synthetic, --speculative-config, '{K2}', --host, '0.0.0.0 --x 1']"),
        "stale evidence, --host",
    ),
    "a merge key bringing a shell": (
        f"x-s: &s\n  image: {IMAGE}\n  entrypoint: [sh, -c, 'vllm serve']\n"
        f"services:\n  seat:\n    <<: *s\n    command: {COMMAND}\n",
        "'sh' runs before the server",
    ),
    "an extends chain bringing an engine variable": (
        f"services:\n  a:\n    image: {IMAGE}\n    environment: {{VLLM_X: '1'}}\n  b:\n    extends: a\n"
        f"  seat:\n    extends: b\n    command: {COMMAND}\n",
        "stale evidence, environment VLLM_X",
    ),
    "an interpolated image": (
        _service(image="vllm/vllm-openai:${TAG:-v0.32.0}"),
        "services.seat.image uses ${TAG",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused(case: str, tmp_path: Path, resolver: Resolver, seat: GateEvidence) -> None:
    text, fragment = CASES[case]
    path = tmp_path / "compose.yaml"
    path.write_text(text)
    found = evaluate(
        seat, None, read_compose(str(path), read_bounded(path), "seat", ComposeOptions(), resolver)
    )
    assert not found.supported and any(fragment in r for r in found.reasons), found.reasons


def test_the_plain_service_passes(tmp_path: Path, resolver: Resolver, seat: GateEvidence) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(_service(image=f"docker.io/{IMAGE}"))  # Docker Hub's prefix names the same image
    found = evaluate(
        seat, None, read_compose(str(path), read_bounded(path), "seat", ComposeOptions(), resolver)
    )
    assert found.supported, found.reasons
