"""The gate: support, refusals that cite the arm's own rules, stale evidence, the spec read from the
serve config, hostile serve configs, bad input and what CI sees (step summary, outputs)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mtpverdict.errors import InputError
from mtpverdict.gate import (
    ArmEvidence,
    FailingRule,
    GateEvidence,
    argv_differences,
    check_fresh,
    evaluate,
    image_version,
    parse_spec,
)
from mtpverdict.serveconfig import ServeConfig

from ..conftest import FIXTURES, Ran, run_cli

WIN = FIXTURES / "synthetic-clean-win"  # decision: promote k2 (mtp k=2) under the default policy
K2 = '{"method":"mtp","num_speculative_tokens":2}'
K3 = '{"method":"mtp","num_speculative_tokens":3}'
ENGINE = "0.32.0"
IMAGE = f"vllm/vllm-openai:v{ENGINE}"  # the image the seat's evidence (_seat) records
# A hostile serve config that the reader would expand stops at this much memory instead of the
# machine's; the gate itself needs well under 1 GiB.
MEMORY_LIMIT = 2 << 30
HOSTILE_SECONDS = 180  # a FIFO that hangs the reader fails the test instead of hanging it (room for load)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _gate(*args: str, env: dict[str, str] | None = None) -> Ran:
    return run_cli("gate", *args, env=env)


def _gate_guarded(*args: str) -> subprocess.CompletedProcess[str]:
    """The gate in a process of its own under a memory and a time limit: for the hostile serve
    configs, whose failure (a hang, a blow-up) must fail the test, not take the test run with it."""
    return subprocess.run(
        [sys.executable, "-m", "mtpverdict", "gate", *args],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=_limit_memory,
        timeout=HOSTILE_SECONDS,
    )


def _compose(
    tmp: Path, command: list[str] | str, image: str | None = IMAGE, name: str = "compose.yaml"
) -> Path:
    import yaml

    service: dict[str, object] = {"command": command}
    if image:
        service["image"] = image
    path = tmp / name
    path.write_text(yaml.safe_dump({"services": {"seat": service, "proxy": {"image": "nginx"}}}))
    return path


def _seat(tmp: Path, version: str = ENGINE, image: str = IMAGE) -> Path:
    """The clean-win campaign as a seat's evidence: its scope names the image, every boot the engine
    version (the story of docs/gate.md)."""
    results = tmp / "seat-evidence"
    shutil.copytree(WIN, results)
    records = results / "records.jsonl"
    records.write_text(
        records.read_text().replace('"engine_version":"simulated"', f'"engine_version":"{version}"')
    )
    campaign = json.loads((results / "campaign.json").read_text())
    campaign["scope"]["engine_version"] = image
    (results / "campaign.json").write_text(json.dumps(campaign, indent=2, sort_keys=True) + "\n")
    return results


def _server_died(tmp: Path, arm: str = "k3") -> Path:
    """The clean-win campaign with the third boot of `arm` failed (its server died before ready)."""
    results = tmp / "died"
    shutil.copytree(WIN, results)
    lines = []
    for line in (results / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["arm"] == arm and record.get("boot") == 3:
            if record["kind"] != "boot":
                continue
            for key in ("ready_seconds", "kv_cache_tokens", "num_blocks", "block_size", "max_model_len"):
                record[key] = None
            record.update(status="failed", observed_k=None, error="server exited with code 1 before ready")
        lines.append(json.dumps(record, sort_keys=True, separators=(",", ":")))
    (results / "records.jsonl").write_text("\n".join(lines) + "\n")
    return results


def test_parse_spec_forms() -> None:
    assert parse_spec("off").off and parse_spec("k=0").off
    assert (parse_spec("k=3").method, parse_spec("k=3").k) == (None, 3)
    assert (parse_spec("mtp:k=2").method, parse_spec("mtp:k=2").k) == ("mtp", 2)
    spec = parse_spec('{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}')
    assert (spec.method, spec.k) == ("ngram", 4)
    assert parse_spec('{"model": "/m/draft", "num_speculative_tokens": 2}').method == "draft_model"
    for bad in ("k=three", "{not json", '{"method": "mtp"}', "fast", "mtp:k=0"):
        with pytest.raises(InputError):
            parse_spec(bad)


def test_support_and_refusal() -> None:
    ok = _gate(str(WIN), "--proposed", "k=2")
    assert ok.returncode == 0 and "supported" in ok.stdout
    wrong_depth = _gate(str(WIN), "--proposed", "mtp:k=3")
    assert wrong_depth.returncode == 1 and "selects k2 with k=2" in wrong_depth.stdout
    off = _gate(str(WIN), "--proposed", "off")
    assert off.returncode == 1 and "keeping speculation off needs evidence too" in off.stdout
    arc = _gate(str(FIXTURES / "arc-b70-qwen36"), "--rules", "arc-b70", "--proposed", "off")
    assert arc.returncode == 0
    inconclusive = _gate(str(FIXTURES / "synthetic-drift"), "--proposed", "k=1")
    assert inconclusive.returncode == 1 and "inconclusive" in inconclusive.stdout


def test_a_compose_file_that_changes_only_the_speculative_config_passes(tmp_path: Path) -> None:
    compose = _compose(tmp_path, ["--model", "synthetic", "--speculative-config", K2, "--port", "9000"])
    done = _gate(str(_seat(tmp_path)), "--proposed", K2, "--serve-config", str(compose), "--service", "seat")
    assert done.returncode == 0, done.stdout
    assert "evidence is fresh" in done.stdout


def test_a_compose_file_that_also_changes_the_model_fails_and_names_it(tmp_path: Path) -> None:
    compose = _compose(
        tmp_path, ["--model", "other-model", "--speculative-config", K2, "--max-num-batched-tokens", "8192"]
    )
    done = _gate(str(WIN), "--proposed", K2, "--serve-config", str(compose), "--service", "seat")
    assert done.returncode == 1
    assert "stale evidence, --model: evidence synthetic vs proposed other-model" in done.stdout
    assert "stale evidence, --max-num-batched-tokens: evidence (absent) vs proposed 8192" in done.stdout


def test_an_engine_image_newer_than_the_evidence_is_stale(tmp_path: Path) -> None:
    results = _seat(tmp_path, "0.31.0", "vllm/vllm-openai:v0.31.0")
    same = _compose(
        tmp_path, ["--model", "synthetic", "--speculative-config", K2], "vllm/vllm-openai:v0.31.0"
    )
    assert (
        _gate(str(results), "--proposed", "k=2", "--serve-config", str(same), "--service", "seat").returncode
        == 0
    )
    newer = _compose(
        tmp_path, ["--model", "synthetic", "--speculative-config", K2], "vllm/vllm-openai:v0.32.0"
    )
    done = _gate(str(results), "--proposed", "k=2", "--serve-config", str(newer), "--service", "seat")
    assert done.returncode == 1 and "image tag: evidence vllm/vllm-openai:v0.31.0 vs proposed" in done.stdout
    floating = _compose(
        tmp_path, ["--model", "synthetic", "--speculative-config", K2], "vllm/vllm-openai:latest"
    )
    done = _gate(str(results), "--serve-config", str(floating), "--service", "seat")
    assert done.returncode == 1 and "names no engine version" in done.stdout


def test_a_plain_argv_file_and_the_step_summary(tmp_path: Path) -> None:
    argv = tmp_path / "serve.argv"
    argv.write_text("vllm serve synthetic \\\n  --speculative-config '" + K2 + "'\n")
    summary = tmp_path / "summary.md"
    done = _gate(
        str(WIN), "--proposed", "k=2", "--serve-config", str(argv), env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert done.returncode == 0, done.stdout
    assert summary.read_text().startswith("### mtpverdict gate: k=2 supported")


# ---- issue 16 item 1: the gate checks what will actually be deployed ---------------------------------


def test_a_compose_asking_for_k3_refuses_a_proposed_k2(tmp_path: Path) -> None:
    compose = _compose(tmp_path, ["--model", "synthetic", "--speculative-config", K3])
    done = _gate(str(WIN), "--proposed", "k=2", "--serve-config", str(compose), "--service", "seat")
    assert done.returncode == 1, done.stdout
    assert "--proposed k=2 but" in done.stdout and "asks for mtp k=3" in done.stdout


def test_proposed_is_read_from_the_serve_config_in_every_form(tmp_path: Path) -> None:
    forms: list[list[str] | str] = [
        ["--model", "synthetic", "--speculative-config", K2],
        ["--model", "synthetic", f"--speculative-config={K2}"],
        f"--model synthetic --speculative-config '{K2}'",
        f"--model synthetic --speculative-config='{K2}'",
        "--model synthetic --speculative_config.method mtp --speculative_config.num_speculative_tokens 2",
    ]
    seat = _seat(tmp_path)
    for i, command in enumerate(forms):
        compose = _compose(tmp_path, command, name=f"compose{i}.yaml")
        done = _gate(str(seat), "--serve-config", str(compose), "--service", "seat")
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        assert "mtp k=2: supported" in done.stdout


def test_a_serve_config_speculation_cannot_be_read_from_is_refused_with_the_reason(tmp_path: Path) -> None:
    compose = _compose(tmp_path, '--model synthetic --speculative-config \'{"method": "mtp"}\'')
    done = _gate(str(WIN), "--serve-config", str(compose), "--service", "seat")
    assert done.returncode == 1
    assert "num_speculative_tokens must be an integer" in done.stdout


def test_without_proposed_or_a_serve_config_is_bad_input() -> None:
    done = _gate(str(WIN))
    assert done.returncode == 2 and "--proposed" in done.stderr and "Traceback" not in done.stderr


# ---- issue 16 item 3: refusals say why --------------------------------------------------------------


def test_a_refusal_cites_the_proposed_arms_own_failing_rules(tmp_path: Path) -> None:
    results = _server_died(tmp_path)
    done = _gate(str(results), "--proposed", "k=3")
    assert done.returncode == 1
    assert "k3 (mtp k=3): rejected" in done.stdout
    assert "boot_ok (veto, fail): k3: 1 of 3 boots failed (server exited" in done.stdout


def test_a_configuration_never_measured_has_no_evidence(tmp_path: Path) -> None:
    done = _gate(str(WIN), "--proposed", "k=5")
    assert done.returncode == 1
    assert "no evidence for this configuration" in done.stdout
    ngram = _compose(tmp_path, ["--model", "synthetic", "--speculative-config", K2.replace("mtp", "ngram")])
    done = _gate(str(WIN), "--serve-config", str(ngram), "--service", "seat")
    assert done.returncode == 1 and "no evidence for this configuration" in done.stdout
    drafted = _compose(
        tmp_path,
        ["--model", "synthetic", "--speculative-config", K2.replace("}", ',"model":"x"}')],
        name="drafted.yaml",
    )
    done = _gate(str(WIN), "--serve-config", str(drafted), "--service", "seat")
    assert done.returncode == 1 and 'model: evidence (absent) vs proposed "x"' in done.stdout


def test_bad_input_is_written_to_the_step_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    done = _gate(str(WIN), "--proposed", "fast", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 2
    text = summary.read_text()
    assert text.startswith("### mtpverdict gate: bad input") and "write off, k=N" in text


def test_ci_outputs_are_written(tmp_path: Path) -> None:
    output = tmp_path / "output"
    done = _gate(str(WIN), "--proposed", "k=2", env={"GITHUB_OUTPUT": str(output)})
    assert done.returncode == 0
    lines = output.read_text().splitlines()
    assert lines == ["supported=true", "decision=promote", "selected=k2", "spec=mtp k=2"]


# ---- issue 15 items 6-8: hostile serve configs are refused, fast, with the limit named -------------------


def test_a_symlink_to_dev_zero_is_refused_without_reading_it(tmp_path: Path) -> None:
    link = tmp_path / "compose.yaml"
    link.symlink_to("/dev/zero")
    done = _gate_guarded(str(WIN), "--proposed", "k=2", "--serve-config", str(link))
    assert done.returncode == 2, done.stderr[-400:]
    assert "is a character device, not a regular file" in done.stderr and "1048576 bytes" in done.stderr


def test_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "compose.yaml"
    os.mkfifo(fifo)
    done = _gate_guarded(str(WIN), "--proposed", "k=2", "--serve-config", str(fifo))
    assert done.returncode == 2 and "is a FIFO, not a regular file" in done.stderr


def test_an_oversized_serve_config_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "serve.argv"
    big.write_text("--model synthetic " + "#" * (2 << 20) + "\n")
    done = _gate_guarded(str(WIN), "--proposed", "k=2", "--serve-config", str(big))
    assert done.returncode == 2 and "at most 1048576 bytes" in done.stderr


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]']
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 20)]
    lines += ["services:", "  seat:", "    command: [--model, synthetic, *a19]"]
    bomb = tmp_path / "compose.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    done = _gate_guarded(str(WIN), "--proposed", "k=2", "--serve-config", str(bomb), "--service", "seat")
    assert done.returncode == 2, done.stderr[-400:]
    # with Compose to resolve it, anchors are allowed but their expansion is bounded; without, refused
    assert (
        "its aliases expand to more than 100,000 YAML nodes" in done.stderr
        or "compose.yaml:1: a YAML anchor (&name)" in done.stderr
    ), done.stderr


@pytest.mark.parametrize("levels", [40, 60_000])  # 60,000: within the 128 KiB a compose file may be
@pytest.mark.slow
def test_deep_nesting_is_refused(tmp_path: Path, levels: int) -> None:
    deep = tmp_path / "compose.yaml"
    deep.write_text("services:\n  seat:\n    command: " + "[" * levels + "]" * levels + "\n")
    done = _gate_guarded(str(WIN), "--proposed", "k=2", "--serve-config", str(deep), "--service", "seat")
    assert done.returncode == 2, done.stderr[-400:]
    assert "Traceback" not in done.stderr
    # ours at 32 levels; libyaml's own limit (1000) can stop a deeper document while it scans ahead
    assert "nested deeper than 32 levels" in done.stderr or "maximum nesting depth" in done.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--proposed", "fast"], "write off, k=N"),
        (["--proposed", "k=2", "--serve-config", "/nonexistent.yaml"], "cannot be read"),
        (["--proposed", "k=2", "--rules", "nope"], "no such shipped policy"),
    ],
)
def test_bad_input_exits_2(args: list[str], fragment: str) -> None:
    done = _gate(str(WIN), *args)
    assert done.returncode == 2 and fragment in done.stderr and "Traceback" not in done.stderr


def test_compose_with_several_services_needs_one_named(tmp_path: Path) -> None:
    compose = _compose(tmp_path, ["--model", "synthetic"])
    done = _gate(str(WIN), "--proposed", "k=2", "--serve-config", str(compose))
    assert done.returncode == 2 and "pass --service" in done.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("services:\n  seat: [unclosed\n")
    assert _gate(str(WIN), "--proposed", "k=2", "--serve-config", str(bad)).returncode == 2


def test_argv_normalisation() -> None:
    evidence = [
        "/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "m",
        "--max_num_seqs=8",
        "--enforce-eager",
        "--speculative-config",
        K2,
        "--port",
        "8000",
    ]
    proposed = ["--model", "m", "--max-num-seqs", "8", "--enforce-eager", "--port", "9000"]
    assert argv_differences(evidence, proposed) == []
    assert argv_differences(evidence, [*proposed, "--gpu-memory-utilization", "0.95"]) == [
        "--gpu-memory-utilization: evidence (absent) vs proposed 0.95"
    ]
    assert image_version("vllm/vllm-openai:v0.32.0") == "0.32.0"
    assert image_version("registry:5000/vllm") is None
    assert json.loads(K2)["num_speculative_tokens"] == 2


def _arm(
    name: str,
    method: str | None = None,
    k: int | None = None,
    argv: tuple[str, ...] = (),
    failing: tuple[FailingRule, ...] = (),
) -> ArmEvidence:
    control = method is None
    verdict = "control" if control else ("rejected" if failing else "eligible")
    return ArmEvidence(
        name, control, method, k, verdict, failing, argv, argv, (ENGINE,), (ENGINE,), (argv,), IMAGE
    )


def test_the_gate_over_typed_evidence() -> None:
    a, b = ("--model", "a"), ("--model", "b")
    slower = FailingRule("faster_than_off", "veto", "fail", "b_k2: slower than off")
    evidence = GateEvidence(
        decision="keep_mtp_disabled",
        selected=None,
        reasons=("keep speculation disabled under policy p",),
        arms=(
            _arm("a_off", argv=a),
            _arm("b_off", argv=b),
            _arm("b_k2", "mtp", 2, (*b, "--speculative-config", K2), (slower,)),
        ),
        engine_version=None,
    )
    off = evaluate(evidence, None, ServeConfig(b, "vllm/vllm-openai:v0.32.0", "b.argv"))
    assert off.supported, off.reasons  # freshness against the control this deployment is: b_off
    assert "b.argv matches the serve arguments b_off was collected with" in off.reasons[-1]
    k2 = evaluate(evidence, None, ServeConfig((*b, "--speculative-config", K2), None, "b.argv"))
    assert not k2.supported and k2.spec == "mtp k=2"
    assert "  faster_than_off (veto, fail): b_k2: slower than off" in k2.reasons
    assert k2.reasons[-1] == "decision reason: keep speculation disabled under policy p"


def test_a_summary_that_cannot_be_written_is_bad_input(tmp_path: Path) -> None:
    done = _gate(str(WIN), "--proposed", "k=2", env={"GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "summary")})
    assert done.returncode == 2 and "cannot be written" in done.stderr and "Traceback" not in done.stderr


def test_text_from_a_serve_config_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    compose = _compose(tmp_path, ["--model", "synthetic", "--spec-\x1b[2J\nk=2: supported", "1"])
    done = _gate(str(WIN), "--serve-config", str(compose), "--service", "seat")
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "--spec-\\x1b[2J\\nk: an unknown speculative flag" in done.stdout
    assert done.stdout.startswith(f"{compose} service seat: refused")
    assert not any(line.startswith("k=2: supported") for line in done.stdout.splitlines())


@pytest.mark.parametrize(
    ("evidence", "proposed", "named"),
    [
        # flags before the first long flag are settings, not the program
        (["--model", "m"], ["-tp", "8", "-q", "gptq", "--model", "m"], "-tp"),
        # llama-server's short flags: another model file, no layers offloaded
        (
            ["/opt/llama/bin/llama-server", "-m", "a.gguf", "-ngl", "99", "--port", "1"],
            ["llama-server", "-m", "b.gguf", "-ngl", "99", "--port", "2"],
            "-m",
        ),
        (["vllm", "serve", "m", "-tp", "2"], ["vllm", "serve", "m", "-tp", "8"], "--tensor-parallel-size"),
        # the image's entrypoint is `vllm serve`: the command opens with the model
        (["ModelA", "--dtype", "bf16"], ["ModelB", "--dtype", "bf16"], "--model"),
    ],
)
def test_settings_before_the_first_long_flag_are_compared(
    evidence: list[str], proposed: list[str], named: str
) -> None:
    found = argv_differences(evidence, proposed)
    assert any(d.startswith(f"{named}:") for d in found), found


def test_the_program_part_is_not_a_setting() -> None:
    """The interpreter, its -m module and the executable's path differ between machines."""
    python = ["/venv/bin/python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
    assert argv_differences(python, ["vllm", "serve", "m"]) == []
    assert argv_differences(python, ["m"]) == []  # the image's `vllm serve` entrypoint
    assert argv_differences(["/x/llama-server", "-m", "a.gguf"], ["llama-server", "-m", "a.gguf"]) == []


def test_a_compose_service_without_an_image_runs_an_unknown_engine_version(tmp_path: Path) -> None:
    """A service that builds its image (or names none) is as unpinned as a floating tag."""
    from mtpverdict.serveconfig import read_serve_config

    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  seat:\n    build: ./vllm-nightly\n    command: "
        + json.dumps(["--model", "m", "--speculative-config", K2])
        + "\n"
    )
    config = read_serve_config(compose)
    assert config.image is None and config.unpinned is not None and "build" in config.unpinned
    arm = ArmEvidence(
        "k2", False, "mtp", 2, "eligible", (), None, ("--model", "m", "--speculative-config", K2), ("0.32.0",)
    )
    evidence = GateEvidence("promote", "k2", ("why",), (arm,), None)
    assert any("engine version it runs is unknown" in r for r in check_fresh(arm, evidence, config))


