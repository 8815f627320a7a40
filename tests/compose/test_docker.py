"""compose.docker: the `docker run` argv of real-world serving services, as Compose itself resolved them.

Each shape is a compose file of the kind seats deploy (vLLM, SGLang, llama.cpp and TGI images with
GPU reservations, ROCm devices, ipc: host, env files, named and bind volumes, healthchecks, ...),
resolved by the real Compose v2; the builder's argv must hold every option listed for it and end
with the image and the arm's argv. No container runtime runs here: collect's container lifecycle is
driven through a `docker` stand-in (tests/collect/test_launch_compose.py).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

from mtpverdict.compose import ComposeOptions, Resolver, resolve_service
from mtpverdict.compose.derive import base_service
from mtpverdict.compose.docker import container_name, docker_run_argv
from mtpverdict.errors import InputError

K2 = '{"method":"mtp","num_speculative_tokens":2}'
GPU_ALL = """
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
"""
# name -> (compose.yaml, other files, options the argv must hold, image and argv it must end with)
SHAPES: dict[str, tuple[str, dict[str, str], list[str], list[str]]] = {
    "vllm-gpu-reservation": (
        f"""
services:
  seat:
    image: vllm/vllm-openai:v0.32.0
    command: ["Qwen/Qwen3-8B", "--speculative-config", '{K2}', "--max-model-len", "8192"]
    ipc: host
    ports: ["8000:8000"]
    volumes: ["~/.cache/huggingface:/root/.cache/huggingface"]
    environment: {{HF_TOKEN: null}}
{GPU_ALL}""",
        {},
        ["--ipc=host", "--publish=8000:8000/tcp", "--gpus=all", "--env=HF_TOKEN"],
        ["vllm/vllm-openai:v0.32.0", "Qwen/Qwen3-8B", "--max-model-len", "8192"],
    ),
    "vllm-gpus-device-ids-shm": (
        """
services:
  seat:
    image: vllm/vllm-openai:v0.32.0
    entrypoint: ["vllm", "serve"]
    command: ["m", "--tensor-parallel-size", "2"]
    shm_size: 16gb
    gpus:
      - driver: nvidia
        device_ids: ["0", "1"]
""",
        {},
        ["--shm-size=17179869184", '--gpus="device=0,1"', "--entrypoint=vllm"],
        ["vllm/vllm-openai:v0.32.0", "serve", "m", "--tensor-parallel-size", "2"],
    ),
    "sglang-host-network-ulimits-healthcheck": (
        """
services:
  sglang:
    image: lmsysorg/sglang:v0.5.15-cu126
    entrypoint: python3 -m sglang.launch_server
    command: --model-path m --port 30000 --speculative-algorithm EAGLE --speculative-num-steps 3
    network_mode: host
    shm_size: 32g
    privileged: true
    ulimits:
      memlock: -1
      stack: 67108864
    healthcheck:
      test: ["CMD-SHELL", "curl -f http://localhost:30000/health || exit 1"]
      interval: 30s
      timeout: 10s
      retries: 3
      start_period: 5m
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["0"]
              capabilities: [gpu]
""",
        {},
        [
            "--network=host",
            "--shm-size=34359738368",
            "--privileged",
            "--ulimit=memlock=-1:-1",
            "--ulimit=stack=67108864:67108864",
            "--health-cmd=curl -f http://localhost:30000/health || exit 1",
            "--health-interval=30s",
            "--health-timeout=10s",
            "--health-retries=3",
            "--health-start-period=5m0s",
            '--gpus="device=0"',
            "--entrypoint=python3",
        ],
        [
            "lmsysorg/sglang:v0.5.15-cu126",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--port",
            "30000",
        ],
    ),
    "llamacpp-cuda-models-read-only": (
        """
services:
  llama:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda-b6500
    command: ["-m", "/models/q.gguf", "--port", "8080", "--spec-draft-n-max", "4", "-ngl", "99"]
    volumes: ["./models:/models:ro"]
    ports: ["127.0.0.1:8080:8080"]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
