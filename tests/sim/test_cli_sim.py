"""The `simulate` and `plan` commands on an application built for the test."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..conftest import run_cli


def _run(*args: str) -> tuple[int, str, str]:
    result = run_cli(*args)
    return result.returncode, result.stdout, result.stderr


def _validate(path: Path) -> str:
    result = run_cli("validate", path)
    assert result.returncode == 0, result.output
    return result.stdout


def test_simulate_from_options_writes_a_valid_synthetic_campaign(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    code, stdout, err = _run(
        "simulate",
        str(out),
        "--arm",
        "off_A",
        "--arm",
        "k1:1:5%",
        "--arm",
        "k2:2:+10%",
        "--arm",
        "off_B",
        "--void-arm",
        "k1",
        "--boots",
        "2",
        "--reps",
        "2",
        "--concurrency",
        "1,4",
        "--seed",
        "7",
    )
    assert code == 0, err
    assert stdout.startswith(f"{out}: SYNTHETIC campaign synthetic-simulated: 4 arms x 2 boot(s)")
    shown = _validate(out)
    assert "synthetic: these records were generated, not measured" in shown
    campaign = json.loads((out / "campaign.json").read_text())
    assert campaign["synthetic"] is True and campaign["format"] == "mtpverdict.results/1"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    k1 = [r for r in records if r["kind"] == "acceptance" and r["arm"] == "k1"]
    assert k1 and all(r["accepted_tokens"] == 0 for r in k1)  # the void arm accepts nothing
    assert {r["boot"] for r in records if r["kind"] == "boot"} == {1, 2}
    # the same seed gives the same bytes
    again = tmp_path / "again"
    args = ["simulate", str(again), "--arm", "off_A", "--arm", "k1:1:5%", "--arm", "k2:2:+10%"]
    args += ["--arm", "off_B", "--void-arm", "k1", "--boots", "2", "--reps", "2", "--concurrency", "1,4"]
    assert _run(*args, "--seed", "7")[0] == 0
    assert (again / "records.jsonl").read_bytes() == (out / "records.jsonl").read_bytes()


def test_simulate_from_toml_with_options_overriding(tmp_path: Path) -> None:
    config = tmp_path / "sim.toml"
    config.write_text(
        """name = "drifting"
boots = 1
reps = 2
concurrency = [1, 2]
drift = 0.1
seed = 3

[[arms]]
name = "off_A"

[[arms]]
name = "k3"
k = 3
effect = "8%"
acceptance = 0.8