def test_a_provisional_decision_is_refused_unless_the_policy_accepts_it() -> None:
    arm = ArmEvidence("k2", False, "mtp", 2, "eligible", (), None, ("--model", "m"), ())
    firm = GateEvidence("promote", "k2", ("why",), (arm,), None)
    assert evaluate(firm, parse_spec("k=2"), None).supported
    shaky = GateEvidence("promote", "k2", ("why",), (arm,), None, provisional=True)
    refused = evaluate(shaky, parse_spec("k=2"), None)
    assert not refused.supported
    assert any(r.startswith("the decision is provisional") for r in refused.reasons), refused.reasons
    accepted = GateEvidence(
        "promote", "k2", ("why",), (arm,), None, provisional=True, accept_provisional=True
    )
    found = evaluate(accepted, parse_spec("k=2"), None)
    assert found.supported and any("provisional" in r for r in found.reasons), found.reasons
    control = ArmEvidence("off_A", True, None, None, "control", (), None, ("--model", "m"), ())
    keep = GateEvidence("keep_mtp_disabled", None, ("why",), (control, arm), None, provisional=True)
    off = evaluate(keep, parse_spec("off"), None)  # the configuration every campaign starts from
    assert off.supported and any("keeping speculation off is not refused" in r for r in off.reasons)