""",
        {"models/.keep": ""},
        ["--publish=127.0.0.1:8080:8080/tcp", "--gpus=1", "--volume={dir}/models:/models:ro"],
        [
            "ghcr.io/ggml-org/llama.cpp:server-cuda-b6500",
            "-m",
            "/models/q.gguf",
            "--port",
            "8080",
            "-ngl",
            "99",
        ],
    ),
    "rocm-devices-groups-seccomp": (
        """
services:
  seat:
    image: rocm/vllm:rocm6.4_vllm_0.32.0
    command: ["vllm", "serve", "m"]
    devices: ["/dev/kfd", "/dev/dri"]
    group_add: [video, render]
    cap_add: [SYS_PTRACE]
    security_opt: ["seccomp=unconfined"]
    ipc: host
    shm_size: 8G
""",
        {},
        [
            "--device=/dev/kfd:/dev/kfd:rwm",
            "--device=/dev/dri:/dev/dri:rwm",
            "--group-add=video",
            "--group-add=render",
            "--cap-add=SYS_PTRACE",
            "--security-opt=seccomp=unconfined",
            "--ipc=host",
            "--shm-size=8589934592",
        ],
        ["rocm/vllm:rocm6.4_vllm_0.32.0", "vllm", "serve", "m"],
    ),
    "env-file-and-override": (
        """
services:
  seat:
    image: vllm/vllm-openai:v0.32.0
    command: ["m"]
    env_file: [seat.env]
    environment:
      VLLM_LOGGING_LEVEL: DEBUG
""",
        {"seat.env": "VLLM_LOGGING_LEVEL=INFO\nHF_HUB_OFFLINE=1\n"},
        ["--env=HF_HUB_OFFLINE=1", "--env=VLLM_LOGGING_LEVEL=DEBUG"],
        ["vllm/vllm-openai:v0.32.0", "m"],
    ),
    "named-volume-tmpfs-user": (
        """
services:
  tgi:
    image: ghcr.io/huggingface/text-generation-inference:3.3.4
    command: ["--model-id", "m", "--port", "80"]
    user: "1000:1000"
    volumes:
      - hf:/data
      - type: tmpfs
        target: /scratch
        tmpfs: {size: 1000000}
    ports: ["8080:80"]
    init: true
volumes:
  hf: {}
""",
        {},
        [
            "--user=1000:1000",
            "--mount=type=volume,source={project}_hf,target=/data",
            "--mount=type=tmpfs,target=/scratch,tmpfs-size=1000000",
            "--publish=8080:80/tcp",
            "--init",
        ],
        ["ghcr.io/huggingface/text-generation-inference:3.3.4", "--model-id", "m", "--port", "80"],
    ),
    "cpu-seat-entrypoint-kv-space": (
        """
services:
  seat:
    image: vllm/vllm-openai-cpu:v0.32.0
    entrypoint: ["python3", "-P", "-m", "vllm.entrypoints.openai.api_server"]
    command: ["--model", "m", "--port", "8000", "--speculative-config", '{"method":"ngram"}']
    environment:
      VLLM_CPU_KVCACHE_SPACE: "4"
      VLLM_CPU_OMP_THREADS_BIND: "0-1"
    ports: ["8000"]
    cpuset: "0-1"
    mem_limit: 8g
""",
        {},
        [
            "--entrypoint=python3",
            "--env=VLLM_CPU_KVCACHE_SPACE=4",
            "--env=VLLM_CPU_OMP_THREADS_BIND=0-1",
            "--publish=8000/tcp",
            "--cpuset-cpus=0-1",
            "--memory=8589934592",
        ],
        ["vllm/vllm-openai-cpu:v0.32.0", "-P", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
    ),
    "extends-with-anchors": (
        """
x-gpu: &gpu
  deploy:
    resources:
      reservations:
        devices:
          - driver: nvidia
            count: 2
            capabilities: [gpu, utility]
