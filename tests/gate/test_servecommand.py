"""mtpverdict.servecommand: only the wrappers, servers and interpreter forms the gate models may
stand in front of a server's settings; everything else is Unproven, with the reason."""

from __future__ import annotations

import pytest

from mtpverdict.servecommand import Command, Unproven, module_path_from_cwd, split_command
from mtpverdict.serveconfig import Engine

VLLM_MODULE = "vllm.entrypoints.openai.api_server"


@pytest.mark.parametrize(
    ("argv", "program", "engine"),
    [
        (["vllm", "serve", "m", "-tp", "2"], 2, Engine.VLLM),
        (["/opt/venv/bin/vllm", "serve", "m"], 2, Engine.VLLM),
        (["/venv/bin/python3", "-u", "-m", VLLM_MODULE, "--model", "m"], 4, Engine.VLLM),
        (["python3.13t", "-X", "dev", "-m", "vllm.entrypoints.cli.main", "serve", "m"], 6, Engine.VLLM),
        (["python", "-m", "sglang.launch_server", "--model-path", "m"], 3, Engine.SGLANG),
        (["llama-server", "-m", "a.gguf"], 1, Engine.LLAMACPP),
        (["C:\\llama\\llama-server.exe", "-m", "a.gguf"], 1, Engine.LLAMACPP),
        (["/b/llama-server-cuda", "-m", "a.gguf"], 1, Engine.LLAMACPP),
        (["nice", "-n", "10", "vllm", "serve", "m"], 5, Engine.VLLM),
        (["nice", "-5", "llama-server", "-m", "a.gguf"], 3, Engine.LLAMACPP),
        (["taskset", "-c", "0-7", "vllm", "serve", "m"], 5, Engine.VLLM),
        (["taskset", "0xff", "vllm", "serve", "m"], 4, Engine.VLLM),
        (["numactl", "--cpunodebind=0", "-m", "0", "nice", "vllm", "serve", "m"], 7, Engine.VLLM),
    ],
)
def test_modelled_programs(argv: list[str], program: int, engine: Engine) -> None:
    found = split_command(argv, names_program=True)
    assert isinstance(found, Command), found
    assert len(found.program) == program and found.engine is engine
    assert found.settings == tuple(argv[program:])


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["sh", "-c", 'exec vllm serve "$@"', "vllm", "--model", "m"], "'sh' runs before the server"),
        (["bash", "-lc", "vllm serve m"], "'bash' runs before the server"),
        (["env", "LLAMA_ARG_SPEC_TYPE=ngram-mod", "llama-server"], "'env' runs before the server"),
        (["python3", "-c", "import os; os.execvp('vllm', ['vllm'])"], "runs a -c script"),
        (["python3", "launch.py", "--model", "m"], "runs the script 'launch.py'"),
        (["python3", "-m", "mylauncher", "--model", "m"], "not an engine's own serving module"),
        (["python3", "-m", "vllm.entrypoints.cli.main", "bench"], "without the serve subcommand"),
        (["vllm", "bench", "serve"], "without the serve subcommand"),
        (["nice", "--evil", "vllm", "serve"], "nice option '--evil' is not one the gate models"),
        (["taskset", "-c", "0-7"], "taskset wraps no command"),
        (["/models/server", "--port", "1"], "'/models/server' runs before the server"),
        (["text-generation-launcher", "--speculate", "3"], "not a program the gate models"),
    ],
)
def test_anything_else_in_front_of_the_server_is_unproven(argv: list[str], why: str) -> None:
    found = split_command(argv, names_program=True)
    assert isinstance(found, Unproven) and why in found.reason, found


def test_arguments_of_an_image_entrypoint_must_not_open_with_a_program() -> None:
    """Without an entrypoint the image's runs first; whether `vllm` then runs depends on it."""
    assert isinstance(split_command(["vllm", "serve", "m"], names_program=False), Unproven)
    as_arguments = split_command(["/models/server", "--port", "1"], names_program=False)
    assert as_arguments == Command((), ("/models/server", "--port", "1"), None)  # the model, compared
    assert split_command(["--model", "m"], names_program=False) == Command((), ("--model", "m"), None)


def test_python_m_takes_modules_from_the_working_directory_unless_p_or_i() -> None:
    def first(argv: list[str]) -> str | None:
        command = split_command([*argv, "--model", "m"], names_program=True)
        assert isinstance(command, Command), command
        return module_path_from_cwd(command)

    module = ["-m", "vllm.entrypoints.openai.api_server"]
    assert first(["python3", *module]) == "python3"
    assert first(["numactl", "-m", "0", "python3", *module]) == "python3"  # numactl's -m is not python's
    assert first(["numactl", "-m", "0", "python3", "-P", *module]) is None
    assert first(["python3.12", "-I", *module]) is None
    assert first(["vllm", "serve"]) is None


def test_relative_program_paths_and_pycache_prefix_are_unproven() -> None:
    assert isinstance(split_command(["./vllm", "serve", "m"], names_program=True), Unproven)
    assert isinstance(split_command(["bin/llama-server", "-m", "x"], names_program=True), Unproven)
    found = split_command(["C:\\llama\\llama-server.exe", "-m", "x"], names_program=True)
    assert not isinstance(found, Unproven), found
    for option in (["-X", "pycache_prefix=/m"], ["-Xpycache_prefix=/m"]):
        argv = ["python3", *option, "-m", "vllm.entrypoints.openai.api_server"]
        assert isinstance(split_command(argv, names_program=True), Unproven)
