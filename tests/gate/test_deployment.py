"""Freshness by hash: evidence collected from a compose service supports it but for its speculation."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from mtpverdict.compose import ComposeOptions, Resolver, resolve_service
from mtpverdict.compose.derive import deployment_record
from mtpverdict.gate.run import gate

from .conftest import IMAGE, K2, seat_evidence

SEAT = f"services:\n  seat:\n    image: {IMAGE}\n    ipc: host\n    command: [--model, synthetic{{extra}}]\n"


def _compose(where: Path, extra: str = "", service: str = "") -> Path:
    where.mkdir(exist_ok=True)
    path = where / "compose.yaml"
    path.write_text(SEAT.replace("{extra}", extra) + service)
    return path


def _evidence(tmp_path: Path, resolver: Resolver) -> Path:
    """The seat's evidence, collected from the compose service with speculation off, as collect records it."""
    ran = resolve_service(str(_compose(tmp_path / "ran")), "seat", ComposeOptions(), resolver)
    where = seat_evidence(tmp_path / "evidence")
    campaign = json.loads((where / "campaign.json").read_text())
    campaign["deployment"] = msgspec.to_builtins(deployment_record(ran, "native"))
    (where / "campaign.json").write_text(json.dumps(campaign, indent=2, sort_keys=True) + "\n")
    return where


def test_a_service_that_differs_only_in_speculation_is_supported_by_hash(
    tmp_path: Path, resolver: Resolver
) -> None:
    evidence = _evidence(tmp_path, resolver)
    proposed = _compose(tmp_path / "deploy", f", --speculative-config, '{K2}'")
    result = gate(evidence, None, None, serve_config=str(proposed), service="seat")
    assert result.supported, result.reasons
    (said,) = [r for r in result.reasons if "the evidence was collected from compose service seat" in r]
    assert "has the same sha256 without its speculative flags" in said and "only in speculation" in said
    assert "image, ipc, shm_size, gpus, devices and volumes did not run" in said  # a native launch's


def test_a_service_changed_beyond_its_command_is_refused_by_hash(tmp_path: Path, resolver: Resolver) -> None:
    evidence = _evidence(tmp_path, resolver)
    proposed = _compose(tmp_path / "deploy", f", --speculative-config, '{K2}'", "    shm_size: 8gb\n")
    result = gate(evidence, None, None, serve_config=str(proposed), service="seat")
    assert not result.supported
    (said,) = [r for r in result.reasons if r.startswith("stale evidence, compose service")]
    assert said.endswith("differs beyond speculation in services.seat.shm_size")


def test_a_changed_flag_is_refused_by_its_argv_and_named_by_hash(tmp_path: Path, resolver: Resolver) -> None:
    evidence = _evidence(tmp_path, resolver)
    proposed = _compose(tmp_path / "deploy", f", --max-model-len, '4096', --speculative-config, '{K2}'")
    result = gate(evidence, None, None, serve_config=str(proposed), service="seat")
    assert not result.supported
    assert any(r.startswith("stale evidence, --max-model-len") for r in result.reasons), result.reasons
    assert any("they differ in command only" in r for r in result.reasons), result.reasons


def test_evidence_without_a_deployment_says_nothing_by_hash(tmp_path: Path, resolver: Resolver) -> None:
    evidence = seat_evidence(tmp_path / "evidence")
    proposed = _compose(tmp_path / "deploy", f", --speculative-config, '{K2}'")
    result = gate(evidence, None, None, serve_config=str(proposed), service="seat")
    assert result.supported and not any("collected from compose service" in r for r in result.reasons)


def test_the_environment_the_evidences_service_set_is_recorded_evidence(
    tmp_path: Path, resolver: Resolver
) -> None:
    """Without a deployment the gate refuses any engine variable (the evidence records no environment);
    with one, a variable the evidence's service set alike is recorded, and one set otherwise is stale."""
    env = "    environment:\n      VLLM_CPU_KVCACHE_SPACE: '4'\n"
    ran = resolve_service(str(_compose(tmp_path / "ran", "", env)), "seat", ComposeOptions(), resolver)
    evidence = seat_evidence(tmp_path / "evidence")
    bare = gate(
        evidence,
        None,
        None,
        serve_config=str(_compose(tmp_path / "same", f", --speculative-config, '{K2}'", env)),
        service="seat",
    )
    assert any(r.startswith("stale evidence, environment VLLM_CPU_KVCACHE_SPACE") for r in bare.reasons)
    campaign = json.loads((evidence / "campaign.json").read_text())
    campaign["deployment"] = msgspec.to_builtins(deployment_record(ran, "native"))
    (evidence / "campaign.json").write_text(json.dumps(campaign, indent=2, sort_keys=True) + "\n")
    same = gate(evidence, None, None, serve_config=str(tmp_path / "same" / "compose.yaml"), service="seat")
    assert same.supported, same.reasons
    other = _compose(tmp_path / "other", f", --speculative-config, '{K2}'", env.replace("'4'", "'8'"))
    changed = gate(evidence, None, None, serve_config=str(other), service="seat")
    assert not changed.supported
    assert any(r.startswith("stale evidence, environment VLLM_CPU_KVCACHE_SPACE") for r in changed.reasons)
    assert any(r.endswith("differs beyond speculation in services.seat.environment") for r in changed.reasons)


def test_a_named_volume_defined_elsewhere_is_refused_by_hash(tmp_path: Path, resolver: Resolver) -> None:
    """A named volume's driver_opts (top-level volumes:) choose the directory the model comes from: the
    deployment's hash holds the definitions of what the service uses, so another device is stale."""
    mount = (
        "    volumes: [models:/models]\nvolumes:\n  models:\n"
        "    driver_opts: {type: none, o: bind, device: /data/%s}\n"
    )
    ran = resolve_service(
        str(_compose(tmp_path / "ran", "", mount % "v1")), "seat", ComposeOptions(), resolver
    )
    evidence = seat_evidence(tmp_path / "evidence")
    campaign = json.loads((evidence / "campaign.json").read_text())
    campaign["deployment"] = msgspec.to_builtins(deployment_record(ran, "native"))
    (evidence / "campaign.json").write_text(json.dumps(campaign, indent=2, sort_keys=True) + "\n")
    spec = f", --speculative-config, '{K2}'"
    same = gate(
        evidence, None, None, serve_config=str(_compose(tmp_path / "a", spec, mount % "v1")), service="seat"
    )
    assert same.supported, same.reasons
    moved = gate(
        evidence, None, None, serve_config=str(_compose(tmp_path / "b", spec, mount % "v2")), service="seat"
    )
    assert not moved.supported
    (said,) = [r for r in moved.reasons if r.startswith("stale evidence, compose service")]
    assert "top-level definitions of the volumes" in said, said
