"""The previous measuring client (src/mtpverdict/collect/client.py at ecda5f1), kept for the benchmark only.

bench/collector_accuracy.py measures it beside the current client; nothing else imports it. Unchanged but
for this docstring's first paragraph. Its own description follows.

The measuring client: streamed OpenAI-compatible requests timed on one monotonic clock, no statistics.

Timestamps are seconds on time.perf_counter_ns() relative to a campaign epoch: t_start when the request
is sent, t_first at the first content delta, t_end at the last content delta. Token counts come from the
server's usage block (stream_options.include_usage), never from counting deltas, because under
speculation one delta carries several tokens.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

OUTPUT_KEPT_CHARS = 2000  # of a coherence output stored in records
# A content delta that arrives within this long of the previous one was read from a buffer in a burst
# (a starved client or server), not streamed as generated: 200 us is below any real per-token interval.
BUNCH_SECONDS = 0.0002


@dataclass(frozen=True, slots=True)
class StreamResult:
    """One streamed request as measured."""

    stream: int
    t_start: float
    t_first: float | None
    t_end: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    status: str
    error: str | None
    text: str
    chunks: int
    nonce: str | None
    bunched: int = 0  # deltas that arrived within BUNCH_SECONDS of the previous one

    @property
    def output_sha256(self) -> str | None:
        if self.status != "ok":
            return None
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class Clock:
    """Seconds since the campaign epoch on the monotonic performance counter."""

    def __init__(self) -> None:
        self.epoch_ns = time.perf_counter_ns()

    def now(self) -> float:
        return (time.perf_counter_ns() - self.epoch_ns) / 1e9


def make_nonce() -> str:
    """An unseeded nonce for the start of a prompt, so prefix caching cannot fake prefill."""
    return uuid.uuid4().hex[:12]


def _payload(
    model: str, prompt: str, max_tokens: int, chat: bool, ignore_eos: bool, stream: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0.0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def _delta_text(event: dict[str, Any], chat: bool) -> str:
    choices = event.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    if chat:
        delta = choice.get("delta") or {}
        text = delta.get("content") if isinstance(delta, dict) else None
    else:
        text = choice.get("text")
    return text if isinstance(text, str) else ""


async def stream_one(
    client: httpx.AsyncClient,
    base_url: str,
    *,
    model: str,
    prompt: str,
    max_tokens: int,
    chat: bool,
    ignore_eos: bool,
    clock: Clock,
    stream_index: int,
    nonce: str | None,
    headers: dict[str, str],
) -> StreamResult:
    """Send one streamed request and time it; any failure becomes an error result, never an exception."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    text_prompt = f"[{nonce}] {prompt}" if nonce else prompt
    body = _payload(model, text_prompt, max_tokens, chat, ignore_eos, stream=True)
    t_start = clock.now()
    t_first: float | None = None
    t_end: float | None = None
    usage: dict[str, Any] = {}
    pieces: list[str] = []
    chunks = 0
    bunched = 0
    error: str | None = None
    try:
        async with client.stream("POST", base_url + path, json=body, headers=headers) as response:
            if response.status_code != 200:
                detail = (await response.aread()).decode("utf-8", errors="replace")[:300]
                error = f"HTTP {response.status_code}: {detail}"
            else:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        event = json.loads(data)
                    except ValueError:
                        error = f"malformed SSE data: {data[:120]!r}"
                        break
                    if not isinstance(event, dict):
                        error = f"malformed SSE event: {data[:120]!r}"
                        break
                    if "error" in event:
                        error = f"server error in stream: {str(event['error'])[:200]}"
                        break
                    piece = _delta_text(event, chat)
                    if piece:
                        now = clock.now()
                        if t_first is None:
                            t_first = now
                        elif t_end is not None and now - t_end < BUNCH_SECONDS:
                            bunched += 1
                        t_end = now
                        pieces.append(piece)
                        chunks += 1
                    if isinstance(event.get("usage"), dict):
                        usage = event["usage"]
    except httpx.ReadTimeout:
        error = "stalled: no bytes within the stall guard"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:300]
    completion = usage.get("completion_tokens")
    prompt_tokens = usage.get("prompt_tokens")
    if error is None and (t_first is None or not isinstance(completion, int) or completion < 1):
        error = "no content or no usage block in the stream (stream_options.include_usage unsupported?)"
    ok = error is None
    return StreamResult(
        stream=stream_index,
        t_start=t_start,
        t_first=t_first if ok else None,
        t_end=t_end if ok else None,
        prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
        completion_tokens=completion if ok and isinstance(completion, int) else None,
        status="ok" if ok else "error",
        error=error,
        text="".join(pieces),
        chunks=chunks,
        nonce=nonce,
        bunched=bunched,
    )


