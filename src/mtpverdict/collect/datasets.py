"""Dataset workloads: prompt sets read from a file, drawn with a recorded seed, one workload per category.

A `[[workloads]]` entry with `dataset = "FILE"` names a prompt set instead of one prompt. The file is
JSONL (one object a line) or JSON (a list of objects, as ShareGPT files are); each object holds its
prompt under one of the keys the tools users already measure with write:

- `prompt` (a string): vllm bench serve's custom dataset;
- `text` (a string): AIPerf's single-turn dataset; `turns` (a list of `{"text": ...}`): its multi-turn
  one, of which the first turn is sent;
- `messages` (a list of `{"role", "content"}`): a chat prompt, sent to /v1/chat/completions;
- `conversations` (a list of `{"from", "value"}`): ShareGPT, whose first human turn is sent (as vllm
  bench does).

An object's `category` (or the workload's, for every object without one) sorts it into a category; each
category becomes its own workload (`ID.CATEGORY`), so decide compares the arms per category as cells of
the design. Per category, `samples` prompts (default all) are drawn with `sample_seed` (default from the
workload id) into one ordered list that every arm and boot sends in the same order: the run `rep` at
concurrency `c` sends, on stream `s`, the prompt at position `((rep - 1) * c + s) mod n`. The nonce, when
on, still goes first. Each request record names the prompt's index in the file and its category.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtpverdict._files import NotReadable, read_regular
from mtpverdict.errors import CampaignError, Problem
from mtpverdict.formats.results import NAME_PATTERN

# A prompt set of a few thousand prompts is a few MB; ShareGPT's full file is about 640 MB, far beyond
# what one campaign sends: draw a subset into a file of its own.
MAX_DATASET_BYTES = 64 << 20
MAX_PROBLEMS = 20  # problems listed from one file before the rest are only counted
if TYPE_CHECKING:
    from mtpverdict.collect.campaign import WorkloadPlan
    from mtpverdict.collect.client import Clock, RunResult, StreamLimits

_NAME = re.compile(NAME_PATTERN)
_HUMAN_ROLES = frozenset({"human", "user"})

Messages = tuple[tuple[str, str], ...]  # (role, content) per turn


@dataclass(frozen=True, slots=True)
class DatasetPrompt:
    """One prompt of a dataset: where it is in the file, its text or chat turns, its category."""

    index: int  # 0-based position of the object in the file (the line of a JSONL file is index + 1)
    text: str | None
    messages: Messages | None
    category: str

    @property
    def as_text(self) -> str:
        """The prompt as one text (a chat prompt's turns joined by blank lines): for the identity probe."""
        if self.text is not None:
            return self.text
        return "\n\n".join(content for _, content in self.messages or ())


@dataclass(frozen=True, slots=True)
class SampledPrompts:
    """The ordered prompts one category workload sends, and where they were drawn from."""

    file: str  # the file name as the campaign gives it
    sha256: str  # of the file's bytes
    seed: int
    category: str
    pool: int  # prompts of this category in the file
    prompts: tuple[DatasetPrompt, ...]

    def at(self, rep: int, concurrency: int, stream: int) -> DatasetPrompt:
        """The prompt stream `stream` of run `rep` at `concurrency` sends (module docstring)."""
        return self.prompts[((rep - 1) * concurrency + stream) % len(self.prompts)]

    @property
    def chat(self) -> bool:
        """Whether the prompts are chat turns (then every request goes to /v1/chat/completions)."""
        return any(p.messages is not None for p in self.prompts)

    def description(self) -> str:
        return (
            f"dataset {self.file} (sha256 {self.sha256[:16]}), category {self.category}: "
            f"{len(self.prompts)} of {self.pool} prompts drawn with seed {self.seed}"
        )


def default_sample_seed(workload_id: str) -> int:
    """The sample seed of a workload that names none: from its id, so every shard draws the same list."""
    return int.from_bytes(hashlib.sha256(f"dataset:{workload_id}".encode()).digest()[:4], "big")


def load_dataset(
    path: Path, shown: str, key: str, category: str | None
) -> tuple[str, tuple[DatasetPrompt, ...]]:
    """The file's sha256 and its prompts in file order; CampaignError naming the file and line (or the
    campaign key, when the file cannot be read) for each problem."""
    try:
        data = read_regular(path, MAX_DATASET_BYTES, "a dataset file")
    except NotReadable as exc:
        raise CampaignError([Problem(shown, f"dataset {str(path)!r} {exc}", key=key)]) from None
    sha = hashlib.sha256(data).hexdigest()
    where = str(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CampaignError([Problem(where, f"not UTF-8 at byte {exc.start}")]) from None
    objects, problems = _objects(text, where)
    prompts: list[DatasetPrompt] = []
    for index, (line, obj) in enumerate(objects):
        found = _prompt(obj, index, category)
        if isinstance(found, str):
            problems.append(Problem(where, found, line=line))
        else:
            prompts.append(found)
    if not problems and not prompts:
        problems.append(Problem(where, "holds no prompts; give one JSON object a line (or a JSON list)"))
    if problems:
        raise CampaignError(problems[:MAX_PROBLEMS], total=len(problems))
    return sha, tuple(prompts)


def _objects(text: str, where: str) -> tuple[list[tuple[int | None, Any]], list[Problem]]:
    """(line, object) per entry: a JSON list's items (no line), or one JSON value per non-blank line."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            return [], [Problem(where, f"not JSON: {exc.msg}", line=exc.lineno)]
        except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
            return [], [Problem(where, f"not JSON: {_why(exc)}")]
        return [(None, item) for item in items], []
    out: list[tuple[int | None, Any]] = []
    problems: list[Problem] = []
    # JSON Lines ends a line at "\n" only: U+0085 or U+2028 inside a string (valid JSON) ends none
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(Problem(where, f"not a JSON object: {exc.msg}", line=number))
        except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
            problems.append(Problem(where, f"not a JSON object: {_why(exc)}", line=number))
    return out, problems


def _why(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).split(";")[0]


def _unencodable(value: Any) -> bool:
    """True when a string of the entry holds a lone surrogate (JSON's "\\ud800" escape), which no
    request can send as UTF-8."""
    texts = value if isinstance(value, tuple) else (value,)
    for text in texts:
        parts = text if isinstance(text, tuple) else (text,)
        for part in parts:
            try:
                str(part).encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def _prompt(obj: Any, index: int, default_category: str | None) -> DatasetPrompt | str:
    """The prompt an entry holds, or what is wrong with it (module docstring: the keys read)."""
    if not isinstance(obj, dict):
        return f"entry {index} is not a JSON object"
    category = obj.get("category", default_category)
    if category is None:
        return (
            f"entry {index} has no category: give it a 'category' or set the workload's category for "
            "the whole file"
        )
    if not isinstance(category, str) or not _NAME.fullmatch(category):
        return f"entry {index}: category {category!r} is not a name (letters, digits, . _ + -; 64 at most)"
    found = _content(obj)
    if isinstance(found, str) and found.startswith("!"):
        return f"entry {index}: {found[1:]}"
    if _unencodable(found):
        return f"entry {index}: the prompt holds a lone surrogate (an unpaired \\ud800-\\udfff escape)"
    if isinstance(found, str):
        return DatasetPrompt(index, found, None, category)
    return DatasetPrompt(index, None, found, category)


def _content(obj: dict[str, Any]) -> str | Messages:
    """The text or chat turns of an entry; an error is returned as a string starting with '!'."""
    for key in ("prompt", "text"):
        if key in obj:
            value = obj[key]
            return value if isinstance(value, str) and value else f"!'{key}' must be a non-empty string"
    if "turns" in obj:
        turns = obj["turns"]
        first = turns[0] if isinstance(turns, list) and turns else None
        text = first.get("text") if isinstance(first, dict) else None
        return text if isinstance(text, str) and text else "!'turns' must start with a {\"text\": ...} turn"
    if "messages" in obj:
        return _messages(obj["messages"])
    if "conversations" in obj:
        turns = obj["conversations"]
        for turn in turns if isinstance(turns, list) else ():
            if isinstance(turn, dict) and turn.get("from") in _HUMAN_ROLES:
                value = turn.get("value")
                return value if isinstance(value, str) and value else "!the first human turn has no 'value'"
        return "!'conversations' holds no human turn"
    return "!no prompt: give 'prompt', 'text', 'turns', 'messages' or 'conversations'"


def _messages(value: Any) -> str | Messages:
    if not isinstance(value, list) or not value:
        return '!\'messages\' must be a non-empty list of {"role", "content"}'
    out = []
    for turn in value:
        role = turn.get("role") if isinstance(turn, dict) else None
        content = turn.get("content") if isinstance(turn, dict) else None
        if not isinstance(role, str) or not isinstance(content, str):
            return "!each message needs a string 'role' and a string 'content'"
        out.append((role, content))
    return tuple(out)


def sample(
    prompts: Sequence[DatasetPrompt], file: str, sha256: str, seed: int, samples: int | None
) -> tuple[SampledPrompts, ...]:
    """Per category (sorted by name), `samples` prompts drawn with `seed` (all when None), in drawn order.

    One generator per category, seeded from (seed, category), so adding a category to a file does not
    change what the others draw.
    """
    by_category: dict[str, list[DatasetPrompt]] = {}
    for prompt in prompts:
        by_category.setdefault(prompt.category, []).append(prompt)
    out = []
    for category in sorted(by_category):
        pool = by_category[category]
        rng = random.Random(f"{seed}:{category}")
        drawn = rng.sample(pool, min(samples, len(pool)) if samples is not None else len(pool))
        out.append(SampledPrompts(file, sha256, seed, category, len(pool), tuple(drawn)))
    return tuple(out)


def with_nonce(prompt: DatasetPrompt, nonce: str | None) -> tuple[str, Messages | None]:
    """The text (or the chat turns, the first turn's content prefixed) a request sends: the nonce first."""
    if prompt.messages is None:
        text = prompt.text or ""
        return (f"[{nonce}] {text}" if nonce else text), None
    if not nonce:
        return "", prompt.messages
    (role, content), *rest = prompt.messages
    return "", ((role, f"[{nonce}] {content}"), *rest)


async def run_workload(
    workload: WorkloadPlan,
    rep: int,
    base_url: str,
    *,
    concurrency: int,
    model: str,
    clock: Clock,
    headers: dict[str, str],
    limits: StreamLimits | None = None,
) -> RunResult:
    """One run of `workload`: its one prompt on every stream, or (a dataset workload) stream s sending
    `drawn.at(rep, concurrency, s)`; each stream with its own nonce when the workload asks."""
    from mtpverdict.collect import client as cl

    drawn = workload.drawn
    if drawn is None:
        return await cl.run_concurrent(
            base_url,
            concurrency=concurrency,
            model=model,
            prompt=workload.prompt,
            max_tokens=workload.max_tokens,
            chat=workload.chat,
            ignore_eos=workload.ignore_eos,
            clock=clock,
            nonce=workload.nonce,
            headers=headers,
            limits=limits,
        )
    cpu = time.process_time()
    start = clock.now()
    streams = await asyncio.gather(
        *(
            cl.stream_one(
                base_url,
                model=model,
                prompt=drawn.at(rep, concurrency, i),
                max_tokens=workload.max_tokens,
                chat=workload.chat,
                ignore_eos=workload.ignore_eos,
                clock=clock,
                stream_index=i,
                nonce=cl.make_nonce() if workload.nonce else None,
                headers=headers,
                limits=limits,
            )
            for i in range(concurrency)
        )
    )
    return cl.RunResult(tuple(streams), time.process_time() - cpu, clock.now() - start)


def request_fields(sampled: SampledPrompts | None, rep: int, concurrency: int, stream: int) -> dict[str, Any]:
    """What a request record says about its prompt: its index in the dataset file and its category."""
    if sampled is None:
        return {}
    prompt = sampled.at(rep, concurrency, stream)
    return {"prompt_index": prompt.index, "category": prompt.category}