@pytest.mark.parametrize(
    "evidence",
    [
        ["taskset", "-c", "0-7", "/v/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
        [
            "nice",
            "-n",
            "10",
            "/v/bin/python3.13t",
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "m",
        ],
        ["/opt/vllm/bin/vllm", "serve", "m"],
    ],
)
def test_a_wrapper_or_an_interpreter_build_is_part_of_the_program(evidence: list[str]) -> None:
    assert argv_differences(evidence, ["--model", "m"]) == []


def test_llama_server_builds_and_windows_paths_are_the_program() -> None:
    for program in ("/b/llama-server-cuda", "C:\\llama\\llama-server.exe", "nice"):
        argv = [program, "-m", "a.gguf"] if program != "nice" else ["nice", "llama-server", "-m", "a.gguf"]
        assert argv_differences(argv, ["llama-server", "-m", "a.gguf"]) == [], program


def test_the_last_spelling_of_a_flag_is_the_one_the_engine_runs() -> None:
    from mtpverdict.gate import context_limit

    assert context_limit(["llama-server", "--ctx-size", "4096", "-c", "65536"]) == ("-c", 65536)
    config = ServeConfig(
        (
            "--model",
            "synthetic",
            "-dp",
            "1",
            "--data-parallel-size",
            "2",
            "--speculative-config",
            json.dumps(
                {
                    "method": "mtp",
                    "num_speculative_tokens": 2,
                    "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 64, 0]],
                }
            ),
        ),
        None,
        "s.argv",
    )
    from mtpverdict.gate import data_parallel_refusal, resolve_proposal
    from mtpverdict.serveconfig import spec_of

    proposal = resolve_proposal(None, spec_of(config), "s.argv")
    assert not isinstance(proposal, list)
    assert data_parallel_refusal(proposal, config) is not None


def test_a_service_with_an_image_it_builds_is_unpinned(tmp_path: Path) -> None:
    from mtpverdict.serveconfig import read_serve_config

    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  seat:\n    image: vllm/vllm-openai:v0.32.0\n    build: ./patched\n    command: "
        + json.dumps(["--model", "m"])
        + "\n"
    )
    assert read_serve_config(compose).unpinned is not None