services:
  seat:
    extends: {file: base.yaml, service: base}
    <<: *gpu
    command: ["m", "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}']
""",
        {"base.yaml": "services:\n  base:\n    image: vllm/vllm-openai:v0.32.0\n    ipc: host\n"},
        ["--ipc=host", "--gpus=count=2,capabilities=utility"],
        ["vllm/vllm-openai:v0.32.0", "m"],
    ),
    "jetson-runtime-nvidia": (
        """
services:
  thor:
    image: nvcr.io/nvidia/vllm:25.10-py3
    runtime: nvidia
    network_mode: host
    ipc: host
    command: ["vllm", "serve", "m", "--gpu-memory-utilization", "0.8"]
    volumes:
      - type: bind
        source: /tmp
        target: /host-tmp
        read_only: true
    stop_grace_period: 1m30s
    restart: unless-stopped
    container_name: thor-seat
""",
        {},
        [
            "--runtime=nvidia",
            "--network=host",
            "--mount=type=bind,source=/tmp,target=/host-tmp,readonly",
            "--stop-timeout=90",
        ],
        ["nvcr.io/nvidia/vllm:25.10-py3", "vllm", "serve", "m", "--gpu-memory-utilization", "0.8"],
    ),
    "healthcheck-cmd-labels-logging": (
        """
services:
  seat:
    image: vllm/vllm-openai:v0.32.0
    command: ["m"]
    healthcheck:
      test: ["CMD", "curl", "-f", "http://localhost:8000/health"]
      start_interval: 5s
    labels: {team: serving}
    logging:
      driver: json-file
      options: {max-size: 10m}
    extra_hosts: ["registry:10.0.0.2"]
    sysctls: {net.core.somaxconn: 1024}
""",
        {},
        [
            "--health-cmd=curl -f http://localhost:8000/health",
            "--health-start-interval=5s",
            "--label=team=serving",
            "--log-driver=json-file",
            "--log-opt=max-size=10m",
            "--add-host=registry=10.0.0.2",
            "--sysctl=net.core.somaxconn=1024",
        ],
        ["vllm/vllm-openai:v0.32.0", "m"],
    ),
    "profile-selected-service": (
        """
services:
  seat:
    image: vllm/vllm-openai:v0.32.0
    profiles: [mtp]
    command: ["m", "--num-speculative-tokens", "2"]
    healthcheck: {disable: true}
""",
        {},
        ["--no-healthcheck"],
        ["vllm/vllm-openai:v0.32.0", "m"],
    ),
}


def _project(tmp_path: Path, name: str) -> tuple[Path, list[str], list[str]]:
    text, files, options, tail = SHAPES[name]
    where = tmp_path / name
    where.mkdir()
    (where / "compose.yaml").write_text(text)
    for rel, body in files.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(body)
    filled = [o.replace("{dir}", str(where)).replace("{project}", name) for o in options]
    return where, filled, tail


def test_there_are_at_least_ten_real_shapes() -> None:
    assert len(SHAPES) >= 10


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_docker_argv_of_a_resolved_service(tmp_path: Path, resolver: Resolver, name: str) -> None:
    where, options, tail = _project(tmp_path, name)
    profiles = ("mtp",) if name == "profile-selected-service" else ()
    resolved = resolve_service(str(where / "compose.yaml"), None, ComposeOptions(profiles=profiles), resolver)
    base = base_service(resolved)
    argv = docker_run_argv(
        resolved.service_dict,
        base.argv,
        name=container_name("c", "off_A", 1),
        volume_names=dict(resolved.volume_names),
    )
    assert argv[:4] == ["docker", "run", "--rm", "--name=mtpverdict-c-off_A-boot1"]
    missing = [o for o in options if o not in argv]
    assert not missing, (missing, argv)
    image_at = argv.index(tail[0])
    assert argv[image_at : image_at + len(tail)] == tail
    assert all(a.startswith("--") for a in argv[4:image_at])  # every option before the image
    # the service's own speculation is gone; nothing of restart or container_name survives
    assert not any("speculative" in a or "spec-draft" in a for a in argv)
    assert not any(a.startswith(("--restart", "--name=thor")) for a in argv)


def test_the_arm_argv_goes_where_the_service_had_its_flags(tmp_path: Path, resolver: Resolver) -> None:
    where, _, _ = _project(tmp_path, "vllm-gpu-reservation")
    resolved = resolve_service(str(where / "compose.yaml"), None, ComposeOptions(), resolver)
    base = base_service(resolved)
    assert base.argv == ("Qwen/Qwen3-8B", "--max-model-len", "8192")
    assert base.removed == ("--speculative-config", K2)
    assert base.insert_at == 1
    assert base.entrypoint_length == 0


def test_two_services_that_differ_only_in_speculation_share_a_base_hash(
    tmp_path: Path, resolver: Resolver
) -> None:
    one = tmp_path / "one"
    two = tmp_path / "two"
    for where, args in ((one, '["m", "--speculative-config", "{}"]'), (two, '["m"]')):
        where.mkdir()
        (where / "compose.yaml").write_text(f"services:\n  s:\n    image: i:1.0\n    command: {args}\n")
    first = resolve_service(str(one / "compose.yaml"), None, ComposeOptions(), resolver)
    second = resolve_service(str(two / "compose.yaml"), None, ComposeOptions(), resolver)
    assert first.sha256 != second.sha256
    assert base_service(first).sha256 == base_service(second).sha256
    (two / "compose.yaml").write_text(
        'services:\n  s:\n    image: i:1.0\n    command: ["m", "--seed", "1"]\n'
    )
    third = resolve_service(str(two / "compose.yaml"), None, ComposeOptions(), resolver)
    assert base_service(third).sha256 != base_service(first).sha256


def test_the_definitions_of_the_volumes_a_service_uses_are_in_its_hash(
    tmp_path: Path, resolver: Resolver
) -> None:
    """A named volume's driver_opts (top-level volumes:) choose the host directory the model comes
    from: another device hashes otherwise; the same one in another project directory hashes alike."""
    service = "services:\n  seat:\n    image: i:1.0\n    command: [m]\n    volumes: [models:/models]\n"
    top = "volumes:\n  models:\n    driver: local\n    driver_opts: {type: none, o: bind, device: /data/%s}\n"
    hashes = []
    for where, device in (("one", "models-v1"), ("two", "models-v2"), ("three", "models-v1")):
        (tmp_path / where).mkdir()
        (tmp_path / where / "compose.yaml").write_text(service + top % device)
        resolved = resolve_service(str(tmp_path / where / "compose.yaml"), "seat", ComposeOptions(), resolver)
        hashes.append((resolved.sha256, base_service(resolved).sha256))
    assert hashes[0][0] != hashes[1][0] and hashes[0][1] != hashes[1][1]
    assert hashes[0] == hashes[2]


@pytest.mark.parametrize(
    "extra",
    [
        "    shm_size: ${SHM:-8gb}\n",
        "    volumes: ['${MODELS:-/data/m}:/models']\n",
        "    deploy:\n      resources:\n        limits:\n          memory: ${MEM:-4g}\n",
    ],
)
def test_interpolation_anywhere_in_the_service_is_refused(
    tmp_path: Path, resolver: Resolver, extra: str
) -> None:
    (tmp_path / "compose.yaml").write_text("services:\n  seat:\n    image: i:1.0\n    command: [m]\n" + extra)
    resolved = resolve_service(str(tmp_path / "compose.yaml"), "seat", ComposeOptions(), resolver)
    assert any("Compose interpolates it at deploy time" in r for r in resolved.refusals), resolved.refusals


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("    depends_on: [db]\n  db:\n    image: postgres:16\n", "services.depends_on"),
        ("    networks: [back]\nnetworks:\n  back: {}\n", "joins networks back"),
        (
            "    deploy:\n      resources:\n        reservations:\n          devices:\n"
            "            - driver: amd\n              capabilities: [gpu]\n",
            "NVIDIA GPUs only",
        ),
        ("    deploy:\n      replicas: 2\n", "runs 2 replicas"),
    ],
)
def test_what_one_docker_run_cannot_start_is_refused(
    tmp_path: Path, resolver: Resolver, extra: str, says: str
) -> None:
    (tmp_path / "compose.yaml").write_text(f"services:\n  seat:\n    image: i:1.0\n    command: [m]\n{extra}")
    resolved = resolve_service(str(tmp_path / "compose.yaml"), "seat", ComposeOptions(), resolver)
    with pytest.raises(InputError) as caught:
        docker_run_argv(resolved.service_dict, resolved.argv, name="n")
    assert says in str(caught.value)


def test_a_container_name_is_made_of_dockers_characters() -> None:
    assert container_name("seat 1/a", "k2", 3, device="gpu:0") == "mtpverdict-seat_1_a-gpu_0-k2-boot3"
    assert len(container_name("x" * 300, "a", 1)) == 128


def test_the_campaign_environment_is_added_over_the_services() -> None:
    service = {"image": "i:1", "environment": {"A": "1", "B": None}}
    argv = docker_run_argv(service, ["m"], name="n", environment={"A": "2", "C": "3"})
    assert [a for a in argv if a.startswith("--env")] == ["--env=A=2", "--env=B", "--env=C=3"]
    assert json.dumps(argv)  # plain strings throughout


DOCKER = "/usr/local/bin/docker"
GPU_REQUESTS = {
    "count all, more capabilities": "count: all\n              capabilities: [gpu, compute, utility]",
    "device ids, more capabilities": "device_ids: ['0', '1']\n              capabilities: [gpu, utility]",
    "a count, one more capability": "count: 2\n              capabilities: [gpu, compute]",
    "count all": "count: all\n              capabilities: [gpu]",
}


def _gpu_service(tmp_path: Path, resolver: Resolver, request: str) -> list[str]:
    (tmp_path / "compose.yaml").write_text(
        "services:\n  seat:\n    image: i:1.0\n    command: [m]\n    deploy:\n      resources:\n"
        "        reservations:\n          devices:\n            - driver: nvidia\n"
        f"              {request}\n"
    )
    resolved = resolve_service(str(tmp_path / "compose.yaml"), "seat", ComposeOptions(), resolver)
    return docker_run_argv(resolved.service_dict, base_service(resolved).argv, name="n")


@pytest.mark.parametrize("request_", list(GPU_REQUESTS.values()), ids=list(GPU_REQUESTS))
def test_a_gpus_value_is_docker_csv(tmp_path: Path, resolver: Resolver, request_: str) -> None:
    """docker's --gpus value is CSV: capabilities=compute,utility unquoted splits into a field
    `utility` docker reads as a count ("invalid count (utility)", exit 125)."""
    argv = _gpu_service(tmp_path, resolver, request_)
    (value,) = [a.removeprefix("--gpus=") for a in argv if a.startswith("--gpus=")]
    fields = next(csv.reader([value]))
    assert all("=" in f or f == "all" or f.isdigit() for f in fields), (value, fields)


@pytest.mark.skipif(not os.access(DOCKER, os.X_OK), reason=f"no docker CLI at {DOCKER}")
@pytest.mark.parametrize("request_", list(GPU_REQUESTS.values()), ids=list(GPU_REQUESTS))
def test_the_real_docker_cli_accepts_the_argv(tmp_path: Path, resolver: Resolver, request_: str) -> None:
    """The docker CLI validates its flags before it contacts the daemon: with no daemon to reach,
    "Cannot connect to the Docker daemon" means it accepted every option of the argv."""
    argv = _gpu_service(tmp_path, resolver, request_)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "DOCKER_CONFIG": str(tmp_path / "dc")}
    env["DOCKER_HOST"] = f"unix://{tmp_path}/no-daemon.sock"
    done = subprocess.run(
        [DOCKER, *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert "Cannot connect to the Docker daemon" in done.stderr, done.stderr


def test_a_literal_dollar_reaches_the_container_as_compose_gives_it(
    tmp_path: Path, resolver: Resolver
) -> None:
    """Compose's config output writes `$` as `$$`; `docker compose up` gives the container `x$y`, in its
    environment, labels and healthcheck alike."""
    (tmp_path / "compose.yaml").write_text(
        'services:\n  seat:\n    image: i:1.0\n    command: [m]\n    environment:\n      PRICE: "x$$y"\n'
        '    labels:\n      tag: "a$$b"\n    healthcheck:\n      test: ["CMD-SHELL", "echo $$HOME"]\n'
    )
    resolved = resolve_service(str(tmp_path / "compose.yaml"), "seat", ComposeOptions(), resolver)
    argv = docker_run_argv(resolved.service_dict, base_service(resolved).argv, name="n")
    assert "--env=PRICE=x$y" in argv, argv
    assert "--label=tag=a$b" in argv, argv
    assert "--health-cmd=echo $HOME" in argv, argv


MOUNTS = """services:
  seat:
    image: i:1.0
    command: [m]
    volumes:
      - ./models:/models:ro,z
      - ./b:/b:Z,rslave
      - type: volume
        source: cache
        target: /cache
        volume: {subpath: hf, nocopy: true}
      - type: tmpfs
        target: /scratch
        read_only: true
        tmpfs: {size: 1g, mode: 1777}
volumes:
  cache: {}
"""


def test_mount_options_reach_docker_run(tmp_path: Path, resolver: Resolver) -> None:
    """SELinux relabelling, propagation, a volume's subpath and a tmpfs's mode and read_only are what
    `docker compose up` mounts with; dropping them mounts something else."""
    (tmp_path / "compose.yaml").write_text(MOUNTS)
    resolved = resolve_service(str(tmp_path / "compose.yaml"), "seat", ComposeOptions(), resolver)
    names = dict(resolved.volume_names)
    argv = docker_run_argv(resolved.service_dict, base_service(resolved).argv, name="n", volume_names=names)
    assert f"--volume={tmp_path}/models:/models:ro,z" in argv, argv
    assert f"--volume={tmp_path}/b:/b:Z,rslave" in argv, argv
    assert (
        f"--mount=type=volume,source={names['cache']},target=/cache,volume-nocopy,volume-subpath=hf" in argv
    )
    assert "--mount=type=tmpfs,target=/scratch,readonly,tmpfs-size=1073741824,tmpfs-mode=1777" in argv, argv
    if os.access(DOCKER, os.X_OK):
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            "DOCKER_CONFIG": str(tmp_path / "dc"),
        }
        env["DOCKER_HOST"] = f"unix://{tmp_path}/no-daemon.sock"
        done = subprocess.run(
            [DOCKER, *argv[1:]], capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL
        )
        assert "Cannot connect to the Docker daemon" in done.stderr, done.stderr


def test_a_mount_option_docker_run_cannot_say_is_refused_naming_it(
    tmp_path: Path, resolver: Resolver
) -> None:
    (tmp_path / "compose.yaml").write_text(
        "services:\n  seat:\n    image: i:1.0\n    command: [m]\n    volumes:\n      - type: bind\n"
        "        source: ./c\n        target: /c\n        bind: {selinux: z, create_host_path: false}\n"
    )
    resolved = resolve_service(str(tmp_path / "compose.yaml"), "seat", ComposeOptions(), resolver)
    with pytest.raises(InputError, match=r"volumes\[0\]"):
        docker_run_argv(resolved.service_dict, base_service(resolved).argv, name="n")
