"""Review of issue 30 (wave4-rev30): failing tests for promises the compose route breaks.

Each test states the promise and fails on wave4-deploy as merged; see the review report.
"""

from __future__ import annotations

import csv
from pathlib import Path

from mtpverdict.compose import ComposeOptions, Resolver, resolve_service
from mtpverdict.compose.derive import base_service
from mtpverdict.compose.docker import docker_run_argv


def _resolve(tmp_path: Path, resolver: Resolver, text: str):  # noqa: ANN202
    (tmp_path / "compose.yaml").write_text(text)
    return resolve_service(str(tmp_path / "compose.yaml"), "seat", ComposeOptions(), resolver)


def test_gpu_capabilities_beyond_gpu_give_a_gpus_value_docker_parses(
    tmp_path: Path, resolver: Resolver
) -> None:
    """docker's --gpus value is CSV: capabilities=compute,utility unquoted splits into a field
    `utility` docker reads as a count ("invalid count (utility)", exit 125 from docker 28.2.2)."""
    resolved = _resolve(
        tmp_path,
        resolver,
        "services:\n  seat:\n    image: i:1.0\n    command: [m]\n    deploy:\n      resources:\n"
        "        reservations:\n          devices:\n            - driver: nvidia\n              count: all\n"
        "              capabilities: [gpu, compute, utility]\n",
    )
    argv = docker_run_argv(resolved.service_dict, base_service(resolved).argv, name="n")
    (value,) = [a.removeprefix("--gpus=") for a in argv if a.startswith("--gpus=")]
    fields = next(csv.reader([value]))
    bare = [f for f in fields if "=" not in f]
    assert all(f == "all" or f.isdigit() for f in bare), (value, fields)


def test_a_literal_dollar_in_the_environment_reaches_the_container_as_compose_gives_it(
    tmp_path: Path, resolver: Resolver
) -> None:
    """Compose's config output writes `$` as `$$`; `docker compose up` gives the container `x$y`."""
    resolved = _resolve(
        tmp_path,
        resolver,
        'services:\n  seat:\n    image: i:1.0\n    command: [m]\n    environment:\n      PRICE: "x$$y"\n',
    )
    argv = docker_run_argv(resolved.service_dict, base_service(resolved).argv, name="n")
    assert "--env=PRICE=x$y" in argv, argv