def test_a_config_without_an_image_says_its_engine_version_is_not_checked() -> None:
    arm = ArmEvidence(
        "k2", False, "mtp", 2, "eligible", (), None, ("--model", "m", "--speculative-config", K2), ("0.32.0",)
    )
    evidence = GateEvidence("promote", "k2", ("why",), (arm,), None)
    line = (
        "/opt/vllm-0.40/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "m",
        "--speculative-config",
        K2,
    )
    found = evaluate(evidence, None, ServeConfig(line, None, "s.argv"))
    assert found.supported and any("engine version is not checked" in r for r in found.reasons), found.reasons


def test_off_ranges_of_a_schedule_are_checked_against_the_control_this_deployment_is() -> None:
    from mtpverdict.formats.decision import Schedule, ScheduleRange

    spec = json.dumps(
        {
            "method": "mtp",
            "num_speculative_tokens": 2,
            "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 64, 0]],
        }
    )
    mine = ("--model", "m")
    other = ArmEvidence("off_other", True, None, None, "control", (), None, (*mine, "--device", "xpu"), ())
    off = ArmEvidence("off_A", True, None, None, "control", (), None, mine, ())
    k2 = ArmEvidence("k2", False, "mtp", 2, "eligible", (), None, (*mine, "--speculative-config", K2), ())
    schedule = Schedule(
        family="default",
        metric="decode_tps",
        baseline=None,
        method="mtp",
        ranges=(ScheduleRange(1, 2, 2, "k2", (), ("r",)), ScheduleRange(3, 1024, 0, None, (), ("r",))),
        rule="stated",
        speculative_config=None,
        note=None,
    )
    evidence = GateEvidence("promote", None, ("why",), (other, off, k2), None, schedule)
    found = evaluate(evidence, None, ServeConfig((*mine, "--speculative-config", spec), None, "s.argv"))
    assert found.supported, found.reasons