[[arms]]
name = "off_B"
"""
    )
    out = tmp_path / "sim"
    code, stdout, err = _run("simulate", str(out), "--config", str(config), "--boots", "2")
    assert code == 0, err
    assert "synthetic-drifting: 3 arms x 2 boot(s)" in stdout and "(seed 3)" in stdout
    _validate(out)
    decision = run_cli("decide", out, "-q", "--out", tmp_path / "d.json")
    assert decision.returncode == 0, decision.output


def test_simulate_bad_input_is_one_line_per_problem_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(
        'boots = 0\ncolour = "red"\n[[arms]]\nname = "k1"\nk = 1\neffect = "fast"\n'
        '[[arms]]\nname = "k2"\nk = 2\n'
    )
    code, stdout, err = _run("simulate", str(tmp_path / "o"), "--config", str(config))
    assert code == 2 and stdout == ""
    lines = err.splitlines()
    assert all(line.startswith(f"Error: {config}: ") for line in lines)
    assert any("colour: unknown key" in line for line in lines)
    assert any("boots: must be >= 1, got 0" in line for line in lines)  # formats/_check's wording
    assert any("arms[0].effect: 'fast' is not an effect" in line for line in lines)
    assert any("no control arm" in line for line in lines)
    assert not (tmp_path / "o").exists()
    code, _, err = _run("simulate", str(tmp_path / "o"), "--arm", "k1:one")
    assert code == 2 and err == "Error: --arm 'k1:one': K must be a whole number of speculative tokens\n"
    code, _, err = _run("simulate", str(tmp_path / "o"), "--config", str(tmp_path / "absent.toml"))
    assert code == 2 and err == f"Error: {tmp_path / 'absent.toml'}: not found\n"


def test_simulate_refuses_to_overwrite_a_campaign(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    assert _run("simulate", str(out), "--boots", "1", "--reps", "2")[0] == 0
    before = (out / "records.jsonl").read_bytes()
    code, _, err = _run("simulate", str(out), "--seed", "9")
    assert code == 2 and err.startswith(f"Error: {out / 'campaign.json'}: exists")
    assert (out / "records.jsonl").read_bytes() == before


def test_plan_from_a_pilot(tmp_path: Path) -> None:
    pilot = tmp_path / "pilot"
    assert _run("simulate", str(pilot), "--boots", "3", "--reps", "3", "--concurrency", "1,4")[0] == 0
    code, stdout, err = _run("plan", "--pilot", str(pilot), "--effect", "5%")
    assert code == 0, err
    assert "pilot, mixedlm REML (boot random intercept), 11 df" in stdout
    assert "3 depth(s) + 2 control arm(s)" in stdout and "every one of 2 cell(s)" in stdout
    assert re.search(r"cost: \d+ s per boot, \d+\.\d s per run \(pilot: 15 boot\(s\), 90 run\(s\)\)", stdout)
    assert "\nplan: " in stdout and "of accelerator time" in stdout


def test_plan_from_stated_noise() -> None:
    code, stdout, err = _run("plan", "--effect", "0.05", "--boot-sd", "2%", "--run-sd", "0.01")
    assert code == 0, err
    assert "boot-to-boot sd 2.00%, run-to-run sd 1.00% (stated)" in stdout
    assert "plan: " in stdout and "accelerator time" not in stdout


def test_plan_refuses_a_one_boot_pilot_without_a_boot_sd(tmp_path: Path) -> None:
    pilot = tmp_path / "pilot"
    assert _run("simulate", str(pilot), "--boots", "1", "--reps", "3")[0] == 0
    code, stdout, err = _run("plan", "--pilot", str(pilot), "--effect", "5%")
    assert code == 2 and stdout == ""
    assert err.startswith(f"Error: {pilot}: every arm was booted once") and err.count("\n") == 1
    assert "--boot-sd" in err
    code, stdout, err = _run("plan", "--pilot", str(pilot), "--effect", "5%", "--boot-sd", "2%")
    assert code == 0, err
    assert "boot sd stated; run sd from runs inside each boot and cell" in stdout


def test_plan_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    for args, fragment in (
        (["--effect", "0"], "--effect must be a positive relative effect"),
        (["--effect", "lots", "--boot-sd", "2%"], "--effect: 'lots' is not an effect"),
        (["--effect", "5%", "--boot-sd", "-1%"], "--boot-sd must be a finite, non-negative"),
        (["--effect", "5%", "--boot-sd", "2%", "--power", "1.5"], "--power must be between 0 and 1"),
        (["--effect", "5%"], "give --pilot RESULTS, or the noise as --boot-sd"),
        (["--effect", "5%", "--pilot", str(tmp_path / "none")], "not a directory"),
        (["--effect", "5%", "--boot-sd", "2%", "--depths", "0"], "--depths must be 1 or more"),
    ):
        code, stdout, err = _run("plan", *args)
        assert code == 2, args
        assert stdout == "" and err.startswith("Error: ") and err.count("\n") == 1, err
        assert fragment in err, (fragment, err)


def test_every_command_has_help() -> None:
    for args in (["simulate", "--help"], ["plan", "--help"]):
        code, out, _ = _run(*args)
        assert code == 0 and "Usage" in out


def test_simulate_engine_version_is_recorded_by_every_boot_and_satisfies_the_gate(tmp_path: Path) -> None:
    out = tmp_path / "seat"
    args = ["simulate", str(out), "--arm", "off_A", "--arm", "k2:2:20%", "--arm", "off_B", "--boots", "3"]
    code, _, err = _run(*args, "--engine-version", "0.32.0", "--image", "vllm/vllm-openai:v0.32.0")
    assert code == 0, err
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r["engine_version"] for r in records if r["kind"] == "boot"} == {"0.32.0"}
    scope = json.loads((out / "campaign.json").read_text())["scope"]
    assert scope["engine_version"] == "vllm/vllm-openai:v0.32.0"  # the image, where the gate reads it
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  seat:\n    image: vllm/vllm-openai:v0.32.0\n    command: [--model, synthetic,"
        ' --speculative-config, \'{"method":"mtp","num_speculative_tokens":2}\']\n'
    )
    code, stdout, err = _run("gate", str(out), "--serve-config", str(compose))
    assert code == 0, stdout + err
    assert "evidence is fresh" in stdout


def test_simulate_engine_version_defaults_to_simulated_and_must_not_be_empty(tmp_path: Path) -> None:
    assert _run("simulate", str(tmp_path / "a"))[0] == 0
    records = [json.loads(line) for line in (tmp_path / "a" / "records.jsonl").read_text().splitlines()]
    assert {r["engine_version"] for r in records if r["kind"] == "boot"} == {"simulated"}
    code, _, err = _run("simulate", str(tmp_path / "b"), "--engine-version", "")
    assert code == 2 and "engine_version" in err and not (tmp_path / "b").exists()


def test_simulate_refuses_an_arm_effect_without_its_unit(tmp_path: Path) -> None:
    done = run_cli("simulate", tmp_path / "s", "--arm", "off_A", "--arm", "k1:1:5")
    assert done.returncode == 2, done.output
    assert "5 means +500%" in done.output and not (tmp_path / "s").exists()
