"""Dataset workloads: reading prompt sets, the seeded draw, the campaign keys and what a request sends."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import msgspec
import pytest

from mtpverdict.collect import datasets
from mtpverdict.collect.campaign import load_campaign_file
from mtpverdict.collect.client import _payload
from mtpverdict.decide import decide_directory
from mtpverdict.errors import CampaignError
from mtpverdict.formats.results import Campaign

from ..conftest import ROOT, run_cli
from .conftest import campaign_text, run_collect

MIXED = ROOT / "collectors" / "datasets" / "mixed.jsonl"


def _campaign(tmp: Path, workload: str) -> Path:
    path = tmp / "campaign.toml"
    path.write_text(
        f"""
campaign_version = 1
id = "mix"
title = "dataset workloads"
concurrency = [1, 2]
reps = 2
[server]
mode = "external"
[[arms]]
name = "off_A"
role = "control"
base_url = "http://127.0.0.1:9"
[[workloads]]
{workload}
"""
    )
    return path


def _jsonl(tmp: Path, *objects: object, name: str = "set.jsonl") -> Path:
    path = tmp / name
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def _load(path: Path, category: str | None = None) -> tuple[datasets.DatasetPrompt, ...]:
    return datasets.load_dataset(path, "campaign.toml", "workloads.w.dataset", category)[1]


def test_every_prompt_shape_the_tools_write_is_read(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        {"prompt": "vllm bench custom", "category": "a"},
        {"text": "aiperf single turn", "category": "a"},
        {"turns": [{"text": "aiperf first turn"}, {"text": "second"}], "category": "b"},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]},
        {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "sharegpt"}]},
    )
    prompts = _load(path, category="c")
    assert [(p.index, p.category) for p in prompts] == [(0, "a"), (1, "a"), (2, "b"), (3, "c"), (4, "c")]
    assert [p.text for p in prompts] == [
        "vllm bench custom",
        "aiperf single turn",
        "aiperf first turn",
        None,
        "sharegpt",
    ]
    assert prompts[3].messages == (("system", "be brief"), ("user", "hi"))
    assert prompts[3].as_text == "be brief\n\nhi"


def test_a_sharegpt_json_list_is_read(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(
        json.dumps(
            [
                {"conversations": [{"from": "human", "value": "one"}, {"from": "gpt", "value": "a"}]},
                {"id": "x2", "conversations": [{"from": "human", "value": "two"}]},
            ]
        )
    )
    assert [p.text for p in _load(path, category="chat")] == ["one", "two"]


def test_each_bad_line_is_named_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"prompt": "fine", "category": "a"}\n'
        "{not json\n"
        '{"prompt": "no category"}\n'
        '{"nothing": 1, "category": "a"}\n'
        "\n"
        '{"prompt": "", "category": "a"}\n'
        '{"prompt": "x", "category": "has space"}\n'
        '["a list"]\n'
    )
    with pytest.raises(CampaignError) as caught:
        _load(path)
    lines = [str(p) for p in caught.value.problems]
    assert [p.line for p in caught.value.problems] == [2, 3, 4, 6, 7, 8]
    assert all(line.startswith(f"{path}:") for line in lines)
    assert "no category" in lines[1] and "set the workload's category" in lines[1]
    assert "give 'prompt', 'text', 'turns', 'messages' or 'conversations'" in lines[2]


def test_an_unreadable_or_empty_dataset_is_named(tmp_path: Path) -> None:
    with pytest.raises(CampaignError, match=r"campaign.toml: workloads.w.dataset: dataset .* not found"):
        _load(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(CampaignError, match="holds no prompts"):
        _load(tmp_path / "empty.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(CampaignError, match="not UTF-8 at byte"):
        _load(tmp_path / "latin1.jsonl")


def test_the_draw_is_seeded_per_category_and_keeps_its_order(tmp_path: Path) -> None:
    objects = [{"prompt": f"p{i}", "category": "ab"[i % 2]} for i in range(40)]
    prompts = _load(_jsonl(tmp_path, *objects))
    first = datasets.sample(prompts, "f", "0" * 64, seed=7, samples=5)
    again = datasets.sample(prompts, "f", "0" * 64, seed=7, samples=5)
    other = datasets.sample(prompts, "f", "0" * 64, seed=8, samples=5)
    assert first == again
    assert [d.category for d in first] == ["a", "b"]
    assert all(len(d.prompts) == 5 and d.pool == 20 for d in first)
    assert [p.index for p in first[0].prompts] != [p.index for p in other[0].prompts]
    # a category added to the file leaves the others' draws as they were
    more = _load(_jsonl(tmp_path, *objects, {"prompt": "new", "category": "c"}, name="more.jsonl"))
    assert datasets.sample(more, "f", "0" * 64, seed=7, samples=5)[:2] == first
    everything = datasets.sample(prompts, "f", "0" * 64, seed=7, samples=None)
    assert sorted(p.index for p in everything[0].prompts) == list(range(0, 40, 2))


def test_runs_walk_the_drawn_list_in_the_same_order() -> None:
    prompts = tuple(datasets.DatasetPrompt(i, f"p{i}", None, "a") for i in range(5))
    drawn = datasets.SampledPrompts("f", "0" * 64, 1, "a", 5, prompts)
    sent = [drawn.at(rep, 2, s).index for rep in (1, 2, 3) for s in (0, 1)]
    assert sent == [0, 1, 2, 3, 4, 0]
    assert datasets.request_fields(drawn, 2, 2, 1) == {"prompt_index": 3, "category": "a"}
    assert datasets.request_fields(None, 1, 1, 0) == {}


def test_the_nonce_goes_first_in_text_and_in_chat_turns() -> None:
    text = datasets.DatasetPrompt(0, "add(a, b)", None, "code")
    chat = datasets.DatasetPrompt(1, None, (("system", "be brief"), ("user", "hi")), "chat")
    assert datasets.with_nonce(text, "abc") == ("[abc] add(a, b)", None)
    assert datasets.with_nonce(text, None) == ("add(a, b)", None)
    _, turns = datasets.with_nonce(chat, "abc")
    assert turns == (("system", "[abc] be brief"), ("user", "hi"))
    body = _payload("m", "", 8, True, False, True, turns)
    assert body["messages"] == [
        {"role": "system", "content": "[abc] be brief"},
        {"role": "user", "content": "hi"},
    ]


def test_a_dataset_workload_becomes_one_workload_per_category(tmp_path: Path) -> None:
    workload = f'id = "mixed"\ndataset = "{MIXED}"\nsamples = 3\nsample_seed = 11\nmax_tokens = 8'
    plan = load_campaign_file(_campaign(tmp_path, workload))
    ids = [w.id for w in plan.workloads]
    assert ids == ["mixed.chat", "mixed.code", "mixed.long-context", "mixed.math"]
    assert [w.chat for w in plan.workloads] == [True, False, False, False]
    assert all(w.drawn is not None and len(w.drawn.prompts) == 3 for w in plan.workloads)
    document = plan.results_campaign({}, "RESULTS")
    campaign = msgspec.convert(document, Campaign)  # campaign.json as the results format reads it
    sha = hashlib.sha256(MIXED.read_bytes()).hexdigest()
    assert {(w.category, w.dataset_sha256, w.dataset_seed) for w in campaign.workloads} == {
        (c, sha, 11) for c in ("chat", "code", "long-context", "math")
    }
    assert "3 of 8 prompts drawn with seed 11" in (campaign.workloads[0].description or "")


def test_the_shipped_set_holds_four_categories_of_eight() -> None:
    prompts = _load(MIXED)
    counts = {c: sum(1 for p in prompts if p.category == c) for c in {p.category for p in prompts}}
    assert counts == {"chat": 8, "code": 8, "math": 8, "long-context": 8}


def test_a_dataset_is_relative_to_the_campaign_file(tmp_path: Path) -> None:
    (tmp_path / "sets").mkdir()
    _jsonl(tmp_path / "sets", {"prompt": "p"}, name="one.jsonl")
    workload = 'id = "w"\ndataset = "sets/one.jsonl"\ncategory = "chat"\nmax_tokens = 8'
    plan = load_campaign_file(_campaign(tmp_path, workload))
    assert [w.id for w in plan.workloads] == ["w.chat"]


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ('id = "w"\nprompt = "p"\ndataset = "x.jsonl"\nmax_tokens = 8', "give one of prompt"),
        ('id = "w"\nmax_tokens = 8', "give one of prompt"),
        ('id = "w"\nprompt = "p"\nsamples = 3\nmax_tokens = 8', "samples applies to a dataset workload"),
        ('id = "w"\nprompt = "p"\ncategory = "c"\nmax_tokens = 8', "category applies to a dataset workload"),
    ],
)
def test_the_dataset_keys_are_checked(tmp_path: Path, workload: str, message: str) -> None:
    with pytest.raises(CampaignError, match=message) as caught:
        load_campaign_file(_campaign(tmp_path, workload))
    assert str(caught.value.problems[0]).startswith(f"{tmp_path / 'campaign.toml'}: workloads[0]")


def test_a_category_workload_clashing_with_another_is_refused(tmp_path: Path) -> None:
    _jsonl(tmp_path, {"prompt": "p", "category": "code"})
    workload = (
        'id = "w"\ndataset = "set.jsonl"\nmax_tokens = 8\n'
        '[[workloads]]\nid = "w.code"\nprompt = "q"\nmax_tokens = 8'
    )
    with pytest.raises(CampaignError, match="workload 'w.code' appears twice"):
        load_campaign_file(_campaign(tmp_path, workload))


@pytest.mark.slow
def test_a_dataset_campaign_records_each_prompt_and_decides_per_category(tmp_path: Path, port: int) -> None:
    text = campaign_text(port, reps=2, concurrency="[1, 2]")
    start = text.index("[[workloads]]")
    end = text.index("[[coherence]]")
    dataset = "\n".join(
        ["[[workloads]]", 'id = "mixed"', f'dataset = "{MIXED}"', "samples = 3", "max_tokens = 16", "", ""]
    )
    path = tmp_path / "campaign.toml"
    path.write_text(text[:start] + dataset + text[end:])
    out = tmp_path / "results"
    done = run_collect(
        [sys.executable, "-m", "mtpverdict", "collect", str(path), "--out", str(out)], out, timeout=240
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    timed = [r for r in records if r["kind"] == "request" and not r["warmup"]]
    assert {r["category"] for r in timed} == {"chat", "code", "math", "long-context"}
    assert all(r["workload"] == f"mixed.{r['category']}" and r["nonce"] for r in timed)
    # every arm sent the same prompt at the same place of the design
    by_arm: dict[str, list[tuple[str, int, int, int, int]]] = {}
    for r in timed:
        by_arm.setdefault(r["arm"], []).append(
            (r["workload"], r["concurrency"], r["rep"], r["stream"], r["prompt_index"])
        )
    orders = [sorted(v) for v in by_arm.values()]
    assert len(orders) == 4 and all(o == orders[0] for o in orders)
    assert len({p for *_, p in orders[0]}) == 12  # 3 drawn prompts in each of 4 categories
    decision = json.loads(decide_directory(out).json_text)
    cells = {c["workload"] for c in decision["comparisons"] if c["arm"] == "ngram_k2"}
    assert cells == {"mixed.chat", "mixed.code", "mixed.long-context", "mixed.math"}


def test_collect_names_each_bad_line_and_exits_2(tmp_path: Path) -> None:
    _jsonl(tmp_path, {"prompt": "fine", "category": "a"}, {"prompt": 3, "category": "a"}, name="bad.jsonl")
    campaign = _campaign(tmp_path, 'id = "w"\ndataset = "bad.jsonl"\nmax_tokens = 8')
    ran = run_cli("collect", campaign, "--out", tmp_path / "out")
    assert ran.returncode == 2  # README, exit codes: bad input
    assert f"{tmp_path / 'bad.jsonl'}:2: entry 1: 'prompt' must be a non-empty string" in ran.stderr
    assert "Traceback" not in ran.stderr and not (tmp_path / "out" / "records.jsonl").exists()


def test_entries_no_request_could_send_are_named_by_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"prompt": "fine", "category": "a"}\n'
        '{"prompt": "lone \\ud800 half", "category": "a"}\n'
        + "[" * 100_000
        + "\n"
        + '{"prompt": "x", "category": "a", "n": '
        + "9" * 5000
        + "}\n"
        + '{"prompt": "x", "category": "a\\n"}\n'
        + '{"messages": [{"role": "user", "content": "\\udfff"}], "category": "a"}\n'
    )
    with pytest.raises(CampaignError) as caught:
        _load(path)
    shown = {p.line or 0: str(p) for p in caught.value.problems}
    assert sorted(shown) == [2, 3, 4, 5, 6] and all(s.startswith(f"{path}:") for s in shown.values())
    assert "lone surrogate" in shown[2] and "lone surrogate" in shown[6]
    assert "nested too deeply" in shown[3]
    assert "digits" in shown[4]
    assert "is not a name" in shown[5]


def test_a_line_separator_inside_a_string_ends_no_line(tmp_path: Path) -> None:
    path = tmp_path / "seps.jsonl"
    path.write_text('{"prompt": "one\u2028two\u0085three", "category": "a"}\n', encoding="utf-8")
    sha, prompts = datasets.load_dataset(path, "campaign.toml", "workloads.w.dataset", None)
    assert [p.text for p in prompts] == ["one\u2028two\u0085three"]
