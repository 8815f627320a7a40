"""Each way a deployment ran something the evidence does not support while the gate said exit 0, as
a compose (or argv) case under tests/data/gate/ resolved with the real Compose: every one is now
refused with its reason, and the legitimate override beside them still passes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mtpverdict.compose import ComposeOptions, Resolver, read_compose
from mtpverdict.gate import GateEvidence, GateResult, evaluate, image_version
from mtpverdict.serveconfig import ServeConfig, read_bounded, read_serve_config

from .conftest import CASES, decided, seat_evidence

# case directory -> a fragment of the refusal
ATTACKS = {
    # a program in front of the server
    "wrapper-shell": "cannot tell what runs: 'sh' runs before the server",
    "wrapper-python-c": "cannot tell what runs: python3 runs a -c script, not an engine's module",
    "wrapper-env": "cannot tell what runs: 'env' runs before the server",
    "environment-engine-variable": "stale evidence, environment VLLM_ATTENTION_BACKEND",
    # Compose's own merging
    "extends-same-file": "stale evidence, --max-num-seqs: evidence (absent) vs proposed 512",
    "extends-file": "stale evidence, --max-num-seqs: evidence (absent) vs proposed 512",
    "override-file": "proposing mtp k=3, but the decision (promote) selects k2 with k=2",
    "profiles": "cannot tell what runs: service seat does not start with the profiles (none)",
    # deploy-time interpolation, a model named like a server, Compose's splitter
    "interpolation": "cannot tell what runs: services.seat.command uses ${HOST_ARGS:-0.0.0.0}",
    "model-named-server": "stale evidence, --model: evidence synthetic vs proposed /models/server synthetic",
    "semicolon": "services.seat.command is a string with the shell character ';'",
    # the image
    "image-repository": "image repository: evidence vllm/vllm-openai vs proposed attacker.example/not-vllm",
}


def _resolved(case: str, resolver: Resolver | None, options: ComposeOptions | None = None) -> ServeConfig:
    path = CASES / case / "compose.yaml"
    return read_compose(str(path), read_bounded(path), "seat", options or ComposeOptions(), resolver)


def _refused(result: GateResult, fragment: str) -> None:
    assert not result.supported, result.reasons
    assert any(fragment in r for r in result.reasons), result.reasons


@pytest.mark.parametrize("case", sorted(ATTACKS))
def test_each_attack_is_refused(case: str, resolver: Resolver, seat: GateEvidence) -> None:
    _refused(evaluate(seat, None, _resolved(case, resolver)), ATTACKS[case])


def test_env_in_front_of_the_server_on_a_command_line_is_refused(seat: GateEvidence) -> None:
    config = read_serve_config(CASES / "wrapper-env-line" / "serve.argv")
    _refused(evaluate(seat, None, config), "cannot tell what runs: 'env' runs before the server")


def test_the_resolved_service_is_what_compose_runs(resolver: Resolver) -> None:
    """The override's k=3, extends' entrypoint, and the command Compose cut at `;`."""
    assert 'num_speculative_tokens":3' in _resolved("override-file", resolver).argv[-1]
    assert _resolved("extends-file", resolver).argv[:4] == ("vllm", "serve", "--max-num-seqs", "512")
    assert _resolved("semicolon", resolver).argv == ("--model", "synthetic", "--port", "8000")


def test_a_plain_override_that_does_not_touch_speculation_passes(
    resolver: Resolver, seat: GateEvidence
) -> None:
    config = _resolved("legitimate-override", resolver)
    found = evaluate(seat, None, config)
    assert found.supported, found.reasons
    assert found.spec == "mtp k=2"
    (line,) = [r for r in found.reasons if r.startswith("compose service seat resolved by")]
    assert "compose.yaml, " in line and "compose.override.yaml" in line, line


def test_the_profile_the_deployment_enables_starts_the_service(
    resolver: Resolver, seat: GateEvidence
) -> None:
    config = _resolved("profiles", resolver, ComposeOptions(profiles=("standby",)))
    found = evaluate(seat, None, config)
    assert found.supported, found.reasons
    assert any("profiles standby" in r for r in found.reasons), found.reasons


def test_every_boot_of_the_arms_relied_on_must_have_run_the_images_version(
    resolver: Resolver, tmp_path: Path
) -> None:
    """One boot of k2 at 0.33.0 (of three) does not make the evidence fresh for a 0.33.0 image."""

    def first_boot_newer(record: dict[str, object]) -> None:
        if record["arm"] == "k2" and record["boot"] == 1:
            record["engine_version"] = "0.33.0"

    mixed = decided(
        seat_evidence(tmp_path / "mixed", image="vllm/vllm-openai:v0.33.0", edit=first_boot_newer)
    )
    found = evaluate(mixed, None, _resolved("image-newer", resolver))
    _refused(found, "stale evidence, engine version: boot 2 of k2 ran 0.32.0 vs proposed image")
    assert any("boot 1 of off_A ran 0.32.0" in r for r in found.reasons), found.reasons  # its controls too

    def unrecorded(record: dict[str, object]) -> None:
        if record["arm"] == "off_B" and record["boot"] == 2:
            record["engine_version"] = None

    missing = decided(seat_evidence(tmp_path / "missing", edit=unrecorded))
    _refused(
        evaluate(missing, None, _resolved("legitimate-override", resolver)),
        "boot 2 of off_B recorded no engine version",
    )


def test_a_tag_the_old_pattern_backtracked_on_is_answered_at_once(
    resolver: Resolver, seat: GateEvidence
) -> None:
    tag = "vllm/vllm-openai:v0.32" + "a" * 40 + "_"
    start = time.process_time()
    assert image_version(tag) is None
    assert time.process_time() - start < 0.5  # the old pattern: over two minutes
    found = evaluate(seat, None, _resolved("image-backtracking", resolver))
    _refused(found, "names no engine version (a floating tag)")