def test_vllms_short_flags_are_the_settings_they_stand_for() -> None:
    """`-tp 2` and `--tensor-parallel-size 2` are one setting to vLLM (engine/arg_utils.py): not stale;
    other engines' short flags are not read as vLLM's (llama.cpp's -n is --n-predict, not --nnodes)."""
    short = ["vllm", "serve", "m", "-tp", "2", "-q", "fp8"]
    assert (
        argv_differences(short, ["vllm", "serve", "m", "--tensor-parallel-size=2", "--quantization", "fp8"])
        == []
    )
    python = ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "-tp", "2"]
    assert argv_differences(python, ["vllm", "serve", "m", "--tensor-parallel-size", "2"]) == []
    changed = argv_differences(short, ["vllm", "serve", "m", "--tensor-parallel-size", "8", "-q", "fp8"])
    assert changed == ["--tensor-parallel-size: evidence 2 vs proposed 8"]
    image = "vllm/vllm-openai:v0.32.0"  # its entrypoint is `vllm serve`: the command opens with the model
    assert argv_differences(short, ["m", "--tensor-parallel-size", "2", "-q", "fp8"], image=image) == []
    assert argv_differences(["m", "-tp", "2"], ["m", "-tp", "2"], image=image) == []  # both sides alike
    path = ["/opt/vllm/bin/llama-server", "-m", "a.gguf", "-n", "2"]  # vllm in a directory name only
    assert len(argv_differences(path, ["llama-server", "-m", "a.gguf", "--nnodes", "2"])) == 2
    llama = argv_differences(
        ["llama-server", "-m", "a.gguf", "-n", "2"], ["llama-server", "-m", "a.gguf", "--nnodes", "2"]
    )
    assert len(llama) == 2