async def run_concurrent(
    client: httpx.AsyncClient,
    base_url: str,
    *,
    concurrency: int,
    model: str,
    prompt: str,
    max_tokens: int,
    chat: bool,
    ignore_eos: bool,
    clock: Clock,
    nonce: bool,
    headers: dict[str, str],
) -> list[StreamResult]:
    """One run: `concurrency` streams sent together, each with its own nonce when asked."""
    tasks = [
        stream_one(
            client,
            base_url,
            model=model,
            prompt=prompt,
            max_tokens=max_tokens,
            chat=chat,
            ignore_eos=ignore_eos,
            clock=clock,
            stream_index=i,
            nonce=make_nonce() if nonce else None,
            headers=headers,
        )
        for i in range(concurrency)
    ]
    return list(await asyncio.gather(*tasks))


async def get_text(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> str | None:
    """GET a URL and return its body, or None when the server does not answer 200."""
    try:
        response = await client.get(url, headers=headers)
    except httpx.HTTPError:
        return None
    return response.text if response.status_code == 200 else None


async def complete_text(
    client: httpx.AsyncClient,
    base_url: str,
    *,
    model: str,
    prompt: str,
    max_tokens: int,
    chat: bool,
    headers: dict[str, str],
) -> tuple[str | None, str | None]:
    """A non-streamed greedy completion: (text, error)."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    try:
        response = await client.post(
            base_url + path,
            headers=headers,
            json=_payload(model, prompt, max_tokens, chat, False, stream=False),
        )
        if response.status_code != 200:
            return None, f"HTTP {response.status_code}: {response.text[:200]}"
        body = response.json()
        choice = body["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
        return (text if isinstance(text, str) else ""), None
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"[:300]


async def prompt_nll(
    client: httpx.AsyncClient, base_url: str, *, model: str, text: str, headers: dict[str, str]
) -> tuple[int, float] | str:
    """Teacher-forced mean negative log-likelihood of `text`: (tokens scored, mean NLL) or an error.

    Uses vLLM's prompt_logprobs extension (the first prompt token has no logprob); servers without it
    are asked for echo + logprobs, the older OpenAI form.
    """
    for body in (
        {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0},
        {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0.0, "echo": True, "logprobs": 0},
    ):
        try:
            response = await client.post(base_url + "/v1/completions", json=body, headers=headers)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:300]
        if response.status_code != 200:
            continue
        try:
            values = _prompt_logprobs(response.json())
        except (ValueError, KeyError, IndexError, TypeError):
            continue
        if values:
            return len(values), -sum(values) / len(values)
    return "the server returned no prompt logprobs (prompt_logprobs or echo + logprobs)"


def _prompt_logprobs(body: dict[str, Any]) -> list[float]:
    choice = body["choices"][0]
    found = choice.get("prompt_logprobs")
    values: list[float] = []
    if isinstance(found, list):
        for entry in found[1:]:
            if not isinstance(entry, dict) or not entry:
                continue
            # the scored token is the one with the best rank among those returned when it is included;
            # vLLM always includes the actual prompt token, listed first
            first = next(iter(entry.values()))
            lp = first.get("logprob") if isinstance(first, dict) else None
            if isinstance(lp, int | float) and math.isfinite(lp):
                values.append(float(lp))
        return values
    logprobs = choice.get("logprobs") or {}
    token_lps = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if isinstance(token_lps, list):
        values = [float(v) for v in token_lps[1:-1] if isinstance(v, int | float) and math.isfinite(v)]
    return values


def truncate(text: str) -> str:
    return text if len(text) <= OUTPUT_KEPT_CHARS else text[:OUTPUT_KEPT_CHARS]
