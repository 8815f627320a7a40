"""examples/ for Kubernetes (Indexed Job) and Slurm (job array), read as shipped, checked and run here.

The Jobs are valid YAML and valid Kubernetes Jobs (kubernetes-validate's schema of the Job, strict:
every required field present, no unknown one), their scripts pass `sh -n`; the Slurm script passes
`bash -n` and shellcheck (when installed). Each example's script then runs as the scheduler would run
it (JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID set, the mounts pointed at a temporary directory) with
the real `mtpverdict` against the fake server: the Kubernetes pod collects shard 1, the Slurm task
shard 0, and the merge Job's command joins them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mtpverdict.formats.results_io import load_results

from .conftest import devices_campaign_text, free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SHARDS = 2  # the examples are written for a campaign over 2 devices
KUBERNETES = "1.37.0"  # the Job schema the examples are checked against (kubernetes-validate's latest)


def _job(name: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return job


def _shellcheck() -> str | None:
    local = ROOT / "ci-work" / "lint-tools" / "bin" / "shellcheck"  # .ci/lint-workflows installs it
    return shutil.which("shellcheck") or (str(local) if local.exists() else None)


def _slurm(campaign: Path, results: Path) -> str:
    """The Slurm script with its campaign and results directory set, as a user edits them."""
    text = (EXAMPLES / "slurm-array.sbatch").read_text()
    text, n = re.subn(r'^campaign="[^"]*"', f'campaign="{campaign}"', text, flags=re.M)
    text, m = re.subn(r'^results="[^"]*"', f'results="{results}"', text, flags=re.M)
    assert n == m == 1, "the Slurm script sets campaign= and results= once each"
    return text


def _script(job: dict[str, object], container: str) -> str:
    spec = job["spec"]
    assert isinstance(spec, dict)
    containers = spec["template"]["spec"]["containers"]
    args = next(c for c in containers if c["name"] == container)
    assert args["command"] == ["/bin/sh", "-c"] and len(args["args"]) == 1
    return str(args["args"][0])


def _bin(tmp: Path) -> dict[str, str]:
    """An environment whose `mtpverdict` is this checkout's."""
    bindir = tmp / "bin"
    bindir.mkdir()
    tool = bindir / "mtpverdict"
    tool.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mtpverdict "$@"\n')
    tool.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOB_", "SLURM_"))}
    env["PATH"] = f"{bindir}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    return env


@pytest.mark.parametrize("name", ["k8s-indexed-job.yaml", "k8s-merge-job.yaml"])
def test_the_kubernetes_jobs_are_valid_jobs_as_shipped(name: str) -> None:
    job = _job(name)
    assert kubernetes_validate.validate(job, KUBERNETES, strict=True)
    broken = yaml.safe_load((EXAMPLES / name).read_text())
    del broken["spec"]["template"]["spec"]["containers"][0]["name"]  # a required field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_the_examples_agree_on_the_devices_and_their_scripts_parse() -> None:
    job, merge = _job("k8s-indexed-job.yaml"), _job("k8s-merge-job.yaml")
    assert (job["kind"], job["spec"]["completionMode"]) == ("Job", "Indexed")
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == SHARDS
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {e["name"]: e["value"] for e in container["env"]}["SHARDS"] == str(SHARDS)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert '--shard "${JOB_COMPLETION_INDEX}/${SHARDS}"' in _script(job, "collect")
    assert merge["metadata"]["name"] == job["metadata"]["name"] + "-merge"
    assert merge["spec"]["template"]["spec"]["containers"][0]["image"] == container["image"]
    assert _script(merge, "merge").startswith("exec mtpverdict merge /results/shard-*")
    for script in (_script(job, "collect"), _script(merge, "merge")):
        assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0
    batch = (EXAMPLES / "slurm-array.sbatch").read_text()
    assert f"#SBATCH --array=0-{SHARDS - 1}" in batch and f"shards={SHARDS} " in batch
    assert subprocess.run(["bash", "-n", str(EXAMPLES / "slurm-array.sbatch")], check=False).returncode == 0


def test_the_scripts_pass_shellcheck() -> None:
    tool = _shellcheck()
    if tool is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck; .ci/lint-workflows has it)")
    slurm = subprocess.run([tool, str(EXAMPLES / "slurm-array.sbatch")], capture_output=True, text=True)
    assert slurm.returncode == 0, slurm.stdout
    for name, container in (("k8s-indexed-job.yaml", "collect"), ("k8s-merge-job.yaml", "merge")):
        done = subprocess.run(
            [tool, "-s", "sh", "-"], input=_script(_job(name), container), capture_output=True, text=True
        )
        assert done.returncode == 0, (name, done.stdout)


@pytest.mark.slow
def test_the_pod_and_the_array_task_run_their_shards_and_the_merge_joins_them(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    while ports[1] == ports[0]:
        ports[1] = free_port()
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(devices_campaign_text(ports, reps=1, concurrency="[1]"))
    results = tmp_path / "results"
    results.mkdir()
    env = _bin(tmp_path)
    job = _job("k8s-indexed-job.yaml")
    pod = (
        _script(job, "collect")
        .replace("/campaign/campaign.toml", str(campaign))
        .replace("/results", str(results))
    )
    done = subprocess.run(
        ["sh", "-c", pod],
        env={**env, "JOB_COMPLETION_INDEX": "1", "SHARDS": str(SHARDS)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    array = tmp_path / "array.sbatch"
    array.write_text(_slurm(campaign, results))
    done = subprocess.run(
        ["bash", str(array)],
        env={**env, "SLURM_ARRAY_TASK_ID": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    again = subprocess.run(
        ["bash", str(array)],
        env={**env, "SLURM_ARRAY_TASK_ID": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0 and "0 boots" in again.stdout  # a rerun resumes: nothing owed
    merge = _job("k8s-merge-job.yaml")
    command = _script(merge, "merge").replace("/results", str(results))
    done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "2 of 2 shards merged" in done.stdout, done.stderr
    boots = load_results(results / "merged").boots
    assert boots.groupby("device").size().to_dict() == {"d0": 4, "d1": 4}
    assert set(boots["status"]) == {"ready"}
    shutil.rmtree(results)
