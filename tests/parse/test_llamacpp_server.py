"""parse.llamacpp_server against what a real llama-server answered and printed (recorded files)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.collect.campaign import flag_spans, parity_problems
from mtpverdict.engines import registry
from mtpverdict.engines.interface import MetricNames
from mtpverdict.engines.names import Engine
from mtpverdict.errors import EngineTextError
from mtpverdict.parse import AcceptanceReading, KvCapacity, llamacpp_server, parse_metrics
from mtpverdict.parse.llamacpp_server import (
    CHECKED_VERSION,
    Health,
    build_version,
    cached_prompt_tokens,
    depth_in_force,
    endpoint_refusal,
    health_state,
    kv_capacity,
    read_props,
    read_slots,
    response_acceptance,
)
from mtpverdict.serveconfig import FLAGS, ServeSpec, SpecRefusal, extract_spec, is_speculative_variable

from .support import RECORDED

SERVER = RECORDED / "llamacpp-0.5.0-dev-0c1e570-cpu"
ARMS = ("none", "draft-copy-k2", "draft-copy-k4", "draft-random-k2", "ngram-mod-k2")
# The arms' serve arguments, as the recorded directory's README lists them.
SERVE_ARGS = {
    "none": [],
    "draft-copy-k2": [
        "--spec-type",
        "draft-simple",
        "--spec-draft-model",
        "draft-copy.gguf",
        "--spec-draft-n-max",
        "2",
    ],
    "draft-copy-k4": [
        "--spec-type",
        "draft-simple",
        "--spec-draft-model",
        "draft-copy.gguf",
        "--spec-draft-n-max",
        "4",
    ],
    "draft-random-k2": ["--spec-type", "draft-simple", "-md", "draft-random.gguf", "--spec-draft-n-max", "2"],
    "ngram-mod-k2": [
        "--spec-type",
        "ngram-mod",
        "--spec-ngram-mod-n-match",
        "3",
        "--spec-ngram-mod-n-min",
        "1",
        "--spec-ngram-mod-n-max",
        "2",
    ],
}
K = {"none": 0, "draft-copy-k2": 2, "draft-copy-k4": 4, "draft-random-k2": 2, "ngram-mod-k2": 2}


def _json(name: str) -> Any:
    return json.loads((SERVER / name).read_text(encoding="utf-8"))


def _last_sse_chunk(name: str) -> Any:
    lines = (SERVER / name).read_text(encoding="utf-8").splitlines()
    chunks = [line[len("data: ") :] for line in lines if line.startswith("data: {")]
    return json.loads(chunks[-1])


def test_the_version_checked_is_the_recorded_one() -> None:
    assert (SERVER / "version.txt").read_text().startswith(f"version: {CHECKED_VERSION}\n")


def test_health_and_refused_endpoints() -> None:
    assert health_state(200) is Health.READY
    assert health_state(503) is Health.LOADING
    assert health_state(404) is Health.FAILED
    assert _json("health.json") == {"status": "ok"}
    metrics = (SERVER / "metrics-disabled.json").read_text()
    assert endpoint_refusal(501, metrics) == (
        "This server does not support metrics endpoint. Start it with `--metrics`"
    )
    assert "Start it with `--slots`" in (
        endpoint_refusal(501, (SERVER / "slots-disabled.json").read_text()) or ""
    )
    assert endpoint_refusal(200, "# HELP ...") is None
    assert endpoint_refusal(501, "not json") == "not supported (HTTP 501)"


def _llama_spec(argv: list[str]) -> ServeSpec | SpecRefusal:
    return extract_spec(argv, image="ghcr.io/ggml-org/llama.cpp:server")


@pytest.mark.parametrize("arm", ARMS)
def test_serve_args_split_and_depth(arm: str) -> None:
    """The engine's flag table takes the speculative flags apart from the rest, and its reading of them
    is the depth the per-position series then show."""
    argv = ["-m", "target.gguf", "-c", "4096", "--parallel", "4", *SERVE_ARGS[arm], "--metrics"]
    rest = [t for _, tokens, known in flag_spans(argv) if not known for t in tokens]
    assert rest == ["-m", "target.gguf", "-c", "4096", "--parallel", "4", "--metrics"]
    spec = _llama_spec(argv)
    assert isinstance(spec, ServeSpec) and spec.engine is Engine.LLAMACPP
    assert spec.off is (arm == "none")
    assert (spec.k or 0) == K[arm]


def test_every_spelling_names_one_flag() -> None:
    for alias in ("-md", "--model-draft", "--spec-draft-model"):
        assert FLAGS[alias].canonical == "--spec-draft-model"
        spec = _llama_spec(["--spec-type", "draft-simple", alias, "d.gguf", "--spec-draft-n-max", "2"])
        assert isinstance(spec, ServeSpec) and spec.settings_dict()["--spec-draft-model"] == "d.gguf"
    # a draft model alone does not speculate in this version (see /slots): the type is not guessed
    assert isinstance(_llama_spec(["-md", "d.gguf"]), SpecRefusal)
    spec = _llama_spec(["--spec-default", "-cmoed", "-ngld", "99", "--draft-p-min", "0.5"])
    assert isinstance(spec, ServeSpec) and (spec.method, spec.k) == ("ngram", 64)
    assert sorted(spec.settings_dict()) == [
        "--spec-default",
        "--spec-draft-cpu-moe",
        "--spec-draft-ngl",
        "--spec-draft-p-min",
        "--spec-ngram-mod-n-max",
    ]


@pytest.mark.parametrize(
    ("argv", "depth"),
    [
        (["--spec-type", "draft-eagle3", "-md", "d", "--spec-draft-n-max", "3"], 3),
        (["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", "5"], 5),
        (["--spec-type", "ngram-map-k4v", "--spec-ngram-map-k4v-size-m", "7"], 7),
        (["--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "2"], 2),
        (["--spec-type", "ngram-cache"], 8),
        (["--spec-type", "none"], None),
    ],
)
def test_the_depth_is_the_flag_each_type_reads(argv: list[str], depth: int | None) -> None:
    spec = _llama_spec(argv)
    assert isinstance(spec, ServeSpec) and spec.k == depth


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--spec-type", "draft-eagle3"], "--spec-type draft-eagle3 needs --spec-draft-n-max"),
        (["--spec-type", "ngram-simple"], "--spec-type ngram-simple needs --spec-ngram-simple-size-m"),
        (["--spec-type", "bogus"], "--spec-type bogus: not a type llama.cpp lists"),
        (["--spec-type"], "--spec-type: takes 1 value(s), got 0"),
        (["--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "two"], "needs --spec-ngram-mod-n-max (1 to"),
        (["--spec-type", "draft-simple,ngram-map-k", "-md", "d"], "several types"),
        (["--spec-type", "ngram-mod", "--draft-max", "3"], "--draft-max with --spec-type"),
        (["--spec-ngram-size-n", "3"], "--spec-ngram-size-n: removed from llama.cpp"),
    ],
)
def test_bad_serve_args_are_refused_with_their_reason(argv: list[str], reason: str) -> None:
    spec = _llama_spec(argv)
    assert isinstance(spec, SpecRefusal)
    assert any(reason in line for line in spec.reasons), spec.reasons


# spellings of llama.cpp builds other than the one recorded (older or newer), in the engine's table
OTHER_BUILDS = {"--ctx-size-draft", "-cd", "--spec-replace", "--spec-draft-cpu-range-batch", "-Crbd"}
OTHER_BUILDS |= {"--cpu-range-batch-draft", "--fim-qwen-7b-spec", "--fim-qwen-14b-spec"}


def test_every_flag_spelling_is_in_the_recorded_help() -> None:
    """The engine's flag table (engines/llamacpp.py) holds every spelling of the recorded build's
    speculative section, and each of its spellings is in `llama-server --help` or of another build."""
    help_text = (SERVER / "help.txt").read_text()
    listed = set(re.findall(r"(?<![\w-])(-{1,2}[A-Za-z][\w-]*)", help_text))
    spellings = {name for name, flag in FLAGS.items() if flag.engine is Engine.LLAMACPP}
    assert spellings - OTHER_BUILDS <= listed
    section = help_text[
        help_text.index("----- speculative params -----") : help_text.index("----- example-specific")
    ]
    in_section = {
        name
        for line in section.splitlines()
        for head in re.findall(r"^((?:-{1,2}[A-Za-z][\w-]*(?:,\s*)?)+)", line)
        for name in re.findall(r"-{1,2}[A-Za-z][\w-]*", head)
    }
    assert in_section and in_section <= spellings
    assert "--draft-max" in in_section and "--spec-ngram-size-n" in in_section  # removed, still listed
    for kind in ("none", "draft-simple", "ngram-mod", "ngram-cache"):
        assert kind in help_text
    assert {"LLAMA_ARG_SPEC_TYPE", "LLAMA_ARG_DRAFT_MAX"} <= set(re.findall(r"LLAMA_ARG_\w+", help_text))
    assert all(is_speculative_variable(name) for name in ("LLAMA_ARG_SPEC_TYPE", "LLAMA_ARG_DRAFT_MAX"))


@pytest.mark.parametrize("arm", ARMS)
def test_props_and_slots(arm: str) -> None:
    props = read_props(_json(f"props-{arm}.json"))
    assert (props.total_slots, props.n_ctx_slot, props.version) == (4, 1024, "1 (0c1e570)")
    assert (props.endpoint_metrics, props.endpoint_slots) == (True, True)
    assert kv_capacity(props) == KvCapacity(window_tokens=1024, slots=4)
    before, after = (
        read_slots(_json(f"slots-{arm}-before.json")),
        read_slots(_json(f"slots-{arm}-after.json")),
    )
    assert before.n_ctx == after.n_ctx == (1024,) * 4
    assert before.speculating is after.speculating is (arm != "none")
    assert before.spec_types == () and not any(after.processing)
    wanted = {"none": "none", "ngram-mod-k2": "none,ngram-mod"}.get(arm, "none,draft-simple")
    assert after.spec_types == (wanted,)


@pytest.mark.parametrize("arm", ARMS)
def test_depth_in_force_from_metrics_and_slots(arm: str) -> None:
    before = parse_metrics((SERVER / f"metrics-{arm}-before.txt").read_text())
    after = parse_metrics((SERVER / f"metrics-{arm}-after.txt").read_text())
    slots = read_slots(_json(f"slots-{arm}-after.json"))
    assert depth_in_force(after, slots) == K[arm]
    assert depth_in_force(before, slots) == (0 if arm == "none" else None)  # no draft verified yet
    assert depth_in_force(after, None) == (None if arm == "none" else K[arm])


def test_bad_props_and_slots_name_the_key() -> None:
    with pytest.raises(EngineTextError, match="total_slots"):
        read_props({"default_generation_settings": {"n_ctx": 1024}})
    with pytest.raises(EngineTextError, match="default_generation_settings.n_ctx"):
        read_props({"total_slots": 4, "default_generation_settings": {}})
    with pytest.raises(EngineTextError, match=r"\[1\].n_ctx"):
        read_slots([{"n_ctx": 1024}, {"n_ctx": "x"}])
    with pytest.raises(EngineTextError, match="non-empty JSON list"):
        read_slots({"id": 0})


# the rest of llama-server's /metrics (server-task.cpp `to_metrics`), which nothing reads: the series
# read are the engine's `metric_names`; no label but `position`, every counter updated when a request
# ends (metrics_on_prediction), never in the middle of one
UNREAD_COUNTERS = (
    "prompt_tokens_cached_total",
    "prompt_seconds_total",
    "tokens_predicted_seconds_total",
    "n_decode_total",
    "n_tokens_max",  # exported as a counter, although it is the largest sequence seen
)
UNREAD_GAUGES = (
    "prompt_tokens_seconds",
    "predicted_tokens_seconds",
    "requests_processing",
    "requests_deferred",
    "n_busy_slots_per_decode",
)


def _read_families() -> tuple[str, set[str]]:
    """The engine's /metrics prefix and the counter families its parts read, as exported (`_total`)."""
    parts = registry.ENGINES[Engine.LLAMACPP]
    names = parts.metric_names
    assert isinstance(names, MetricNames) and names.kv_config is None
    assert not {names.accept_length, names.accept_rate, names.kv_tokens} - {None}  # no gauge read
    return parts.metric_prefix, {f"{n.removeprefix(parts.metric_prefix)}_total" for n in names.roles()}


