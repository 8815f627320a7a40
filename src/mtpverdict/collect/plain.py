"""Plain requests through httpx, each read bounded: GETs (/metrics, /v1/models, /version), a non-streamed
completion (identity probes, coherence cases) and the prompt's likelihood; no statistics."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any

import httpx

from mtpverdict.collect import served as sv
from mtpverdict.collect import sse
from mtpverdict.collect.client import DEFAULT_STALL_SECONDS, StreamLimits, _payload

OUTPUT_KEPT_CHARS = 2000  # of a coherence output stored in records
# Plain GETs (/metrics, /v1/models, /version): vLLM's /metrics is ~50 KB on the tiny CPU model
# (tests/data/recorded) and a few hundred KB on a large GPU seat; 16 MiB is far beyond either.
MAX_FETCH_BYTES = 16 * 1024 * 1024
FETCH_SECONDS = 60.0
MAX_JSON_BODY_BYTES = 64 * 1024 * 1024  # a non-streamed completion or prompt-logprobs answer


@dataclass(frozen=True, slots=True)
class Fetched:
    """A bounded GET: the text, or why there is none (breached: the answer passed a size or time bound)."""

    text: str | None
    error: str | None
    breached: bool = False


async def _bounded_read(response: httpx.Response, max_bytes: int) -> bytes:
    body = bytearray()
    async for piece in response.aiter_bytes():
        body += piece
        if len(body) > max_bytes:
            raise _TooLarge(f"the answer passed {max_bytes} bytes (the bound); not read further")
    return bytes(body)


class _TooLarge(Exception):
    pass


async def fetch_text(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    *,
    max_bytes: int = MAX_FETCH_BYTES,
    seconds: float = FETCH_SECONDS,
) -> Fetched:
    """GET a URL with a bound on its size and its total time: the text, or why there is none."""
    try:
        async with asyncio.timeout(seconds):
            async with client.stream(
                "GET", url, headers={"Accept-Encoding": "identity", **headers}
            ) as response:
                if response.status_code != 200:
                    return Fetched(None, f"GET {url}: HTTP {response.status_code}")
                body = await _bounded_read(response, max_bytes)
    except TimeoutError:
        return Fetched(None, f"GET {url}: took longer than {seconds:g} s (the bound)", breached=True)
    except _TooLarge as exc:
        return Fetched(None, f"GET {url}: {exc}", breached=True)
    except httpx.HTTPError as exc:
        return Fetched(None, f"GET {url}: {type(exc).__name__}: {exc}"[:300])
    return Fetched(body.decode("utf-8", errors="replace"), None)


async def get_text(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> str | None:
    """GET a URL (bounded) and return its body, or None when the server does not answer 200 in bounds."""
    return (await fetch_text(client, url, headers)).text


async def _post_json(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str], seconds: float
) -> tuple[Any, str | None]:
    """POST JSON, read the answer bounded in size and time: (decoded JSON, None) or (None, error)."""
    try:
        async with asyncio.timeout(seconds):
            async with client.stream(
                "POST", url, json=body, headers={"Accept-Encoding": "identity", **headers}
            ) as response:
                raw = await _bounded_read(response, MAX_JSON_BODY_BYTES)
                if response.status_code != 200:
                    return None, f"HTTP {response.status_code}: {raw[:200].decode('utf-8', 'replace')}"
        return sse.decode(raw), None
    except TimeoutError:
        return None, f"took longer than {seconds:g} s (the bound)"
    except (_TooLarge, ValueError, UnicodeDecodeError) as exc:
        return None, str(exc)[:300]
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:300]


@dataclass(frozen=True, slots=True)
class Completion:
    """A non-streamed completion: its text or why there is none, and what the server reported."""

    text: str | None
    error: str | None
    served: sv.Served | None = None  # usage, timing and acceptance, when the answer carried them validly


async def complete(
    client: httpx.AsyncClient,
    base_url: str,
    *,
    model: str,
    prompt: str,
    max_tokens: int,
    chat: bool,
    headers: dict[str, str],
    limits: StreamLimits | None = None,
    ignore_eos: bool = False,
) -> Completion:
    """A non-streamed greedy completion; with ignore_eos, max_tokens long.

    Its usage, timing and acceptance are validated as a stream's are (collect/served.py); an answer
    without them, or with values that fail, keeps its text and has no `served`.
    """
    limits = limits or StreamLimits()
    path = "/v1/chat/completions" if chat else "/v1/completions"
    sent = time.perf_counter_ns()
    body, error = await _post_json(
        client,
        base_url + path,
        _payload(model, prompt, max_tokens, chat, ignore_eos, stream=False),
        headers,
        limits.total_seconds(max_tokens),
    )
    if error is not None:
        return Completion(None, error)
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
    except (KeyError, IndexError, TypeError) as exc:
        return Completion(None, f"{type(exc).__name__}: {exc}"[:300])
    seen = sv.Seen(max_tokens, len(prompt.encode()), 0, (time.perf_counter_ns() - sent) / 1e6)
    try:
        found = sv.served(body, seen, limits.server_fields) if isinstance(body, dict) else None
    except sv.ServedValueError:
        found = None
    return Completion(text if isinstance(text, str) else "", None, found)


async def prompt_nll(
    client: httpx.AsyncClient, base_url: str, *, model: str, text: str, headers: dict[str, str]
) -> tuple[int, float] | str:
    """Teacher-forced mean negative log-likelihood of `text`: (tokens scored, mean NLL) or an error.

    Uses vLLM's prompt_logprobs extension (the first prompt token has no logprob); servers without it
    are asked for echo + logprobs, the older OpenAI form.
    """
    last_error = ""
    for body in (
        {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0},
        {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0.0, "echo": True, "logprobs": 0},
    ):
        found, error = await _post_json(
            client, base_url + "/v1/completions", body, headers, DEFAULT_STALL_SECONDS
        )
        if error is not None:
            last_error = error
            continue
        try:
            values = _prompt_logprobs(found)
        except (ValueError, KeyError, IndexError, TypeError):
            continue
        if values:
            return len(values), -sum(values) / len(values)
    return "the server returned no prompt logprobs (prompt_logprobs or echo + logprobs)" + (
        f"; last answer: {last_error}" if last_error else ""
    )


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
