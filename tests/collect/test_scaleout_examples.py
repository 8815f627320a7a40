"""examples/ for Kubernetes (Indexed Job) and Slurm (job array), rendered, parsed and run here.

Each example's script runs as the scheduler would run it (JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID
set, the mounts pointed at a temporary directory) with the real `mtpverdict` against the fake server:
the Kubernetes pod collects shard 1, the Slurm task shard 0, and the merge Job's command joins them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mtpverdict.formats.results_io import load_results

from .conftest import devices_campaign_text, free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PLACEHOLDER = re.compile(r"\{\{ (\w+) \}\}")
SHARDS = 2


def render(text: str, values: dict[str, str]) -> str:
    """Fill every {{ name }}; fail on a name not given or a value never used."""
    used = set(PLACEHOLDER.findall(text))
    assert used <= set(values), f"not filled: {sorted(used - set(values))}"
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def _values(results: Path, campaign: Path) -> dict[str, str]:
    return {
        "name": "mtp-depths",
        "image": "registry.example/mtpverdict:1",
        "campaign_configmap": "mtp-depths-campaign",
        "results_claim": "mtp-depths-results",
        "shards": str(SHARDS),
        "last_index": str(SHARDS - 1),
        "gpus": "1",
        "campaign": str(campaign),
        "results": str(results),
    }


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


def test_the_examples_render_and_parse(tmp_path: Path) -> None:
    values = _values(tmp_path / "results", tmp_path / "campaign.toml")
    job = yaml.safe_load(render((EXAMPLES / "k8s-indexed-job.yaml").read_text(), values))
    assert (job["kind"], job["spec"]["completionMode"]) == ("Job", "Indexed")
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == SHARDS
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert '--shard "${JOB_COMPLETION_INDEX}/2"' in _script(job, "collect")
    merge = yaml.safe_load(render((EXAMPLES / "k8s-merge-job.yaml").read_text(), values))
    assert merge["metadata"]["name"] == "mtp-depths-merge"
    assert _script(merge, "merge").startswith("exec mtpverdict merge /results/shard-*")
    for script in (_script(job, "collect"), _script(merge, "merge")):
        assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0
    batch = render((EXAMPLES / "slurm-array.sbatch").read_text(), values)
    assert "#SBATCH --array=0-1" in batch and '--shard "${SLURM_ARRAY_TASK_ID}/2"' in batch
    path = tmp_path / "array.sbatch"
    path.write_text(batch)
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0


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
    values = _values(results, campaign)
    job = yaml.safe_load(render((EXAMPLES / "k8s-indexed-job.yaml").read_text(), values))
    pod = (
        _script(job, "collect")
        .replace("/campaign/campaign.toml", str(campaign))
        .replace("/results", str(results))
    )
    done = subprocess.run(
        ["sh", "-c", pod],
        env={**env, "JOB_COMPLETION_INDEX": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    array = tmp_path / "array.sbatch"
    array.write_text(render((EXAMPLES / "slurm-array.sbatch").read_text(), values))
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
    merge = yaml.safe_load(render((EXAMPLES / "k8s-merge-job.yaml").read_text(), values))
    command = _script(merge, "merge").replace("/results", str(results))
    done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "2 of 2 shards merged" in done.stdout, done.stderr
    boots = load_results(results / "merged").boots
    assert boots.groupby("device").size().to_dict() == {"d0": 4, "d1": 4}
    assert set(boots["status"]) == {"ready"}
    shutil.rmtree(results)