def test_the_recorded_metric_names_are_the_read_and_unread_ones() -> None:
    prefix, read = _read_families()
    per_position = {n for n in read if n.endswith("_per_pos_total")}  # exported once a draft was verified
    assert len(per_position) == 1
    for arm in ARMS:
        text = (SERVER / f"metrics-{arm}-after.txt").read_text()
        names = set(re.findall(rf"^{re.escape(prefix)}(\w+)", text, re.MULTILINE))
        assert names - per_position == read - per_position | set(UNREAD_COUNTERS) | set(UNREAD_GAUGES)
        assert (per_position <= names) is (arm != "none")


def test_the_server_module_spells_no_metric_name_the_engine_reads() -> None:
    # the names read are the engine module's (engines/llamacpp.py): a second spelling here could drift
    prefix, read = _read_families()
    spellings = read | {n.removesuffix("_total") for n in read}
    spellings |= {prefix + n for n in spellings}
    source = Path(llamacpp_server.__file__).read_text()
    strings = {n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant)}
    assert sorted(s for s in strings if s in spellings) == []


@pytest.mark.parametrize(
    ("arm", "counts"),
    [("draft-copy-k2", (31, 31)), ("draft-random-k2", (91, 0)), ("ngram-mod-k2", (22, 21)), ("none", None)],
)
def test_response_acceptance_from_the_last_stream_chunk(arm: str, counts: tuple[int, int] | None) -> None:
    chunk = _last_sse_chunk(f"sse-{arm}.txt")
    reading = response_acceptance(chunk)
    if counts is None:
        assert reading is None
    else:
        assert reading == AcceptanceReading(
            source="response",
            scoped="run",
            kind="response",
            draft_tokens=counts[0],
            accepted_tokens=counts[1],
        )
    assert cached_prompt_tokens(chunk) == 21  # the same prompt again: all but the last token cached
    assert cached_prompt_tokens(_json(f"completion-{arm}.json")) == 0
    assert build_version(chunk["system_fingerprint"]) == "1 (0c1e570)"


def test_build_version_refuses_other_text() -> None:
    assert build_version("b7315-4a1b2c3d") == "7315 (4a1b2c3d)"
    assert build_version("vllm-0.32.0-abc") is None


def test_the_shipped_campaign_arms_differ_only_in_speculation_at_their_k() -> None:
    """collectors/llamacpp-cpu/campaign.toml: each arm's serve_args are speculative flags only, and the
    depth they configure is the arm's k (the depth the per-position series then show)."""
    from mtpverdict.collect import load_campaign_file

    plan = load_campaign_file(RECORDED.parents[2] / "collectors" / "llamacpp-cpu" / "campaign.toml")
    assert plan.server.engine == "llamacpp"
    assert parity_problems(plan.arms) == []
    for arm in plan.arms:
        spec = _llama_spec(list(arm.serve_args))
        assert isinstance(spec, ServeSpec), spec
        assert (spec.k or 0) == (arm.k or 0)
        assert spec.off is (arm.role != "candidate")
    command = list(plan.server.command)
    assert command[command.index("--parallel") + 1] == "4" and "--metrics" in command
